"""``generate``: synthetic usage events for tests and benchmarks, deterministic per seed.

Events are drawn in fixed-size chunks; chunk ``i`` depends only on (seed, i), so the
output is the same whatever the Spark master or parallelism.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from quotagate.pipeline.events import usage_spark_schema, write_usage
from quotagate.pipeline.generate.population import build_population
from quotagate.pipeline.generate.synthetic import event_chunk

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CHUNK_EVENTS = 50_000


@dataclass(frozen=True, slots=True)
class GenerateOptions:
    events: int
    seed: int = 1
    users: int = 40
    start_ms: int = 1_704_067_200_000  # 2024-01-01T00:00:00Z
    duration_s: int = 86_400


def chunk_sizes(events: int) -> list[int]:
    full, rest = divmod(events, CHUNK_EVENTS)
    return [CHUNK_EVENTS] * full + ([rest] if rest else [])


def generate(spark: SparkSession, options: GenerateOptions, out: str | Path) -> int:
    """Write ``options.events`` events under ``out``; returns the number written."""
    if options.events <= 0:
        raise ValueError("--events must be positive")
    pop = build_population(
        options.seed,
        users=options.users,
        start_ms=options.start_ms,
        duration_s=options.duration_s,
    )
    sizes = chunk_sizes(options.events)
    seed = options.seed

    def draw(batches: Iterable[pa.RecordBatch]) -> Iterable[pa.RecordBatch]:
        for batch in batches:
            for chunk in batch.column(0).to_pylist():
                yield event_chunk(pop, seed, chunk, sizes[chunk])

    slices = max(1, min(len(sizes), spark.sparkContext.defaultParallelism * 4))
    chunks = spark.range(0, len(sizes), numPartitions=slices)
    frame = chunks.mapInArrow(draw, usage_spark_schema())
    write_usage(frame, out)
    return options.events
