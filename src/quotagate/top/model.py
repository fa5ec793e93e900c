"""What ``quotagate top`` shows, computed from exposition texts: one row per sharing key and
quota type, gathered over every endpoint (an instance each) and every worker of each.

Pure: texts and times in, rows out. How the figures combine follows from what they are
(docs/gateway.md, "One /metrics"): a sharing key's rate, quota and average throttle time are
one worker's view of a value every worker of a fleet sees whole, so the largest is taken;
connections and throttle milliseconds belong to the worker that holds them, so they add up.

Tenants (issue 25) are rows of their own (``tenant produce`` ..., entity ``tenant=<name>``),
from the ``quotagate_tenant_*`` series; the rows of an exempt principal's keys say so.
"""

from __future__ import annotations

import fnmatch
import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from prometheus_client.parser import text_string_to_metric_families

from quotagate.quota.entity import NO_SOURCE, QUOTA_SOURCES, desanitize_user


@dataclass(frozen=True, slots=True)
class QuotaKind:
    group: str
    """The metric group: ``quotagate_<group>_...``."""
    label: str
    rate_metric: str
    unit: str
    tenant: bool = False
    """A tenant level's quota: its rows are keyed by the tenant's name."""


KINDS: Final = (
    QuotaKind("produce", "produce", "produce_byte_rate", "B/s"),
    QuotaKind("fetch", "fetch", "fetch_byte_rate", "B/s"),
    QuotaKind("request", "request", "request_request_time", "%"),
    # The token level is what Kafka checks, but a rate reads against a rate bound.
    QuotaKind("controllermutation", "mutation", "controllermutation_mutation_rate", "/s"),
    QuotaKind("tenant_produce", "tenant produce", "tenant_produce_byte_rate", "B/s", True),
    QuotaKind("tenant_fetch", "tenant fetch", "tenant_fetch_byte_rate", "B/s", True),
    QuotaKind("tenant_request", "tenant request", "tenant_request_request_time", "%", True),
    QuotaKind(
        "tenant_controllermutation",
        "tenant mutation",
        "tenant_controllermutation_mutation_rate",
        "/s",
        True,
    ),
)
_BY_GROUP: Final = {kind.group: kind for kind in KINDS}
UNBOUNDED_FROM: Final = 9.0e18
"""Long.MAX_VALUE as a float: the bound of a key no quota applies to."""

RowKey = tuple[str, str, str]
"""(group, user label, client_id label): the sanitised names as exported."""


@dataclass(slots=True)
class Row:
    kind: QuotaKind
    user: str
    """Desanitised (``team@corp``, not ``team%40corp``); "" when not part of the key."""
    client_id: str
    rate: float = 0.0
    quota: float | None = None
    throttle_avg_ms: float | None = None
    """Kafka's throttle-time: mean length of the throttles of the last minute or so."""
    throttle_total_ms: float = 0.0
    connections: int = 0
    source: str = NO_SOURCE
    throttled_fraction: float | None = None
    """Share of the last window its connections spent throttled, once two scrapes exist."""
    shadow_quota: float | None = None
    """The key's shadow quota of this type (docs/quotas.md, Shadow quotas), if one is set."""
    shadow_ratio: float | None = None
    """Share of its time the key would spend throttled were its shadow quotas live."""
    exempt: bool = False
    """The key's user is an exempt principal, or an exempt principal's connection is measured
    on it: metered, never throttled."""

    @property
    def key(self) -> RowKey:
        return (self.kind.group, self.user, self.client_id)

    @property
    def entity(self) -> str:
        """The sharing key as ``kafka-configs`` names entities; a part "" is not in the key."""
        if self.kind.tenant:
            return f"tenant={self.user}"
        parts = []
        if self.user:
            parts.append(f"user={self.user}")
        if self.client_id:
            parts.append(f"client-id={self.client_id}")
        return " ".join(parts) or "(everyone)"

    @property
    def usage(self) -> float | None:
        """Rate over quota (1.0 = at the quota), None when no quota applies."""
        if self.quota is None:
            return None
        if self.quota <= 0:
            return math.inf if self.rate > 0 else 0.0
        return self.rate / self.quota

    @property
    def over_quota(self) -> bool:
        usage = self.usage
        return usage is not None and usage > 1.0

    @property
    def throttled(self) -> bool:
        """Throttled within the window, as measured between two scrapes. Kafka's throttle-time
        average is no measure of now: it keeps an idle key's last throttles for up to a minute
        (two 30 s samples), so a single scrape cannot say."""
        return self.throttled_fraction is not None and self.throttled_fraction > 0

    @property
    def level(self) -> int | None:
        """1..8, Kafka's precedence of the configuring entity."""
        try:
            return QUOTA_SOURCES.index(self.source) + 1
        except ValueError:
            return None


@dataclass(frozen=True, slots=True)
class Scrape:
    """One endpoint's answer: its exposition text, or why there is none."""

    url: str
    text: str | None
    error: str | None = None


@dataclass(slots=True)
class FleetHealth:
    """The usage exchange as the workers report it (docs/fleet.md, "Metrics")."""

    workers: int = 0
    """Workers that export the exchange's health (0: no fleet exchange here)."""
    healthy: int = 0
    echo_p99_ms: float | None = None
    """The worst worker's publish-to-read-back delay, 99th percentile."""
    silent_peers: int = 0
    """The most peers one worker fills in a fair share for (0: no fallback anywhere)."""

    @property
    def fallback(self) -> bool:
        return self.silent_peers > 0 or self.healthy < self.workers


@dataclass(slots=True)
class Snapshot:
    rows: list[Row]
    errors: list[str] = field(default_factory=list)
    """One line per endpoint (or worker) that did not answer."""
    endpoints: int = 0
    answered: int = 0
    fleet: FleetHealth = field(default_factory=FleetHealth)
    exempt: list[str] = field(default_factory=list)
    """The exempt principals' user names, as any endpoint exports them."""


def parse(scrapes: Sequence[Scrape]) -> Snapshot:
    """Rows of every sharing key the endpoints export a quota for."""
    rows: dict[RowKey, Row] = {}
    errors: list[str] = []
    samples: list[tuple[str, Mapping[str, str], float]] = []
    answered = 0
    for scrape in scrapes:
        if scrape.text is None:
            errors.append(f"{scrape.url}: {scrape.error or 'no answer'}")
            continue
        try:
            families = list(text_string_to_metric_families(scrape.text))
        except ValueError as exc:
            errors.append(f"{scrape.url}: not a Prometheus exposition ({exc})")
            continue
        answered += 1
        for family in families:
            if family.name == "quotagate_worker_up":
                errors.extend(
                    f"{scrape.url}: worker {s.labels.get('worker', '?')} did not answer"
                    for s in family.samples
                    if s.value == 0
                )
            samples.extend((s.name, s.labels, s.value) for s in family.samples)
    # Quota series first, from every endpoint: a row exists for a key with a quota sensor
    # anywhere, and the other figures then find it.
    samples.sort(key=lambda s: not s[0].endswith("_quota"))
    fleet = FleetHealth()
    exempt: set[str] = set()
    for name, labels, value in samples:
        _take(rows, name, labels, value)
        _take_fleet(fleet, name, labels, value)
        if name == "quotagate_exempt_principal" and value:
            exempt.add(desanitize_user(labels.get("user", "")))
    for row in rows.values():
        row.exempt |= not row.kind.tenant and bool(row.user) and row.user in exempt
    return Snapshot(list(rows.values()), errors, len(scrapes), answered, fleet, sorted(exempt))


def _take_fleet(fleet: FleetHealth, name: str, labels: Mapping[str, str], value: float) -> None:
    if name == "quotagate_fleet_exchange_healthy":
        fleet.workers += 1
        fleet.healthy += value == 1
    elif name == "quotagate_fleet_report_echo_ms" and labels.get("quantile") == "0.99":
        fleet.echo_p99_ms = max(fleet.echo_p99_ms or 0.0, value)
    elif name == "quotagate_fleet_peers" and labels.get("state") == "silent":
        fleet.silent_peers = max(fleet.silent_peers, int(value))


def _row_key(name: str, labels: Mapping[str, str]) -> tuple[RowKey, str] | None:
    """The row a sample belongs to and the series' name within its group."""
    if not name.startswith("quotagate_"):
        return None
    body = name.removeprefix("quotagate_")
    if body.startswith("tenant_"):
        head, _, series = body.removeprefix("tenant_").partition("_")
        if "tenant" not in labels:
            return None
        return (f"tenant_{head}", labels["tenant"], ""), series
    if "client_id" not in labels:
        return None
    group, _, series = body.partition("_")
    return (group, labels.get("user", ""), labels["client_id"]), series


def _take(rows: dict[RowKey, Row], name: str, labels: Mapping[str, str], value: float) -> None:
    if name.startswith(_SHADOW):
        _take_shadow(rows, name.removeprefix(_SHADOW), labels, value)
        return
    found = _row_key(name, labels)
    if found is None:
        return
    key, series = found
    group = key[0]
    kind = _BY_GROUP.get(group)
    if kind is None:
        return
    row = rows.get(key)
    if series == "quota":
        if row is None:
            row = rows[key] = Row(kind, desanitize_user(key[1]), key[2])
        if value < UNBOUNDED_FROM:
            row.quota = max(row.quota or 0.0, value)
        return
    if row is None:
        return
    if name.removeprefix("quotagate_") == kind.rate_metric:
        row.rate = max(row.rate, value)
    elif series == "throttle_time":
        row.throttle_avg_ms = max(row.throttle_avg_ms or 0.0, value)
    elif series == "throttle_time_ms_total":
        row.throttle_total_ms += value
    elif series == "connections":
        row.connections += int(value)
    elif series == "exempt_connections" and value:
        row.exempt = True
    elif series == "quota_source" and value:
        row.source = labels.get("source", NO_SOURCE)


_SHADOW: Final = "quotagate_shadow_"


def _take_shadow(
    rows: dict[RowKey, Row], series: str, labels: Mapping[str, str], value: float
) -> None:
    """``shadow_<group>_quota`` makes a row (a key may have a shadow quota and no live one);
    ``shadow_would_throttle_ratio`` is per key, shown on each of its rows with a shadow quota.
    Every worker sees the same shadow values and ratios of a key: the largest is taken.
    ``shadow_tenant_*`` are a tenant's, labelled ``tenant``, on its tenant rows."""
    tenant = series.startswith("tenant_")
    if tenant:
        if "tenant" not in labels:
            return
        series = series.removeprefix("tenant_")
        user, client_id = desanitize_user(labels["tenant"]), ""
    elif "client_id" in labels:
        user, client_id = desanitize_user(labels.get("user", "")), labels["client_id"]
    else:
        return
    if series == "would_throttle_ratio":
        for row in rows.values():
            if (row.kind.tenant, row.user, row.client_id) == (tenant, user, client_id) and (
                row.shadow_quota is not None
            ):
                row.shadow_ratio = max(row.shadow_ratio or 0.0, value)
        return
    group, _, rest = series.partition("_")
    if tenant:
        group = f"tenant_{group}"
    kind = _BY_GROUP.get(group)
    if kind is None or rest != "quota" or value >= UNBOUNDED_FROM:
        return
    key = (group, labels["tenant"] if tenant else labels.get("user", ""), client_id)
    shadowed = rows.get(key)
    if shadowed is None:
        shadowed = rows[key] = Row(kind, user, client_id)
    shadowed.shadow_quota = max(shadowed.shadow_quota or 0.0, value)


class ThrottleHistory:
    """Throttle-ms totals of the last ``window_s`` seconds: how throttled each key was."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._points: deque[tuple[float, dict[RowKey, float]]] = deque()

    def update(self, now_s: float, rows: Iterable[Row]) -> list[Row]:
        """Rows with ``throttled_fraction`` over the window ending now (oldest point kept)."""
        rows = list(rows)
        totals = {row.key: row.throttle_total_ms for row in rows}
        self._points.append((now_s, totals))
        # Keep the newest point at or before the window's start: the window is then whole.
        while len(self._points) > 2 and self._points[1][0] <= now_s - self.window_s:
            self._points.popleft()
        then_s, before = self._points[0]
        elapsed_ms = (now_s - then_s) * 1000
        if elapsed_ms <= 0:
            return rows
        out = []
        for row in rows:
            earlier = before.get(row.key, 0.0)
            # A total that went down is a restarted worker or an expired sensor: count anew.
            delta = row.throttle_total_ms - earlier if row.throttle_total_ms >= earlier else 0.0
            fraction = delta / elapsed_ms / max(row.connections, 1)
            out.append(replace(row, throttled_fraction=min(fraction, 1.0)))
        return out


SORTS: Final = ("usage", "throttle", "rate", "connections", "entity", "type")


def sort_rows(rows: Iterable[Row], by: str) -> list[Row]:
    """Descending for figures (the worst first), ascending for names."""
    if by not in SORTS:
        raise ValueError(f"unknown sort {by!r}; expected one of {', '.join(SORTS)}")
    names = sorted(rows, key=lambda r: (r.entity, r.kind.group))
    if by == "entity":
        return names
    if by == "type":
        return sorted(names, key=lambda r: [k.group for k in KINDS].index(r.kind.group))
    if by == "usage":
        return sorted(names, key=lambda r: -(r.usage if r.usage is not None else -1.0))
    if by == "throttle":
        return sorted(
            names, key=lambda r: (-(r.throttled_fraction or 0.0), -(r.throttle_avg_ms or 0.0))
        )
    if by == "rate":
        return sorted(names, key=lambda r: -r.rate)
    return sorted(names, key=lambda r: -r.connections)


def filter_rows(rows: Iterable[Row], pattern: str | None, groups: Sequence[str] = ()) -> list[Row]:
    """``pattern``: a substring of the entity (``user=alice client-id=c``), or a glob when it
    holds ``*``, ``?`` or ``[``; ``groups``: quota types to keep (all when empty)."""
    wanted = {_group_of(g) for g in groups}
    kept = []
    for row in rows:
        if wanted and row.kind.group not in wanted:
            continue
        if pattern:
            text = row.entity
            if any(c in pattern for c in "*?["):
                if not fnmatch.fnmatchcase(text, pattern) and not any(
                    fnmatch.fnmatchcase(part.partition("=")[2], pattern) for part in text.split()
                ):
                    continue
            elif pattern not in text:
                continue
        kept.append(row)
    return kept


def _group_of(name: str) -> str:
    for kind in KINDS:
        if name in (kind.group, kind.label, kind.label.replace("mutation", "controller_mutation")):
            return kind.group
    raise ValueError(
        f"unknown quota type {name!r}; expected one of {', '.join(k.label for k in KINDS)}"
    )


def check_groups(groups: Sequence[str]) -> None:
    for name in groups:
        _group_of(name)
