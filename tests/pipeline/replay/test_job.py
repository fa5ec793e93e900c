"""Replay fidelity: Spark's grouped replay must equal plain runs of the engine."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest
from pyspark.sql import SparkSession

from quotagate.pipeline.replay.core import ORDER_COLUMNS, Replayer, replay_frame
from quotagate.pipeline.replay.job import replay
from quotagate.quota import (
    DEFAULT,
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    load_quota_file,
    nanos_to_percentage,
)

from ..conftest import CANDIDATE_QUOTAS

pytestmark = pytest.mark.spark
PREDICTED = ["predicted_throttle_ms", "predicted_cause", "predicted_error_code"]


def _engine(text: str) -> tuple[dict[str, ClientQuotaManager], ControllerMutationQuotaManager]:
    managers = {t: ClientQuotaManager(t) for t in ("produce", "fetch", "request")}
    controller = ControllerMutationQuotaManager()
    keys = {
        "producer_byte_rate": managers["produce"],
        "consumer_byte_rate": managers["fetch"],
        "request_percentage": managers["request"],
        "controller_mutation_rate": controller,
    }
    for entry in load_quota_file(text).entries:
        names = {
            t: (DEFAULT if entry.entity[t] is None else entry.entity[t])
            if t in entry.entity
            else None
            for t in ("user", "client-id")
        }
        for key, value in entry.config.items():
            keys[key].update_quota(names["user"], names["client-id"], value)
    return managers, controller


def direct_open_loop(events: pd.DataFrame, text: str) -> pd.DataFrame:
    """The oracle: one engine for all clients, every event in time order, the gateway's
    rules written out plainly (spec §5.4, §6.1)."""
    managers, controller = _engine(text)
    produce, fetch, request = managers["produce"], managers["fetch"], managers["request"]
    strict_since = {19: 6, 20: 5, 37: 3}
    out = events.sort_values(ORDER_COLUMNS, kind="mergesort", ignore_index=True)
    throttles, causes, errors = [], [], []
    for e in out.itertuples(index=False):
        user, now = e.principal.split(":", 1)[1], int(e.ts_ms)
        nanos = (int(e.gateway_time_us) + int(e.upstream_time_us)) * 1000
        r = request.record_and_get_throttle_ms(user, e.client_id, nanos_to_percentage(nanos), now)
        other, cause, error = 0, "", 0
        if e.api_key == 0:
            other = produce.record_and_get_throttle_ms(user, e.client_id, int(e.request_bytes), now)
            cause = "produce"
        elif e.api_key == 1:
            other = fetch.record_and_get_throttle_ms(user, e.client_id, int(e.response_bytes), now)
            if max(other, r) > 0:
                fetch.unrecord(user, e.client_id, int(e.response_bytes), now)
            cause = "fetch"
        elif e.api_key in strict_since and e.partition_mutations > 0:
            n = int(e.partition_mutations)
            if e.api_version >= strict_since[e.api_key]:
                other = controller.record_and_get_throttle_ms(user, e.client_id, n, now)
                error = 89 if other > 0 else 0
            else:
                quota = controller.new_permissive_quota(user, e.client_id, now)
                quota.record(n, now)
                other = quota.throttle_time(now)
            cause = "controller_mutation"
        if other > r:
            throttles.append(other)
            causes.append(cause)
        else:
            throttles.append(r)
            causes.append("request" if r > 0 else "")
        errors.append(error)
    out["predicted_throttle_ms"] = throttles
    out["predicted_cause"] = causes
    out["predicted_error_code"] = errors
    return out


def _canonical(frame: pd.DataFrame, extra: list[str]) -> pd.DataFrame:
    columns = ORDER_COLUMNS + extra
    return (
        frame[columns]
        .sort_values(columns, ignore_index=True)
        .astype(
            {
                c: "int64"
                for c in columns
                if c not in ("principal", "client_id", "client_host", "predicted_cause")
            }
        )
    )


def _events(events_dir: Path) -> pd.DataFrame:
    return ds.dataset(str(events_dir), format="parquet", partitioning="hive").to_table().to_pandas()


@pytest.fixture(scope="module")
def open_replay(
    spark: SparkSession, events_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    out = tmp_path_factory.mktemp("replay-open")
    replay(spark, events_dir, CANDIDATE_QUOTAS, out)
    return out


def test_open_loop_replay_equals_one_engine_over_all_events(
    events_dir: Path, open_replay: Path
) -> None:
    spark_result = pd.read_parquet(open_replay / "requests")
    oracle = direct_open_loop(_events(events_dir), CANDIDATE_QUOTAS)
    assert len(spark_result) == len(oracle) == 60_000
    pd.testing.assert_frame_equal(
        _canonical(spark_result, PREDICTED), _canonical(oracle, PREDICTED)
    )
    # The candidate must actually bite, on every quota type, or the test proves nothing.
    causes = set(oracle.loc[oracle["predicted_throttle_ms"] > 0, "predicted_cause"])
    assert causes == {"produce", "fetch", "request", "controller_mutation"}
    assert (oracle["predicted_error_code"] == 89).sum() > 0


def test_replay_summaries_count_what_the_requests_say(open_replay: Path) -> None:
    requests = pd.read_parquet(open_replay / "requests")
    entities = pd.read_parquet(open_replay / "entities")
    assert entities["requests"].sum() == len(requests)
    assert entities["throttled_requests"].sum() == (requests["predicted_throttle_ms"] > 0).sum()
    assert entities["total_throttle_ms"].sum() == requests["predicted_throttle_ms"].sum()
    assert entities["max_throttle_ms"].max() == requests["predicted_throttle_ms"].max()
    heatmap = pd.read_parquet(open_replay / "heatmap")
    assert heatmap["throttle_ms"].sum() == requests["predicted_throttle_ms"].sum()


def test_closed_loop_replay_equals_one_process_replay(
    spark: SparkSession, events_dir: Path, tmp_path: Path
) -> None:
    replay(spark, events_dir, CANDIDATE_QUOTAS, tmp_path, closed_loop=True)
    spark_result = pd.read_parquet(tmp_path / "requests")
    single = replay_frame(_events(events_dir), CANDIDATE_QUOTAS, closed_loop=True)
    extra = [*PREDICTED, "replay_ts_ms", "delay_ms"]
    pd.testing.assert_frame_equal(_canonical(spark_result, extra), _canonical(single, extra))
    assert (single["delay_ms"] > 0).sum() > 0


def _produce(ts: int, host: str, size: int) -> dict[str, object]:
    return {
        "ts_ms": ts, "gateway_id": "gw", "principal": "User:alice", "client_id": "app",
        "client_host": host, "api_key": 0, "api_version": 9, "request_bytes": size,
        "response_bytes": 50, "partition_mutations": 0, "gateway_time_us": 0,
        "upstream_time_us": 0, "throttle_ms": 0, "throttle_cause": "",
    }  # fmt: skip


def test_closed_loop_mutes_only_the_throttled_connection() -> None:
    quotas = '[[quota]]\nuser = "alice"\nproducer_byte_rate = 1000\n'
    t0 = 1_700_000_000_000
    events = pd.DataFrame(
        [
            _produce(t0, "10.0.0.1:1", 50_000),  # way over: throttled
            _produce(t0 + 10, "10.0.0.1:1", 100),  # same connection: waits for the mute
            _produce(t0 + 20, "10.0.0.2:2", 100),  # another connection: read on time
        ]
    )
    closed = replay_frame(events, quotas, closed_loop=True).set_index("client_host", append=True)
    first, second, other = closed.itertuples()
    throttle = first.predicted_throttle_ms
    assert throttle > 1000
    assert second.replay_ts_ms == t0 + throttle
    assert second.delay_ms == throttle - 10
    assert other.replay_ts_ms == t0 + 20 and other.delay_ms == 0
    opened = replay_frame(events, quotas, closed_loop=False)
    assert opened["replay_ts_ms"].tolist() == events["ts_ms"].tolist()
    assert opened["delay_ms"].tolist() == [0, throttle - 10, 0]
    assert np.all(opened["predicted_throttle_ms"].to_numpy()[1:] > 0)


def test_request_quota_exempts_cluster_actions_but_not_update_features() -> None:
    """Spec §4: cluster actions go to the exempt sensor; UpdateFeatures is throttled."""
    quotas = '[[quota]]\nuser = "alice"\nrequest_percentage = 1.0\n'
    replayer = Replayer(quotas)
    heavy_us = 5_000_000  # 5 s of thread time: far over 1 % of a thread
    now = 1_700_000_000_000
    exempt = replayer.decide("alice", "app", 4, 7, 0, heavy_us, now)  # LeaderAndIsr
    assert exempt[0] == 0
    throttle_ms, cause, _ = replayer.decide("alice", "app", 57, 1, 0, heavy_us, now)
    assert throttle_ms > 0 and cause == "request"


def test_request_quota_exempts_acks_zero_produce_and_follower_fetches_as_the_gateway_does() -> None:
    """An acks=0 produce and a follower fetch are exempt from the request quota (spec §4)."""
    quotas = '[[quota]]\nuser = "alice"\nrequest_percentage = 1.0\n'
    replayer = Replayer(quotas)
    heavy_us = 5_000_000
    now = 1_700_000_000_000
    acks_zero = replayer.decide("alice", "app", 0, 9, 1000, heavy_us, now, acks=0)
    assert acks_zero[0] == 0
    follower = replayer.decide("alice", "app", 1, 13, 1000, heavy_us, now, follower=True)
    assert follower[0] == 0
    throttle_ms, cause, _ = replayer.decide("alice", "app", 0, 9, 1000, heavy_us, now, acks=1)
    assert throttle_ms > 0 and cause == "request"


def test_the_candidates_exempt_principals_are_metered_never_throttled() -> None:
    """quota.exempt.principals in the candidate's [broker]: as the gateway's decision, the
    exempt principal's bytes still count on the tenant it shares with bob."""
    quotas = (
        '[[quota]]\ndefaults = ["user"]\nproducer_byte_rate = 1000\n'
        '[[quota]]\ntenant = "team"\nproducer_byte_rate = 1000\n'
        '[broker]\n"tenant.mapping.rules" = "RULE:client-id:^app$/team/"\n'
    )  # every event names no tenant: the candidate's rules make alice and bob one team
    t0 = 1_700_000_000_000
    events = pd.DataFrame(
        [
            _produce(t0, "10.0.0.1:1", 50_000),  # alice, far over both quotas
            {**_produce(t0 + 10, "10.0.0.2:2", 100), "principal": "User:bob"},
        ]
    )
    exempt = '"quota.exempt.principals" = ["User:alice"]\n'  # in the same [broker]
    plain = replay_frame(events, quotas, closed_loop=False)
    spared = replay_frame(events, quotas + exempt, closed_loop=False)
    assert plain["predicted_throttle_ms"].tolist()[0] > 0
    assert spared["predicted_throttle_ms"].tolist()[0] == 0
    # bob alone is under his own quota: only alice's metered bytes on the tenant slow him.
    assert spared["predicted_cause"].tolist()[1] == "tenant_produce"
    assert spared["predicted_throttle_ms"].tolist()[1] > 0
