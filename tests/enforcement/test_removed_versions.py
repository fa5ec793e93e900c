"""Versions Kafka 4.0 removed, sent by old clients through a gateway with quotas, to a real
tansu broker: metered where the gateway can read what the quota needs, UNSUPPORTED_VERSION
in the version's own shape where it cannot, forwarded untouched when no quota applies, and
the connection kept open either way.

Produce v0-2 are sent with message-format-2 batches: tansu closes the connection on the
message-format-1 sets those versions were made for (the last test shows the gateway passes
that answer on as it is)."""

from __future__ import annotations

import logging
import socket
import struct
import time
import uuid
import zlib
from typing import Any

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from quotagate.protocol import api_keys
from quotagate.protocol.framing import with_size_prefix
from quotagate.store.quotas import Change
from support import old_frames
from support.exchanges import long_poll_fetch

pytestmark = pytest.mark.integration

WINDOWS = {"quota.window.num": 2, "quota.window.size.seconds": 1}


def _batch(values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=None, key=None, value=value, headers=[])
    return bytes(builder.build())


def _message_set_v1(value: bytes) -> bytes:
    """One message-format-1 message (offset, size, crc, magic 1, attributes, timestamp,
    key, value): what Produce v2 was made for."""
    inner = struct.pack(">bbq", 1, 0, 0) + struct.pack(">i", -1)
    inner += struct.pack(">i", len(value)) + value
    message = struct.pack(">I", zlib.crc32(inner)) + inner
    return struct.pack(">qi", 0, len(message)) + message


def _create(client: Any, topic: str) -> None:
    client.send_frame(old_frames.create_topics(0, [(topic, 1)], client_id="setup"))
    assert client.read_frame()[8:] == struct.pack(">i", 1) + old_frames.string(topic) + b"\0\0"


def _exchange(host: str, port: int, frame: bytes) -> bytes | None:
    """One request on a fresh connection; None if the other side closed it."""
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(frame)
        data = b""
        try:
            while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
                chunk = sock.recv(65536)
                if not chunk:
                    return None
                data += chunk
        except ConnectionResetError:
            return None
        return data


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_v0_to_v2_is_metered_throttled_and_stored(
    version: int, quota_tansu: Any, start_quota_gateway: Any, raw_client: Any
) -> None:
    gateway = start_quota_gateway(quota_tansu.bootstrap, quotas=WINDOWS)
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "old"}, "producer_byte_rate", 10_000.0)], "test", "test"
    )
    topic = f"old-produce-{version}-{uuid.uuid4().hex[:6]}"
    host, port = gateway.host_port
    batch = _batch([b"x" * 1000] * 30)  # ~30 kB: three seconds' worth of the quota
    with raw_client(host, port, "old") as old:
        _create(old, topic)
        started = time.monotonic()
        for i in range(2):
            old.send_frame(old_frames.produce(version, [(topic, [(0, batch)])], client_id="old"))
            answer = old.read_frame()
            expected = old_frames.produce_response(version, [(topic, 0, 0, 30 * i)])
            if version >= 1:
                throttle = struct.unpack(">i", answer[-4:])[0]
                assert throttle > 1000, "the quota's throttle is written into the answer"
                expected = expected[:-4] + answer[-4:]
            assert answer == expected
        # The second request was not read before the first one's throttle had passed.
        assert time.monotonic() - started > 1.0
        fetched = old.send(long_poll_fetch(topic, 100))
    assert int(fetched.responses[0].partitions[0].high_watermark) == 60
    gateway.stop()


def test_fetch_v0_to_v2_under_a_fetch_quota_is_answered_and_the_connection_kept(
    quota_tansu: Any,
    start_quota_gateway: Any,
    raw_client: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    gateway = start_quota_gateway(quota_tansu.bootstrap)
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "old"}, "consumer_byte_rate", 10_000.0)], "test", "test"
    )
    topic = f"old-fetch-{uuid.uuid4().hex[:6]}"
    host, port = gateway.host_port
    with raw_client(host, port, "old") as old:
        _create(old, topic)
        old.send_frame(old_frames.produce(2, [(topic, [(0, _batch([b"a", b"b"]))])]))
        old.read_frame()
        for version in range(3):
            old.send_frame(old_frames.fetch(version, [(topic, [0])], client_id="old"))
            body = struct.pack(">i", 0) if version >= 1 else b""
            body += struct.pack(">i", 1) + old_frames.string(topic) + struct.pack(">i", 1)
            body += struct.pack(">ihqi", 0, 35, -1, 0)
            assert old.read_frame() == with_size_prefix(struct.pack(">i", 7) + body)
        # Still open: a modelled request on the same connection is answered.
        assert old.request(api_keys.METADATA, 1, topics=None).brokers
        # What ApiVersions offers is what holds: removed versions the gateway meters or
        # forwards for everyone, not Fetch v0-2 (tansu itself has all of them from v0).
        offered = old.request(
            api_keys.API_VERSIONS, 3, client_software_name="old", client_software_version="1"
        )
        low = {int(k.api_key): int(k.min_version) for k in offered.api_keys}
        assert low[api_keys.PRODUCE] == 0 and low[api_keys.CREATE_TOPICS] == 0
        assert low[api_keys.DELETE_TOPICS] == 0 and low[api_keys.LIST_OFFSETS] == 0
        assert low[api_keys.FETCH] == 3
    line = next(r.getMessage() for r in caplog.records if "unsupported_version" in r.getMessage())
    assert "api=fetch" in line and "client_id=old" in line and "version=0" in line
    # A client no fetch quota applies to is forwarded untouched: tansu's own answer.
    frame = old_frames.fetch(3, [(topic, [0])], client_id="free")
    straight_host, _, straight_port = quota_tansu.bootstrap.rpartition(":")
    straight = _exchange(straight_host, int(straight_port), frame)
    assert straight is not None and len(straight) > 100  # the two records
    assert _exchange(host, port, frame) == straight
    gateway.stop()


def test_fetch_v3_is_metered_and_a_throttled_one_answered_empty(
    quota_tansu: Any, start_quota_gateway: Any, raw_client: Any
) -> None:
    gateway = start_quota_gateway(quota_tansu.bootstrap)
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "old"}, "consumer_byte_rate", 100.0)], "test", "test"
    )
    topic = f"old-fetch-v3-{uuid.uuid4().hex[:6]}"
    host, port = gateway.host_port
    with raw_client(host, port, "old") as old:
        _create(old, topic)
        old.send_frame(old_frames.produce(2, [(topic, [(0, _batch([b"z" * 3000]))])]))
        old.read_frame()
        # 3 kB against 100 B/s over Kafka's 10 s window: throttled, so no data is sent.
        old.send_frame(old_frames.fetch(3, [(topic, [0])], client_id="old"))
        answer = old.read_frame()
        correlation, throttle, topics = struct.unpack(">iii", answer[4:])
        assert correlation == 7 and topics == 0 and throttle > 10_000
    gateway.stop()


def test_create_and_delete_topics_v0_are_charged_to_the_mutation_quota(
    quota_tansu: Any, start_quota_gateway: Any, raw_client: Any
) -> None:
    gateway = start_quota_gateway(
        quota_tansu.bootstrap,
        quotas={"controller.quota.window.num": 2, "controller.quota.window.size.seconds": 1},
    )
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "old"}, "controller_mutation_rate", 2.0)], "test", "test"
    )
    topic = f"old-admin-{uuid.uuid4().hex[:6]}"
    host, port = gateway.host_port
    with raw_client(host, port, "old") as old:
        started = time.monotonic()
        old.send_frame(old_frames.create_topics(1, [(topic, 6)], client_id="old"))
        created = old.read_frame()
        # v1: name, error, error message; no throttle field, so the mute is the throttle.
        assert created[8:] == (
            struct.pack(">i", 1) + old_frames.string(topic) + b"\0\0" + b"\xff\xff"
        )
        old.send_frame(old_frames.delete_topics([topic], client_id="old"))
        deleted = old.read_frame()
        assert deleted[8:] == struct.pack(">i", 1) + old_frames.string(topic) + b"\0\0"
        # 6 mutations on a 2/s bucket holding 4: 1 s before the delete was read.
        assert time.monotonic() - started > 0.9
        started = time.monotonic()
        metadata = old.request(api_keys.METADATA, 1, topics=None)
        # The delete's 6 partitions (learned from the create) from an empty bucket: 3 s.
        assert time.monotonic() - started > 2.0
    assert topic not in {str(t.name) for t in metadata.topics}
    assert gateway.runtime.facts.partitions.get(topic) is None  # learned: created, deleted
    gateway.stop()


def test_produce_of_message_format_1_gets_tansus_own_answer(
    quota_tansu: Any, start_quota_gateway: Any, raw_client: Any
) -> None:
    """tansu closes the connection on a message-format-1 produce; through the gateway the
    client sees the same, because the upstream connection it stood on was closed."""
    gateway = start_quota_gateway(quota_tansu.bootstrap)
    gateway.runtime.store_sync.alter_client_quotas(
        [Change({"client-id": "old"}, "producer_byte_rate", 10_000.0)], "test", "test"
    )
    topic = f"old-format-{uuid.uuid4().hex[:6]}"
    host, port = gateway.host_port
    with raw_client(host, port, "setup") as setup:
        _create(setup, topic)
    frame = old_frames.produce(2, [(topic, [(0, _message_set_v1(b"hello"))])], client_id="old")
    straight_host, _, straight_port = quota_tansu.bootstrap.rpartition(":")
    assert _exchange(straight_host, int(straight_port), frame) is None
    assert _exchange(host, port, frame) is None
    gateway.stop()
