"""The quota stages on versions Kafka 4.0 removed (hand-built exchanges): metered when the
gateway can read what the quota needs, UNSUPPORTED_VERSION in the version's own shape when it
cannot, untouched when no quota applies to the client, and never a closed connection."""

from __future__ import annotations

import struct

from quotagate.enforcement import QuotaEnforcement, QuotaRuntime, QuotaSettings
from quotagate.enforcement.produce import REFUSAL_ERROR
from quotagate.enforcement.ticket import TICKET_KEY
from quotagate.gateway import Outcome, StageChain
from quotagate.protocol import api_keys
from quotagate.protocol.framing import with_size_prefix
from quotagate.quota import TopicBytesInQuota
from quotagate.store.quotas import Change
from support import old_frames
from support.exchanges import NOW_MS, chain, raw_exchange, run_request, run_response


def _stages(*changes: Change, runtime: QuotaRuntime | None = None) -> StageChain:
    runtime = runtime or QuotaRuntime(QuotaSettings(num_partitions=1))
    runtime.store_sync.alter_client_quotas(list(changes), "t", "t")
    return chain(QuotaEnforcement(runtime).stages())


def test_produce_v2_over_its_quota_is_held_muted_and_throttled_in_its_last_field() -> None:
    stages = _stages(Change({"client-id": "old"}, "producer_byte_rate", 1000))
    ex = raw_exchange(old_frames.produce(2, old_frames.filler([("t", [(0, 50_000)])])))
    seen = run_request(stages, ex)
    assert ex.outcome is Outcome.FORWARD and ex.hold
    ticket = ex.get(TICKET_KEY)
    assert ticket is not None and ticket.topics == [("t", 50_000)] and ticket.produce_ms > 0
    run_response(stages, ex, seen, old_frames.produce_response(2, [("t", 0, 0, 0)]))
    assert ex.mute_ms > 0
    assert ex.response_frame is not None
    assert struct.unpack(">i", ex.response_frame[-4:])[0] == ex.mute_ms


def test_produce_v0_with_acks_0_is_decided_on_arrival() -> None:
    stages = _stages(Change({"client-id": "old"}, "producer_byte_rate", 1000))
    ex = raw_exchange(old_frames.produce(0, old_frames.filler([("t", [(0, 50_000)])]), acks=0))
    run_request(stages, ex)
    ticket = ex.get(TICKET_KEY)
    assert ticket is not None and ticket.finished and ex.mute_ms > 0
    assert ex.acks == 0 and ex.outcome is Outcome.FORWARD


def _hot_runtime() -> QuotaRuntime:
    """Topic ``hot`` over its bytes-in threshold and the total over its own at NOW_MS."""
    runtime = QuotaRuntime(QuotaSettings())
    quota = TopicBytesInQuota(100.0, NOW_MS - 20_000)
    quota.set_topic_threshold("hot", 10.0)
    for t in range(NOW_MS - 20_000, NOW_MS, 1000):
        quota.record_accepted("hot", 100_000, t)
    runtime.topic_quota = quota
    return runtime


def test_produce_v1_refused_topic_is_cut_out_and_answered_in_the_merged_response() -> None:
    stages = chain(QuotaEnforcement(_hot_runtime()).stages())
    topics = [("cold", [(0, 10)]), ("hot", [(2, 20)])]
    ex = raw_exchange(old_frames.produce(1, old_frames.filler(topics)))
    seen = run_request(stages, ex)
    assert ex.outcome is Outcome.FORWARD
    assert ex.request_frame == old_frames.produce(1, old_frames.filler(topics[:1]))
    run_response(stages, ex, seen, old_frames.produce_response(1, [("cold", 0, 0, 5)]))
    assert ex.response_frame is not None
    body = ex.response_frame[8:-4]
    assert (
        body
        == old_frames.produce_response(1, [("cold", 0, 0, 5), ("hot", 2, REFUSAL_ERROR, -1)])[8:-4]
    )


def test_produce_v2_whose_topics_are_all_refused_is_answered_by_the_gateway() -> None:
    stages = chain(QuotaEnforcement(_hot_runtime()).stages())
    ex = raw_exchange(old_frames.produce(2, old_frames.filler([("hot", [(0, 20)])])))
    seen = run_request(stages, ex)
    assert ex.outcome is Outcome.RESPOND
    run_response(stages, ex, seen)
    assert ex.response_frame is not None
    assert (
        ex.response_frame[:-4]
        == old_frames.produce_response(2, [("hot", 0, REFUSAL_ERROR, -1)])[:-4]
    )


def test_fetch_v2_under_a_fetch_quota_gets_unsupported_version_in_its_shape() -> None:
    stages = _stages(Change({"client-id": "old"}, "consumer_byte_rate", 1000))
    ex = raw_exchange(old_frames.fetch(2, [("t", [0, 1])]))
    seen = run_request(stages, ex)
    assert ex.outcome is Outcome.RESPOND
    run_response(stages, ex, seen)
    partition = [struct.pack(">ihqi", p, 35, -1, 0) for p in (0, 1)]
    body = struct.pack(">ii", 0, 1) + old_frames.string("t") + struct.pack(">i", 2)
    assert ex.response_frame == with_size_prefix(struct.pack(">i", 7) + body + b"".join(partition))
    ticket = ex.get(TICKET_KEY)
    assert ticket is not None and ticket.error_code == 35


def test_fetch_v3_under_a_fetch_quota_is_capped_and_emptied_when_throttled() -> None:
    # Kafka's default windows: at most 1000 B/s x 10 s may be asked for in one fetch.
    stages = _stages(Change({"client-id": "old"}, "consumer_byte_rate", 1000))
    ex = raw_exchange(old_frames.fetch(3, [("t", [0])]))
    seen = run_request(stages, ex)
    assert ex.outcome is Outcome.FORWARD
    assert ex.request_frame == old_frames.fetch(3, [("t", [0])]).replace(
        struct.pack(">i", 1 << 20), struct.pack(">i", 10_000), 1
    )
    records = b"x" * 50_000  # one batch over the cap: a broker returns it whole
    partition = struct.pack(">ihq", 0, 0, 1) + struct.pack(">i", len(records)) + records
    body = struct.pack(">ii", 0, 1) + old_frames.string("t") + struct.pack(">i", 1) + partition
    run_response(stages, ex, seen, with_size_prefix(struct.pack(">i", 7) + body))
    assert ex.mute_ms > 0
    assert ex.response_frame == with_size_prefix(struct.pack(">iii", 7, ex.mute_ms, 0))


def test_fetch_v0_is_forwarded_untouched_when_no_fetch_quota_applies_to_the_client() -> None:
    stages = _stages(Change({"client-id": "someone-else"}, "consumer_byte_rate", 1000))
    frame = old_frames.fetch(0, [("t", [0])])
    ex = raw_exchange(frame)
    run_request(stages, ex)
    assert ex.outcome is Outcome.FORWARD and ex.request_frame == frame
    follower = raw_exchange(old_frames.fetch(2, [("t", [0])], replica_id=3))
    limited = _stages(Change({"client-id": "old"}, "consumer_byte_rate", 1000))
    run_request(limited, follower)
    assert follower.outcome is Outcome.FORWARD  # follower fetches are exempt


def test_create_topics_v0_is_charged_to_the_mutation_quota_and_learned() -> None:
    runtime = QuotaRuntime(QuotaSettings(num_partitions=1))
    stages = _stages(Change({"client-id": "old"}, "controller_mutation_rate", 1.0), runtime=runtime)
    ex = raw_exchange(old_frames.create_topics(0, [("a", 30), ("b", -1)]))
    seen = run_request(stages, ex)
    assert ex.outcome is Outcome.FORWARD  # permissive: admitted, throttled afterwards
    ticket = ex.get(TICKET_KEY)
    assert ticket is not None and ticket.partition_mutations == 31
    results = struct.pack(">i", 2) + old_frames.string("a") + b"\0\0"
    results += old_frames.string("b") + b"\0\0"
    run_response(stages, ex, seen, with_size_prefix(struct.pack(">i", 7) + results))
    assert runtime.facts.partitions["a"] == 30 and runtime.facts.partitions["b"] == 1
    assert ex.mute_ms > 0  # 31 mutations on a 1/s quota
    delete = raw_exchange(old_frames.delete_topics(["a"]))
    run_request(stages, delete)
    ticket = delete.get(TICKET_KEY)
    assert ticket is not None and ticket.partition_mutations == 30


def test_create_topics_v1_is_forwarded_untouched_for_a_client_without_a_quota() -> None:
    stages = _stages(Change({"client-id": "someone-else"}, "controller_mutation_rate", 1.0))
    frame = old_frames.create_topics(1, [("a", 3)], client_id="free")
    ex = raw_exchange(frame)
    run_request(stages, ex)
    assert ex.outcome is Outcome.FORWARD and ex.request_frame == frame
    ticket = ex.get(TICKET_KEY)
    assert ticket is not None and ticket.partition_mutations == 0


def test_a_version_newer_than_the_gateway_knows_is_refused_only_under_an_applying_quota() -> None:
    stages = _stages(Change({"client-id": "old"}, "controller_mutation_rate", 1.0))
    future = old_frames.request(api_keys.CREATE_TOPICS, 99, b"\0\0\0\0")
    ex = raw_exchange(future)
    run_request(stages, ex)
    assert ex.outcome is Outcome.CLOSE and "version 99" in ex.close_reason
    free = raw_exchange(old_frames.request(api_keys.CREATE_TOPICS, 99, b"\0", client_id="free"))
    run_request(stages, free)
    assert free.outcome is Outcome.FORWARD
