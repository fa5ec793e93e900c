"""``pipeline all``: every job in order, into one output directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quotagate.pipeline.errors import PipelineError
from quotagate.pipeline.ingest.job import REPORT_NAME, ingest
from quotagate.pipeline.quotas import read_quota_text
from quotagate.pipeline.recommend.job import RecommendOptions, recommend
from quotagate.pipeline.replay.job import replay
from quotagate.pipeline.report.job import ReportInputs, report
from quotagate.pipeline.rollup import rollup
from quotagate.pipeline.runner import JobRunner


@dataclass(frozen=True, slots=True)
class AllOptions:
    events: Path | None
    logs: Path | None
    quotas: Path | None
    closed_loop: bool = False
    percentile: float = 99.0
    headroom: float = 1.5


def run_all_jobs(runner: JobRunner, options: AllOptions, out: Path) -> Path:
    """Returns the report's path. Without candidate quotas the recommendation is replayed,
    which answers "what would the recommended quotas have done to this traffic?"."""
    if (options.events is None) == (options.logs is None):
        raise PipelineError("give exactly one of --events and --logs")
    events = options.events
    ingest_report = None
    if options.logs is not None:
        events = out / "events"
        logs = options.logs
        runner.run("ingest", lambda spark: ingest(spark, logs, out / "events"))
        ingest_report = out / "events" / REPORT_NAME
    assert events is not None
    text = read_quota_text(options.quotas) if options.quotas else None
    runner.run("rollup", lambda spark: rollup(spark, events, out / "rollup", quota_text=text))
    recommendation = out / "recommended-quotas.toml"
    rec_options = RecommendOptions(options.percentile, options.headroom)
    runner.run(
        "recommend", lambda spark: recommend(spark, out / "rollup", recommendation, rec_options)
    )
    candidate = text if text else read_quota_text(recommendation)
    runner.run(
        "replay",
        lambda spark: replay(
            spark, events, candidate, out / "replay", closed_loop=options.closed_loop
        ),
    )
    inputs = ReportInputs(out / "rollup", out / "replay", recommendation, ingest_report)
    return report(inputs, out / "report.html")
