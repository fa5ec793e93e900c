"""One SparkSession for every pipeline test (starting Spark costs seconds), plus a small
generated event table shared by the Spark tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from quotagate.pipeline.generate import GenerateOptions, generate
from quotagate.pipeline.session import spark_session

FIXTURES = Path(__file__).parent / "fixtures"

# Quotas that bite on the generated traffic: a default per user, a tighter named user,
# a per-client default for produce (so client ids shared across users join groups) and
# a controller-mutation rate low enough for admin storms to be rejected.
CANDIDATE_QUOTAS = """
[[quota]]
defaults = ["user"]
producer_byte_rate = 20000
consumer_byte_rate = 150000
request_percentage = 0.2
controller_mutation_rate = 1.0

[[quota]]
user = "svc-001"
producer_byte_rate = 4000

[[quota]]
defaults = ["client-id"]
producer_byte_rate = 60000
"""


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = spark_session("local[2]", app_name="quotagate-tests", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def events_dir(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pipeline") / "events"
    generate(spark, GenerateOptions(events=60_000, seed=7, users=25, duration_s=4 * 3600), out)
    return out
