"""One ``/metrics`` for an instance: its workers' figures, gathered at each scrape.

Every worker serves its own registry on a private loopback port; the supervisor's endpoint
reads them all when it is scraped and exposes:

* counters, histograms and summaries **summed** over the workers (they add up: requests,
  bytes, latency buckets);
* gauges **per worker**, with a ``worker`` label: a gauge may be a per-worker amount
  (connections) or one worker's view of a fleet-wide value (a sharing key's byte rate, which
  every worker of a fleet sees whole), and only the reader knows whether to ``sum`` or ``max``;
* ``quotagate_workers`` and ``quotagate_worker_up{worker}``.

prometheus-client's multiprocess mode was not used: it cannot carry the custom collector the
quota view is exported by (enforcement/metrics.py), which is computed from live engine state.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

_SCRAPE_TIMEOUT_S = 2.0
_ADDITIVE = frozenset({"counter", "histogram", "summary"})


class WorkersCollector(Collector):
    """Collects the workers named by ``endpoints()`` (worker index → metrics URL)."""

    def __init__(self, endpoints: Callable[[], Mapping[int, str]]) -> None:
        self._endpoints = endpoints
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="metrics-scrape")

    def collect(self) -> Iterator[Metric]:
        endpoints = dict(self._endpoints())
        texts = dict(zip(endpoints, self._pool.map(_scrape, endpoints.values()), strict=True))
        workers = GaugeMetricFamily("quotagate_workers", "Worker processes of this instance")
        workers.add_metric([], float(len(endpoints)))
        yield workers
        up = GaugeMetricFamily(
            "quotagate_worker_up", "1 when the worker answered this scrape", labels=["worker"]
        )
        for index in sorted(endpoints):
            up.add_metric([str(index)], float(texts[index] is not None))
        yield up
        yield from merge({i: t for i, t in texts.items() if t is not None})


def merge(texts: Mapping[int, str]) -> Iterator[Metric]:
    """The workers' exposition texts as one set of families (rules: module docstring)."""
    families: dict[str, Metric] = {}
    sums: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
    for index in sorted(texts):
        for family in text_string_to_metric_families(texts[index]):
            if family.name.endswith("_created"):
                continue  # a worker's creation time of a counter: neither sums nor means much
            merged = families.get(family.name)
            if merged is None:
                merged = families[family.name] = Metric(
                    family.name, family.documentation, family.type, family.unit
                )
            if family.type in _ADDITIVE:
                totals = sums.setdefault(family.name, {})
                for sample in family.samples:
                    if sample.name.endswith("_created"):
                        continue
                    key = (sample.name, tuple(sorted(sample.labels.items())))
                    totals[key] = totals.get(key, 0.0) + sample.value
            else:
                for sample in family.samples:
                    merged.add_sample(
                        sample.name, {**sample.labels, "worker": str(index)}, sample.value
                    )
    for name, totals in sums.items():
        for (sample_name, labels), value in totals.items():
            families[name].add_sample(sample_name, dict(labels), value)
    yield from families.values()


def _scrape(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=_SCRAPE_TIMEOUT_S) as response:
            return str(response.read().decode())
    except OSError:
        return None
