"""The SparkSession every job runs on, tuned for a small machine by default."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "2g"
DEFAULT_SHUFFLE_PARTITIONS = 4


def spark_session(
    master: str = DEFAULT_MASTER,
    *,
    app_name: str = "quotagate-pipeline",
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Start (or reuse) a SparkSession.

    A laptop or CI box has no routable hostname to bind to and no use for the UI, and
    Spark's default of 200 shuffle partitions makes small jobs spend their time in
    scheduling, so all three are turned down here. On a cluster the executors must reach
    the driver, so only a ``local`` master binds it to loopback; elsewhere Spark's own
    choice stands (``SPARK_LOCAL_IP`` / ``spark.driver.host`` as the operator sets them).
    ``conf``: further settings (the stream job's ``spark.jars``), applied last.
    """
    local = master.startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # The workers must run the same interpreter as the driver, or pandas UDFs fail
    # with version mismatches.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    quiet_jvm = f"-Dlog4j.configurationFile={Path(__file__).with_name('log4j2.properties')}"
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.driver.extraJavaOptions", quiet_jvm)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "true")
        # Coalescing would fold a small replay into one task and leave cores idle.
        .config("spark.sql.adaptive.coalescePartitions.enabled", "false")
        .config("spark.sql.sources.partitionOverwriteMode", "static")
    )
    if local:
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("FATAL")
    return spark
