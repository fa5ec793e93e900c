"""``quotagate pipeline``: the PySpark jobs (generate, ingest, rollup, stream, replay,
recommend, report, all). Spark and pandas are imported only when a job runs, so ``--help``
is fast."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from quotagate.commands.option_group import with_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from quotagate.pipeline.runner import JobRunner

app = typer.Typer(
    help="Usage tables, what-if replays and quota recommendations on Spark.",
    no_args_is_help=True,
)
T = TypeVar("T")
P = ParamSpec("P")
_console = Console(stderr=True)

MASTER = typer.Option("local[*]", "--master", help="Spark master URL.")
DRIVER_MEMORY = typer.Option("2g", "--driver-memory", help="spark.driver.memory.")
PARTITIONS = typer.Option(4, "--shuffle-partitions", min=1, help="spark.sql.shuffle.partitions.")
QUIET = typer.Option(False, "--quiet", help="No progress bars.")


@dataclass(frozen=True, slots=True)
class _Spark:
    """What the Spark options of a job command say (:func:`_spark_options`)."""

    master: str
    driver_memory: str
    partitions: int
    quiet: bool

    def runner(self, conf: tuple[tuple[str, str], ...] = ()) -> JobRunner:
        from quotagate.pipeline.runner import JobRunner, SparkOptions  # noqa: PLC0415

        options = SparkOptions(
            self.master, self.driver_memory, self.partitions, not self.quiet, conf
        )
        return JobRunner(options, _console)

    def run(self, description: str, job: Callable[[SparkSession], T]) -> T:
        """One job on its own SparkSession, stopped afterwards even when the job fails."""
        runner = self.runner()
        try:
            return runner.run(description, job)
        finally:
            runner.stop()


def _spark_options(
    master: str = MASTER,
    driver_memory: str = DRIVER_MEMORY,
    partitions: int = PARTITIONS,
    quiet: bool = QUIET,
) -> _Spark:
    """The options every command that starts Spark takes, after its own."""
    return _Spark(master, driver_memory, partitions, quiet)


_with_spark = with_options(_spark_options, into="spark")


@dataclass(frozen=True, slots=True)
class _Grouping:
    """What the grouping options of a command that rolls usage up say
    (:func:`_grouping_options`)."""

    quotas: Path | None
    level: str

    def quota_text(self) -> str | None:
        """The ``--quotas`` file's text, None without one; an unknown ``--level`` or a broken
        file fails here, in a second, before Spark starts."""
        from quotagate.pipeline.levels import check_level  # noqa: PLC0415
        from quotagate.pipeline.quotas import read_quota_text  # noqa: PLC0415

        check_level(self.level)
        return read_quota_text(self.quotas) if self.quotas else None


def _grouping_options(
    quotas: Annotated[
        Path | None, typer.Option("--quotas", help="Group by this quota file's sharing keys.")
    ] = None,
    level: str = typer.Option(
        "user", "--level", help="Without --quotas: user, client-id or 'user,client-id'."
    ),
) -> _Grouping:
    """The options of every command that rolls usage up, after its own."""
    return _Grouping(quotas, level)


# Inside _with_spark (its options come last) and outside _guarded: the group only gathers its
# options, whose checks run in the command (_Grouping.quota_text), where _guarded sees them.
_with_grouping = with_options(_grouping_options, into="grouping")


def _guarded(command: Callable[P, None]) -> Callable[P, None]:
    """The command; user-fixable problems end it with one red line and exit code 2."""

    @functools.wraps(command)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> None:
        from quotagate.pipeline.errors import PipelineError  # noqa: PLC0415

        try:
            command(*args, **kwargs)
        except PipelineError as exc:
            _console.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
            raise typer.Exit(2) from None

    return guarded


def _show(title: str, facts: dict[str, Any]) -> None:
    _console.print(f"[bold green]{title}[/]")
    for key, value in facts.items():
        if not isinstance(value, list | dict):
            _console.print(f"  {key}: {value}")


@app.command()
@_with_spark
@_guarded
def generate(
    out: Annotated[Path, typer.Argument(help="Output directory (usage/date=…/hour=… Parquet).")],
    events: int = typer.Option(1_000_000, "--events", min=1, help="Number of events."),
    seed: int = typer.Option(1, "--seed", help="Same seed, same events."),
    users: int = typer.Option(40, "--users", min=1, help="Number of principals."),
    start: str = typer.Option("2024-01-01T00:00:00", "--start", help="UTC start time."),
    duration_s: int = typer.Option(86_400, "--duration-s", min=60, help="Time span in seconds."),
    *,
    spark: _Spark,
) -> None:
    """Synthetic usage events: heavy-tailed clients, bursts, a daily cycle, admin storms."""
    from quotagate.pipeline.generate.job import GenerateOptions  # noqa: PLC0415
    from quotagate.pipeline.generate.job import generate as run  # noqa: PLC0415

    options = GenerateOptions(events, seed, users, _epoch_ms(start), duration_s)
    written = spark.run("generate", lambda session: run(session, options, out))
    _show("generated", {"events": written, "out": out})


@app.command()
@_with_spark
@_guarded
def ingest(
    logs: Annotated[Path, typer.Argument(help="A request-log file or a directory of them.")],
    out: Annotated[Path, typer.Argument(help="Output directory for usage events.")],
    tz_offset_h: float = typer.Option(0.0, "--tz-offset-h", help="Log timestamps' UTC offset."),
    *,
    spark: _Spark,
) -> None:
    """Kafka request logs (text < 2.8, KIP-673 JSON >= 2.8) to usage events."""
    from quotagate.pipeline.ingest.job import ingest as run  # noqa: PLC0415

    if not -24 < tz_offset_h < 24:
        raise typer.BadParameter("must be between -24 and 24 hours", param_hint="--tz-offset-h")
    tz = timezone(timedelta(hours=tz_offset_h))
    report = spark.run("ingest", lambda session: run(session, logs, out, tz=tz))
    _show("ingested", report)
    for sample in report["failed_samples"][:5]:
        _console.print(f"  [yellow]unparsed[/] {sample['reason']}: {sample['line'][:120]}")


@app.command()
@_with_spark
@_with_grouping
@_guarded
def rollup(
    events: Annotated[Path, typer.Argument(help="Usage-event directory.")],
    out: Annotated[Path, typer.Argument(help="Output directory for the rollup tables.")],
    *,
    grouping: _Grouping,
    spark: _Spark,
) -> None:
    """Usage per sharing key and topic per quota window, with percentiles per entity."""
    from quotagate.pipeline.events import check_usage_dataset  # noqa: PLC0415
    from quotagate.pipeline.rollup import rollup as run  # noqa: PLC0415

    text = grouping.quota_text()
    check_usage_dataset(events)
    summary = spark.run(
        "rollup",
        lambda session: run(session, events, out, quota_text=text, level=grouping.level),
    )
    _show("rolled up", summary)


@app.command()
@_with_spark
@_with_grouping
@_guarded
def stream(
    bootstrap_servers: Annotated[
        str, typer.Argument(help="The usage topic's cluster, host:port,…")
    ],
    topic: Annotated[str, typer.Argument(help="The usage topic ([usage] topic).")],
    out: Annotated[Path, typer.Argument(help="Output directory: rollup/, cells/ and checkpoint/.")],
    trigger_s: float = typer.Option(10.0, "--trigger-s", min=0.1, help="Micro-batch interval."),
    watermark_s: float = typer.Option(
        600.0, "--watermark-s", min=0, help="How late an event may arrive and still count."
    ),
    available_now: bool = typer.Option(
        False, "--available-now", help="Process what the topic holds now, then stop."
    ),
    max_offsets: int | None = typer.Option(
        None, "--max-offsets-per-trigger", min=1, help="Records per micro-batch at most."
    ),
    jars: str | None = typer.Option(
        None, "--jars", help="Spark's Kafka connector: a directory of jars, or jar paths a,b."
    ),
    packages: str | None = typer.Option(
        None,
        "--packages",
        help="Spark's Kafka connector from Maven Central, e.g. "
        "org.apache.spark:spark-sql-kafka-0-10_2.13:<pyspark version>.",
    ),
    kafka_option: list[str] = typer.Option(  # noqa: B008
        [], "--kafka-option", help="key=value for the Kafka client, e.g. security.protocol=SSL."
    ),
    *,
    grouping: _Grouping,
    spark: _Spark,
) -> None:
    """Keep the rollup tables current from the usage topic (Structured Streaming)."""
    from quotagate.pipeline.errors import PipelineError  # noqa: PLC0415
    from quotagate.pipeline.stream.job import StreamOptions  # noqa: PLC0415
    from quotagate.pipeline.stream.job import stream as run  # noqa: PLC0415

    quota_text = grouping.quota_text()
    kafka_options = {}
    for item in kafka_option:
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise PipelineError(
                f"--kafka-option {item!r}: write key=value, e.g. sasl.mechanism=PLAIN"
            )
        kafka_options[key] = value
    conf: list[tuple[str, str]] = []
    if jars:
        conf.append(("spark.jars", _jar_list(jars)))
    if packages:
        conf.append(("spark.jars.packages", packages))
    options = StreamOptions(
        bootstrap_servers,
        topic,
        quota_text=quota_text,
        level=grouping.level,
        trigger_s=trigger_s,
        watermark_s=watermark_s,
        available_now=available_now,
        max_offsets_per_trigger=max_offsets,
        kafka_options=kafka_options,
    )
    runner = spark.runner(tuple(conf))
    try:
        runner.run("stream", lambda session: run(session, options, out))
    finally:
        runner.stop()
    _console.print(f"[bold green]streamed[/] into {out / 'rollup'}")


def _jar_list(jars: str) -> str:
    """``--jars``: a directory means every jar in it."""
    from quotagate.pipeline.errors import PipelineError  # noqa: PLC0415

    paths: list[str] = []
    for part in (p.strip() for p in jars.split(",") if p.strip()):
        path = Path(part)
        if path.is_dir():
            paths.extend(str(jar) for jar in sorted(path.glob("*.jar")))
        elif path.is_file():
            paths.append(str(path))
        else:
            raise PipelineError(f"--jars {part}: no such jar or directory")
    if not paths:
        raise PipelineError(f"--jars {jars}: no jar found there")
    return ",".join(paths)


@app.command()
@_with_spark
@_guarded
def replay(
    events: Annotated[Path, typer.Argument(help="Usage-event directory.")],
    quotas: Annotated[Path, typer.Argument(help="Candidate quota file.")],
    out: Annotated[Path, typer.Argument(help="Output directory.")],
    closed_loop: bool = typer.Option(
        False, "--closed-loop", help="Throttled clients' later requests shift by the throttle."
    ),
    *,
    spark: _Spark,
) -> None:
    """What the candidate quotas would have done to the recorded traffic."""
    from quotagate.pipeline.events import check_usage_dataset  # noqa: PLC0415
    from quotagate.pipeline.quotas import read_quota_text  # noqa: PLC0415
    from quotagate.pipeline.replay.job import replay as run  # noqa: PLC0415

    check_usage_dataset(events)
    text = read_quota_text(quotas)
    summary = spark.run(
        "replay", lambda session: run(session, events, text, out, closed_loop=closed_loop)
    )
    _show("replayed", summary)


@app.command()
@_with_spark
@_guarded
def recommend(
    rollup_dir: Annotated[Path, typer.Argument(help="Rollup output directory.")],
    out: Annotated[
        Path, typer.Argument(help="Quota file to write (for `quotagate quotas apply`).")
    ],
    percentile: float = typer.Option(99.0, "--percentile", help="Percentile of the windowed rate."),
    headroom: float = typer.Option(1.5, "--headroom", help="Multiplier on that percentile."),
    max_window_num: int = typer.Option(
        60, "--max-window-num", min=1, help="Cap on controller.quota.window.num."
    ),
    no_default: bool = typer.Option(False, "--no-default", help="Omit the default entity."),
    *,
    spark: _Spark,
) -> None:
    """Quota values (and KIP-599 rate and burst) from observed usage, with headroom."""
    from quotagate.pipeline.recommend.job import RecommendOptions  # noqa: PLC0415
    from quotagate.pipeline.recommend.job import recommend as run  # noqa: PLC0415

    options = RecommendOptions(percentile, headroom, max_window_num, not no_default)
    summary = spark.run("recommend", lambda session: run(session, rollup_dir, out, options))
    _show("recommended", summary)


@app.command()
@_guarded
def report(
    rollup_dir: Annotated[Path, typer.Argument(help="Rollup output directory.")],
    out: Annotated[Path, typer.Argument(help="HTML file to write.")],
    replay_dir: Annotated[
        Path | None, typer.Option("--replay", help="Replay output directory.")
    ] = None,
    recommendation: Annotated[
        Path | None, typer.Option("--recommendation", help="Quota file.")
    ] = None,
    ingest_report: Annotated[
        Path | None, typer.Option("--ingest-report", help="Ingest report.")
    ] = None,
) -> None:
    """One self-contained HTML report with plots (no Spark needed)."""
    from quotagate.pipeline.report.job import ReportInputs  # noqa: PLC0415
    from quotagate.pipeline.report.job import report as run  # noqa: PLC0415

    inputs = ReportInputs(rollup_dir, replay_dir, recommendation, ingest_report)
    _show("report written", {"file": run(inputs, out)})


@app.command(name="all")
@_with_spark
@_guarded
def run_all(
    out: Annotated[Path, typer.Argument(help="Output directory for every job.")],
    events: Annotated[Path | None, typer.Option("--events", help="Usage-event directory.")] = None,
    logs: Annotated[
        Path | None, typer.Option("--logs", help="Request logs to ingest first.")
    ] = None,
    quotas: Annotated[
        Path | None,
        typer.Option("--quotas", help="Candidate quotas to replay (default: the recommendation)."),
    ] = None,
    closed_loop: bool = typer.Option(False, "--closed-loop", help="Closed-loop replay."),
    percentile: float = typer.Option(99.0, "--percentile"),
    headroom: float = typer.Option(1.5, "--headroom"),
    *,
    spark: _Spark,
) -> None:
    """ingest (with --logs) → rollup → recommend → replay → report, into OUT."""
    from quotagate.pipeline.all_jobs import AllOptions, run_all_jobs  # noqa: PLC0415

    options = AllOptions(events, logs, quotas, closed_loop, percentile, headroom)
    runner = spark.runner()  # one session for every job
    try:
        html = run_all_jobs(runner, options, out)
    finally:
        runner.stop()
    _show("pipeline done", {"report": html})


def _epoch_ms(text: str) -> int:
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not an ISO date-time") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return int(stamp.timestamp() * 1000)
