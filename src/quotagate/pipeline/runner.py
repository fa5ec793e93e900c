"""Running a job for the CLI: one SparkSession, a progress bar, and errors made readable.

Spark reports failures as Java exceptions wrapping Python ones; a user needs the one line
that says what was wrong, not two screens of JVM frames.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from rich.console import Console

from quotagate.pipeline.errors import PipelineError
from quotagate.pipeline.progress import spark_progress
from quotagate.pipeline.session import (
    DEFAULT_DRIVER_MEMORY,
    DEFAULT_MASTER,
    DEFAULT_SHUFFLE_PARTITIONS,
    spark_session,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SparkOptions:
    master: str = DEFAULT_MASTER
    driver_memory: str = DEFAULT_DRIVER_MEMORY
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS
    progress: bool = True
    conf: tuple[tuple[str, str], ...] = ()
    """Further Spark settings (``spark.jars`` for the stream job's connector)."""


class JobRunner:
    """Starts Spark lazily (report never needs it) and runs jobs with progress."""

    def __init__(self, options: SparkOptions, console: Console | None = None) -> None:
        self.options = options
        self.console = console or Console(stderr=True)
        self._spark: SparkSession | None = None

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            with self.console.status(f"starting Spark ({self.options.master})"):
                self._spark = spark_session(
                    self.options.master,
                    driver_memory=self.options.driver_memory,
                    shuffle_partitions=self.options.shuffle_partitions,
                    conf=dict(self.options.conf),
                )
        return self._spark

    def run(self, description: str, job: Callable[[SparkSession], T]) -> T:
        spark = self.spark
        try:
            with spark_progress(
                spark, description, console=self.console, enabled=self.options.progress
            ):
                return job(spark)
        except PipelineError:
            raise
        except Exception as exc:
            message = spark_error_message(exc)
            if message is None:
                raise
            raise PipelineError(f"{description} failed: {message}") from None

    def stop(self) -> None:
        if self._spark is not None:
            self._spark.stop()
            self._spark = None


def spark_error_message(exc: BaseException) -> str | None:
    """The readable core of a Spark/Py4J failure, or None for other exceptions."""
    from py4j.protocol import Py4JJavaError  # type: ignore[import-untyped]  # noqa: PLC0415
    from pyspark.errors import PySparkException  # noqa: PLC0415

    if isinstance(exc, Py4JJavaError):
        text = str(exc.java_exception.toString())
    elif isinstance(exc, PySparkException):
        text = str(exc)
    else:
        return None
    # A Python error inside a worker ends its traceback with "ExceptionType: message".
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    python_errors = [line for line in lines if not line.startswith(("at ", "File ", "^", "~"))]
    if "Traceback" in text and python_errors:
        return python_errors[-1][:500]
    return (lines[0] if lines else type(exc).__name__)[:500]
