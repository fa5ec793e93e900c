"""One SparkSession for every pipeline test (starting Spark costs seconds), plus a small
generated event table shared by the Spark tests.

Every JVM the tests start (this session's driver, the CLI's drivers, a standalone
cluster's daemons and executors) compiles with C1 only: the tests' data is small, so the
JVMs' time went to C2 compiling Spark's generated code (C2 compilations took ~30 of the
~50 CPU-seconds of a cold ``pipeline all`` over 6 000 log lines), which C1 does in a
fraction of that. Large inputs want C2, so this is the tests' setting, not the product's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from quotagate.pipeline.generate.job import GenerateOptions, generate
from quotagate.pipeline.session import spark_session

from .standalone import Cluster, standalone_cluster

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

QUICK_JIT = "-XX:TieredStopAtLevel=1"
# spark-submit adds SPARK_SUBMIT_OPTS to the driver's JVM, whose SparkConf takes spark.*
# system properties: the executors of a cluster get the same flag that way.
os.environ.setdefault(
    "SPARK_SUBMIT_OPTS", f"{QUICK_JIT} -Dspark.executor.extraJavaOptions={QUICK_JIT}"
)
os.environ.setdefault("SPARK_DAEMON_JAVA_OPTS", QUICK_JIT)


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


@pytest.fixture(scope="session")
def spark_cluster(
    tmp_path_factory: pytest.TempPathFactory, wait_for: Callable[..., Any]
) -> Iterator[Cluster]:
    """One standalone cluster (a master and two one-core workers) for every test that runs on
    a cluster: its applications run one after the other, each on both workers."""
    with standalone_cluster(tmp_path_factory.mktemp("cluster"), wait_for, workers=2) as cluster:
        yield cluster
