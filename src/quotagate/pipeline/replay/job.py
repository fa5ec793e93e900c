"""``replay``: a candidate quota configuration run over recorded events on Spark.

Events are grouped so that every group can run on its own engine instance (see
``sharing.replay_groups``). Whole groups are dealt to slots, largest first onto the
lightest slot. Each replay task then reads its own slot's clients straight from the
events' Parquet files with pyarrow in its Python worker, replays them in time order
through ``replay.core`` on one engine (the slot's groups share no sensor, so one engine
decides exactly as one per group would), writes the predictions with pyarrow and hands
back only per-client, per-bucket counts (``replay_slot``). The JVM counts events per
client (for the groups and the heatmap's bounds) and schedules the tasks; no event crosses
between the JVM and Python, and none is copied into a layout first: those copies and the
Arrow exchange of a ``mapInArrow`` over the events were most of the replay's cost
(BENCHMARKS.md, "Pipeline").
"""

from __future__ import annotations

import heapq
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from quotagate.pipeline.events import check_usage_dataset
from quotagate.pipeline.quotas import parse_quotas
from quotagate.pipeline.replay.slot import (
    CELL_SCHEMA,
    CLIENT,
    SlotJob,
    client_counts,
    run_slot,
    tenant_members,
)
from quotagate.pipeline.sharing import has_tenant_quotas, replay_groups
from quotagate.pipeline.tables import write_json

HEATMAP_BUCKETS = 48


def replay(
    spark: SparkSession,
    events_path: str | Path,
    quota_text: str,
    out: str | Path,
    *,
    closed_loop: bool = False,
    slots: int | None = None,
) -> dict[str, Any]:
    """Replay and write ``requests/``, ``entities/``, ``heatmap/`` and ``summary.json``.

    ``slots``: how many tasks share the groups; by default as many as Spark runs at once
    (``defaultParallelism``: the cores of ``local[N]`` or of the cluster's executors). One
    wave of tasks: a second wave cost a pause between waves and a read of the events per
    task (BENCHMARKS.md, "Pipeline")."""
    out = Path(out)
    started = time.perf_counter()
    check_usage_dataset(events_path)
    slots = slots or spark.sparkContext.defaultParallelism
    clients, first_ms, last_ms = _deal_clients(events_path, quota_text, slots)
    # Absolute: an executor's working directory is not the driver's.
    job = SlotJob(
        events=str(Path(events_path).resolve()),
        clients=clients,
        requests=str((out / "requests").resolve()),
        quota_text=quota_text,
        closed_loop=closed_loop,
        first_ms=first_ms,
        bucket_ms=max(1, (last_ms - first_ms) // HEATMAP_BUCKETS + 1),
    )
    _fresh(out / "requests")
    cells = _run_slots(spark, job)
    replay_s = time.perf_counter() - started
    _write_table(entity_summary(cells), out / "entities")
    _write_table(throttle_heatmap(cells), out / "heatmap")
    events_n = int(cells["requests"].sum())
    summary = {
        "mode": "closed" if closed_loop else "open",
        "events": events_n,
        "throttled_requests": int(cells["throttled_requests"].sum()),
        "recorded_throttled_requests": int(cells["recorded_throttled_requests"].sum()),
        "agreement_with_recorded": int(cells["agree"].sum()) / events_n if events_n else 1.0,
        "rejected_mutation_requests": int(cells["rejected_requests"].sum()),
        "replay_seconds": round(replay_s, 3),
        "events_per_second": round(events_n / replay_s, 1) if replay_s else None,
    }
    write_json(out / "summary.json", summary)
    return summary


def _deal_clients(
    events_path: str | Path, quota_text: str, slots: int
) -> tuple[tuple[tuple[tuple[str, str], ...], ...], int, int]:
    """The clients (principal, client id) of every slot, and the first and last event
    time (0, 0 without events).

    Counted in the driver with pyarrow over three columns: a Spark job for it cost more
    wall time than the counting (BENCHMARKS.md, "Pipeline"), and the driver reads the
    events' files anyway (``check_usage_dataset``)."""
    quota_file = parse_quotas(quota_text)
    counted = client_counts(str(events_path))
    members: list[tuple[str, str, str]] = []
    if has_tenant_quotas(quota_file) and quota_file.tenant_mapping_rules is None:
        # A tenant's clients share its sensors: they must replay in one group. (Rules in
        # the candidate name the tenants themselves: replay_groups maps the pairs.)
        members = tenant_members(str(events_path))
    principals = counted["principal"].to_pylist()
    client_ids = counted["client_id"].to_pylist()
    counts = counted["count"].to_pylist()
    pairs = list(zip(principals, client_ids, strict=True))
    groups = replay_groups(quota_file, pairs, members)
    sizes: dict[int, int] = {}
    for pair, count in zip(pairs, counts, strict=True):
        group = groups[pair]
        sizes[group] = sizes.get(group, 0) + count
    placed = _deal(sizes, slots)
    clients: list[list[tuple[str, str]]] = [[] for _ in range(slots)]
    for client, group in sorted(groups.items()):
        clients[placed[group]].append(client)
    if not counts:
        return tuple(tuple(c) for c in clients), 0, 0
    first_ms = pc.min(counted["lo"]).as_py()
    last_ms = pc.max(counted["hi"]).as_py()
    return tuple(tuple(c) for c in clients), int(first_ms), int(last_ms)


def _run_slots(spark: SparkSession, job: SlotJob) -> pd.DataFrame:
    """One task per slot; the JVM only schedules them and gathers their (small) cells."""

    def run(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for slot in batch.column(0).to_pylist():
                yield from run_slot(job, int(slot)).to_batches()

    slots = len(job.clients)
    tasks = spark.range(0, slots, numPartitions=slots)
    cells = tasks.mapInArrow(run, from_arrow_schema(CELL_SCHEMA)).toPandas()
    return cells if len(cells) else CELL_SCHEMA.empty_table().to_pandas()


def _fresh(path: Path) -> None:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def _deal(sizes: dict[int, int], partitions: int) -> dict[int, int]:
    """Partition per group: largest group first onto the lightest partition, so that the
    two cores of a small machine finish together instead of one waiting on a big group."""
    load = [(0, p) for p in range(partitions)]
    placed: dict[int, int] = {}
    for group, size in sorted(sizes.items(), key=lambda item: (-item[1], item[0])):
        total, partition = heapq.heappop(load)
        placed[group] = partition
        heapq.heappush(load, (total + size, partition))
    return placed


def entity_summary(cells: pd.DataFrame) -> pd.DataFrame:
    """Per client (principal, client id): how the candidate quotas would have treated it."""
    sums = [
        "requests",
        "throttled_requests",
        "total_throttle_ms",
        "delayed_bytes",
        "rejected_requests",
        "bytes",
        "recorded_throttled_requests",
    ]
    grouped = cells.groupby(CLIENT, sort=False)
    entities = grouped[sums].sum().astype("int64")
    entities["max_throttle_ms"] = grouped["max_throttle_ms"].max().astype("int32")
    entities["throttled_fraction"] = entities["throttled_requests"] / entities["requests"]
    columns = [
        "requests",
        "throttled_requests",
        "throttled_fraction",
        "total_throttle_ms",
        "max_throttle_ms",
        *sums[3:],
    ]
    ordered = entities[columns].sort_values("total_throttle_ms", ascending=False, kind="stable")
    return ordered.reset_index()


def throttle_heatmap(cells: pd.DataFrame) -> pd.DataFrame:
    """Predicted throttle per client and time bucket (a fixed number of buckets)."""
    heatmap = cells[[*CLIENT, "bucket", "total_throttle_ms", "requests", "bucket_start_ms"]]
    return heatmap.rename(columns={"total_throttle_ms": "throttle_ms"}).astype(
        {"bucket": "int32", "throttle_ms": "int64", "requests": "int64", "bucket_start_ms": "int64"}
    )


def _write_table(frame: pd.DataFrame, path: Path) -> None:
    """A small summary as one Parquet file in its own directory, as Spark's writer lays it
    out, written from the driver: a Spark job per summary costs more than the summary."""
    _fresh(path)
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, path / "part-00000.parquet")
