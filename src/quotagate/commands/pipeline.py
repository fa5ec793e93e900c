"""``quotagate pipeline``: the PySpark stages (generate, ingest, rollup, replay, recommend,
report, all). Spark and pandas are imported only when a stage runs, so ``--help`` is fast."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from quotagate.pipeline.runner import StageRunner

app = typer.Typer(
    help="Usage tables, what-if replays and quota recommendations on Spark.",
    no_args_is_help=True,
)
T = TypeVar("T")
_console = Console(stderr=True)

MASTER = typer.Option("local[*]", "--master", help="Spark master URL.")
DRIVER_MEMORY = typer.Option("2g", "--driver-memory", help="spark.driver.memory.")
PARTITIONS = typer.Option(4, "--shuffle-partitions", min=1, help="spark.sql.shuffle.partitions.")
QUIET = typer.Option(False, "--quiet", help="No progress bars.")


def _runner(master: str, driver_memory: str, partitions: int, quiet: bool) -> StageRunner:
    from quotagate.pipeline.runner import SparkOptions, StageRunner  # noqa: PLC0415

    return StageRunner(SparkOptions(master, driver_memory, partitions, not quiet), _console)


def _run_stage(
    description: str,
    stage: Callable[[SparkSession], T],
    master: str,
    driver_memory: str,
    partitions: int,
    quiet: bool,
) -> T:
    """One stage on its own SparkSession, stopped afterwards even when the stage fails."""
    runner = _runner(master, driver_memory, partitions, quiet)
    try:
        return runner.run(description, stage)
    finally:
        runner.stop()


def _guarded(body: Callable[[], T]) -> T:
    """Run a command body; user-fixable problems end with one red line and exit code 2."""
    from quotagate.pipeline.errors import PipelineError  # noqa: PLC0415

    try:
        return body()
    except PipelineError as exc:
        _console.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        raise typer.Exit(2) from None


def _show(title: str, facts: dict[str, Any]) -> None:
    _console.print(f"[bold green]{title}[/]")
    for key, value in facts.items():
        if not isinstance(value, list | dict):
            _console.print(f"  {key}: {value}")


@app.command()
def generate(
    out: Annotated[Path, typer.Argument(help="Output directory (usage/date=…/hour=… Parquet).")],
    events: int = typer.Option(1_000_000, "--events", min=1, help="Number of events."),
    seed: int = typer.Option(1, "--seed", help="Same seed, same events."),
    users: int = typer.Option(40, "--users", min=1, help="Number of principals."),
    start: str = typer.Option("2024-01-01T00:00:00", "--start", help="UTC start time."),
    duration_s: int = typer.Option(86_400, "--duration-s", min=60, help="Time span in seconds."),
    master: str = MASTER,
    driver_memory: str = DRIVER_MEMORY,
    partitions: int = PARTITIONS,
    quiet: bool = QUIET,
) -> None:
    """Synthetic usage events: heavy-tailed clients, bursts, a daily cycle, admin storms."""
    from quotagate.pipeline.generate import GenerateOptions  # noqa: PLC0415
    from quotagate.pipeline.generate import generate as run  # noqa: PLC0415

    def body() -> None:
        options = GenerateOptions(events, seed, users, _epoch_ms(start), duration_s)
        written = _run_stage(
            "generate",
            lambda spark: run(spark, options, out),
            master,
            driver_memory,
            partitions,
            quiet,
        )
        _show("generated", {"events": written, "out": out})

    _guarded(body)


@app.command()
def ingest(
    logs: Annotated[Path, typer.Argument(help="A request-log file or a directory of them.")],
    out: Annotated[Path, typer.Argument(help="Output directory for usage events.")],
    tz_offset_h: float = typer.Option(0.0, "--tz-offset-h", help="Log timestamps' UTC offset."),
    master: str = MASTER,
    driver_memory: str = DRIVER_MEMORY,
    partitions: int = PARTITIONS,
    quiet: bool = QUIET,
) -> None:
    """Kafka request logs (text < 2.8, KIP-673 JSON >= 2.8) to usage events."""
    from quotagate.pipeline.ingest import ingest as run  # noqa: PLC0415

    if not -24 < tz_offset_h < 24:
        raise typer.BadParameter("must be between -24 and 24 hours", param_hint="--tz-offset-h")
    tz = timezone(timedelta(hours=tz_offset_h))

    def body() -> None:
        report = _run_stage(
            "ingest",
            lambda spark: run(spark, logs, out, tz=tz),
            master,
            driver_memory,
            partitions,
            quiet,
        )
        _show("ingested", report)
        for sample in report["failed_samples"][:5]:
            _console.print(f"  [yellow]unparsed[/] {sample['reason']}: {sample['line'][:120]}")

    _guarded(body)


@app.command()
def rollup(
    events: Annotated[Path, typer.Argument(help="Usage-event directory.")],
    out: Annotated[Path, typer.Argument(help="Output directory for the rollup tables.")],
    quotas: Annotated[
        Path | None, typer.Option("--quotas", help="Quota file deciding sharing keys.")
    ] = None,
    level: str = typer.Option(
        "user", "--level", help="Without --quotas: user, client-id or 'user,client-id'."
    ),
    master: str = MASTER,
    driver_memory: str = DRIVER_MEMORY,
    partitions: int = PARTITIONS,
    quiet: bool = QUIET,
) -> None:
    """Usage per sharing key and topic per quota window, with percentiles per entity."""
    from quotagate.pipeline.events import check_usage_dataset  # noqa: PLC0415
    from quotagate.pipeline.levels import check_level  # noqa: PLC0415
    from quotagate.pipeline.quotas import read_quota_text  # noqa: PLC0415
    from quotagate.pipeline.rollup import rollup as run  # noqa: PLC0415

    def body() -> None:
        check_level(level)  # before Spark starts: bad input fails in a second
        check_usage_dataset(events)
        text = read_quota_text(quotas) if quotas else None
        summary = _run_stage(
            "rollup",
            lambda spark: run(spark, events, out, quota_text=text, level=level),
            master,
            driver_memory,
            partitions,
            quiet,
        )
        _show("rolled up", summary)

    _guarded(body)


@app.command()
def replay(
    events: Annotated[Path, typer.Argument(help="Usage-event directory.")],
    quotas: Annotated[Path, typer.Argument(help="Candidate quota file.")],
    out: Annotated[Path, typer.Argument(help="Output directory.")],
    closed_loop: bool = typer.Option(
        False, "--closed-loop", help="Throttled clients' later requests shift by the throttle."
    ),
    master: str = MASTER,
    driver_memory: str = DRIVER_MEMORY,
    partitions: int = PARTITIONS,
    quiet: bool = QUIET,
) -> None:
    """What the candidate quotas would have done to the recorded traffic."""
    from quotagate.pipeline.events import check_usage_dataset  # noqa: PLC0415
    from quotagate.pipeline.quotas import read_quota_text  # noqa: PLC0415
    from quotagate.pipeline.replay import replay as run  # noqa: PLC0415

    def body() -> None:
        check_usage_dataset(events)
        text = read_quota_text(quotas)
        summary = _run_stage(
            "replay",
            lambda spark: run(spark, events, text, out, closed_loop=closed_loop),
            master,
            driver_memory,
            partitions,
            quiet,
        )
        _show("replayed", summary)

    _guarded(body)


@app.command()
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
    master: str = MASTER,
    driver_memory: str = DRIVER_MEMORY,
    partitions: int = PARTITIONS,
    quiet: bool = QUIET,
) -> None:
    """Quota values (and KIP-599 rate and burst) from observed usage, with headroom."""
    from quotagate.pipeline.recommend import RecommendOptions  # noqa: PLC0415
    from quotagate.pipeline.recommend import recommend as run  # noqa: PLC0415

    def body() -> None:
        options = RecommendOptions(percentile, headroom, max_window_num, not no_default)
        summary = _run_stage(
            "recommend",
            lambda spark: run(spark, rollup_dir, out, options),
            master,
            driver_memory,
            partitions,
            quiet,
        )
        _show("recommended", summary)

    _guarded(body)


@app.command()
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
    from quotagate.pipeline.report import ReportInputs  # noqa: PLC0415
    from quotagate.pipeline.report import report as run  # noqa: PLC0415

    def body() -> None:
        inputs = ReportInputs(rollup_dir, replay_dir, recommendation, ingest_report)
        _show("report written", {"file": run(inputs, out)})

    _guarded(body)


@app.command(name="all")
def run_all(
    out: Annotated[Path, typer.Argument(help="Output directory for every stage.")],
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
    master: str = MASTER,
    driver_memory: str = DRIVER_MEMORY,
    partitions: int = PARTITIONS,
    quiet: bool = QUIET,
) -> None:
    """ingest (with --logs) → rollup → recommend → replay → report, into OUT."""
    from quotagate.pipeline.all_stages import AllOptions, run_all_stages  # noqa: PLC0415

    def body() -> None:
        options = AllOptions(events, logs, quotas, closed_loop, percentile, headroom)
        runner = _runner(master, driver_memory, partitions, quiet)
        try:
            html = run_all_stages(runner, options, out)
        finally:
            runner.stop()
        _show("pipeline done", {"report": html})

    _guarded(body)


def _epoch_ms(text: str) -> int:
    try:
        stamp = datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not an ISO date-time") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    return int(stamp.timestamp() * 1000)
