"""How far over its quota Kafka's arithmetic lets a greedy client go in a measure: the one
place the suite's rate ceilings come from (docs/quotas.md, "Accuracy").

A byte rate is measured over ``quota.window.num`` samples of ``quota.window.size.seconds``,
and a sample leaves the window whole. So over any stretch of ``seconds`` a greedy client can
get through the quota for that stretch plus up to the quota for the windows' span, and what
it has in flight when the stretch ends (each connection's last request, answered before its
throttle is served) comes on top. A client measured from its first request had nothing in
its window before: its rate is taken over at least all windows but the current one, so only
that span's worth comes on top.

A test that holds a client to less than this can fail on a run Kafka itself would allow; the
floors stay with the tests, which know what else shares the machine.
"""

from __future__ import annotations

from collections.abc import Mapping


def span_s(windows: Mapping[str, float]) -> float:
    """The windows' span in seconds, from the gateway's ``[quotas]`` settings."""
    return float(windows["quota.window.num"]) * float(windows["quota.window.size.seconds"])


def ceiling(
    seconds: float,
    windows: Mapping[str, float],
    *,
    quota: float,
    in_flight_bytes: float = 0.0,
    from_first_request: bool = False,
) -> float:
    """The most achieved ÷ quota Kafka's arithmetic allows over ``seconds``.

    ``in_flight_bytes``: what the client can have sent and unanswered at once (connections ×
    requests in flight × request size). ``from_first_request``: the measure opens with the
    client's first request (no warm-up), so one window fewer of burst is possible."""
    burst_s = span_s(windows)
    if from_first_request:
        burst_s -= float(windows["quota.window.size.seconds"])
    return 1.0 + (burst_s + in_flight_bytes / quota) / seconds
