"""The per-API series are plain numbers exported at scrape time: same names, labels and
values as the prometheus_client Counter and Histogram families they replaced."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from quotagate.gateway.metrics import GatewayMetrics
from quotagate.protocol import api_keys


def _lines(metrics: GatewayMetrics) -> list[str]:
    return generate_latest(metrics.registry).decode().splitlines()


def test_per_api_counters_export_as_counters_with_created_series() -> None:
    metrics = GatewayMetrics()
    produce = metrics.api(api_keys.PRODUCE)
    produce.requests += 2
    produce.request_bytes += 430
    produce.response_bytes += 120
    lines = _lines(metrics)
    assert "# TYPE quotagate_requests_total counter" in lines
    assert 'quotagate_requests_total{api="produce"} 2.0' in lines
    assert 'quotagate_request_bytes_total{api="produce"} 430.0' in lines
    assert 'quotagate_response_bytes_total{api="produce"} 120.0' in lines
    assert "# TYPE quotagate_requests_created gauge" in lines
    created = [
        line for line in lines if line.startswith('quotagate_requests_created{api="produce"}')
    ]
    assert float(created[0].split()[-1]) == pytest.approx(produce.created)


def test_upstream_latency_exports_cumulative_buckets_where_values_equal_to_a_bound_count() -> None:
    metrics = GatewayMetrics()
    fetch = metrics.api(api_keys.FETCH)
    for seconds in (0.0001, 0.0002, 0.001, 31.0):
        fetch.observe_latency(seconds)
    lines = _lines(metrics)
    name = "quotagate_upstream_latency_seconds"
    assert f"# TYPE {name} histogram" in lines
    assert f'{name}_bucket{{api="fetch",le="0.0001"}} 1.0' in lines
    assert f'{name}_bucket{{api="fetch",le="0.00025"}} 2.0' in lines
    assert f'{name}_bucket{{api="fetch",le="0.001"}} 3.0' in lines
    assert f'{name}_bucket{{api="fetch",le="30.0"}} 3.0' in lines
    assert f'{name}_bucket{{api="fetch",le="+Inf"}} 4.0' in lines
    assert f'{name}_count{{api="fetch"}} 4.0' in lines
    assert any(line.startswith(f'{name}_sum{{api="fetch"}} 31.0013') for line in lines)


def test_no_per_api_series_before_the_first_request() -> None:
    lines = _lines(GatewayMetrics())
    assert "# TYPE quotagate_requests_total counter" in lines
    assert not any(line.startswith("quotagate_requests_total{") for line in lines)
