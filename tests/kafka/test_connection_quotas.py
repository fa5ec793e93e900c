"""Kafka's ``ConnectionQuotasTest`` (core/src/test/scala/unit/kafka/network/), as vectors
against the sans-I/O :class:`quotagate.quota.connection_quotas.ConnectionQuotas`.

Each test names the Kafka test it restates: the same configuration, the same connection
pattern (listeners, addresses, counts, intervals) and the same expectations. Kafka's tests
run acceptor threads against the wall clock and accept a tolerance on measured rates; here
the acceptors are a discrete-event simulation on a simulated clock (:class:`Simulation`),
which makes every run the same, and Kafka's tolerances are kept as they are. The simulated
acceptor does what Kafka's ``ConnectionQuotas.inc`` does with the module's steps: record the
connection, wait the throttle (other acceptors go on meanwhile), wait for a slot, admit.

Kafka's inter-broker listener (REPLICATION in these tests) is the module's
``protected_listener``; the gateway itself has none.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from quotagate.quota.connection_quotas import (
    IP_CONNECTION_RATE_DEFAULT,
    AdmissionKind,
    ConnectionAdmission,
    ConnectionQuotas,
)
from quotagate.quota.java import INT_MAX

EXTERNAL, ADMIN, REPLICATION = "EXTERNAL", "ADMIN", "REPLICATION"
DEFAULT_IP = {EXTERNAL: "192.168.1.1", ADMIN: "192.168.1.2", REPLICATION: "192.168.1.3"}
KNOWN_HOST = "192.168.10.0"
UNKNOWN_HOST = "192.168.2.0"
# The test's broker config: quota.window.num = 2, quota.window.size.seconds = 1.
NUM_QUOTA_SAMPLES = 2
QUOTA_WINDOW_SIZE_S = 1
EPS = 0.01
T0 = 1_700_000_000_000


class ConnectionThrottledError(Exception):
    def __init__(self, admission: ConnectionAdmission) -> None:
        super().__init__(admission)
        self.admission = admission


class TooManyConnectionsError(Exception):
    pass


class WouldBlockError(Exception):
    """The acceptor waits for a connection slot: only a ``dec`` can free one."""


def quotas(**config: int | dict[str, int]) -> ConnectionQuotas:
    return ConnectionQuotas(
        window_num=NUM_QUOTA_SAMPLES,
        window_size_s=QUOTA_WINDOW_SIZE_S,
        protected_listener=REPLICATION,
        **config,  # type: ignore[arg-type]
    )


def add_listeners(cq: ConnectionQuotas, **listener_config: int) -> None:
    """``addListenersAndVerify``: every listener starts with nothing counted or recorded."""
    for name in (EXTERNAL, ADMIN, REPLICATION):
        cq.add_listener(name)
        cq.configure_listener(name, **listener_config)
        assert not cq.max_connections_exceeded(name)
        assert cq.get(DEFAULT_IP[name]) == 0
        assert rate(cq.listener_rate_metric(name), T0) == pytest.approx(0, abs=EPS)
        assert value(cq.listener_throttle_metric(name), T0) == 0
        assert value(cq.ip_throttle_metric(name), T0) == 0
    assert rate(cq.broker_rate_metric(), T0) == pytest.approx(0, abs=EPS)


def rate(sensor: object, now_ms: int) -> float:
    return float(sensor.metrics[0].peek(now_ms))  # type: ignore[attr-defined]


def value(sensor: object, now_ms: int) -> float:
    """A metric's value as Kafka's tests read it: an Avg of nothing is NaN, 0 as a long."""
    measured = rate(sensor, now_ms)
    return 0.0 if math.isnan(measured) else measured


@dataclass
class Clock:
    now: int = T0


@dataclass
class Acceptor:
    """Kafka's ``ConnectionQuotas.inc`` for one listener, as one acceptor thread runs it."""

    cq: ConnectionQuotas
    clock: Clock
    listener: str
    waits: int = 0
    """Times the acceptor waited: Kafka's ``AcceptorBlockedPercent`` meter is non-zero."""

    def begin(self, ip: str) -> int:
        """Record the connection; the time the acceptor may go on (now when it need not wait)."""
        now = self.clock.now
        throttle = self.cq.record_connection(self.listener, now)
        if throttle > 0 or not self.cq.slot_available(self.listener):
            self.waits += 1
        return now + throttle

    def finish(self, ip: str) -> None:
        """After the throttle: a slot, then the IP's turn."""
        if not self.cq.slot_available(self.listener):
            raise WouldBlockError
        admission = self.cq.admit(self.listener, ip, self.clock.now)
        if admission.kind is AdmissionKind.THROTTLED:
            raise ConnectionThrottledError(admission)
        if admission.kind is AdmissionKind.REFUSED:
            raise TooManyConnectionsError

    def inc(self, ip: str | None = None) -> None:
        """One connection when nothing else runs meanwhile: the clock jumps over a throttle."""
        address = ip or DEFAULT_IP[self.listener]
        self.clock.now = max(self.clock.now, self.begin(address))
        self.finish(address)


@dataclass(order=True)
class _Event:
    at: int
    seq: int
    run: Iterator[int] = field(compare=False)


class Simulation:
    """Acceptor threads on one simulated clock: each thread is a generator yielding the time it
    next wants to run; threads run in time order, so one waits while the others go on."""

    def __init__(self, cq: ConnectionQuotas, clock: Clock | None = None) -> None:
        self.cq = cq
        self.clock = clock or Clock()
        self.acceptors = {name: Acceptor(cq, self.clock, name) for name in DEFAULT_IP}
        self._queue: list[_Event] = []
        self._seq = itertools.count()
        self.results: dict[str, bool] = {}

    def accept_connections(
        self,
        name: str,
        listener: str,
        ip: str,
        count: int,
        interval_ms: int = 0,
        expect_ip_throttle: bool = False,
    ) -> None:
        """Kafka's ``acceptConnections``: one connection every ``interval_ms`` (or as fast as
        the quotas let), sleeping until the next send time after each."""

        def thread() -> Iterator[int]:
            acceptor = self.acceptors[listener]
            next_send = self.clock.now + interval_ms
            throttled = False
            for _ in range(count):
                resume = acceptor.begin(ip)
                if resume > self.clock.now:
                    yield resume
                try:
                    acceptor.finish(ip)
                except ConnectionThrottledError:
                    if not expect_ip_throttle:
                        raise
                    throttled = True
                if next_send > self.clock.now:
                    yield next_send
                next_send += interval_ms
            self.results[name] = throttled

        self._push(self.clock.now, thread())

    def run(self) -> int:
        """Run every thread to its end; the elapsed simulated milliseconds."""
        start = self.clock.now
        while self._queue:
            event = heapq.heappop(self._queue)
            self.clock.now = max(self.clock.now, event.at)
            try:
                at = next(event.run)
            except StopIteration:
                continue
            self._push(at, event.run)
        return self.clock.now - start

    def _push(self, at: int, run: Iterator[int]) -> None:
        heapq.heappush(self._queue, _Event(at, next(self._seq), run))


def accept(cq: ConnectionQuotas, listener: str, count: int, ip: str | None = None) -> None:
    acceptor = Acceptor(cq, Clock(), listener)
    for _ in range(count):
        acceptor.inc(ip)


def measured_rate(
    sim: Simulation, listener: str, count: int, interval_ms: int, expect_throttle: bool = False
) -> float:
    """Kafka's ``acceptConnectionsAndVerifyRate``: connections counted per elapsed second."""
    ip = DEFAULT_IP[listener]
    before = sim.cq.get(ip)
    sim.accept_connections(listener, listener, ip, count, interval_ms, expect_throttle)
    elapsed_ms = sim.run()
    return (sim.cq.get(ip) - before) / (elapsed_ms / 1000.0)


# -- ConnectionQuotasTest ----------------------------------------------------------------------


def test_fail_when_no_listeners() -> None:
    """ConnectionQuotasTest.testFailWhenNoListeners"""
    cq = quotas()
    with pytest.raises(KeyError):
        Acceptor(cq, Clock(), EXTERNAL).inc()


def test_fail_decrement_for_unknown_ip() -> None:
    """ConnectionQuotasTest.testFailDecrementForUnknownIp"""
    cq = quotas()
    add_listeners(cq)
    with pytest.raises(ValueError, match="no connections"):
        cq.dec(EXTERNAL, UNKNOWN_HOST)


def test_no_connection_limits_by_default() -> None:
    """ConnectionQuotasTest.testNoConnectionLimitsByDefault"""
    cq = quotas()
    add_listeners(cq)
    sim = Simulation(cq)
    for listener, ip in DEFAULT_IP.items():
        sim.accept_connections(listener, listener, ip, 10_000)
    sim.run()
    assert rate(cq.broker_rate_metric(), sim.clock.now) > 0
    for listener, ip in DEFAULT_IP.items():
        assert cq.get(ip) == 10_000
        assert rate(cq.listener_rate_metric(listener), sim.clock.now) > 0
        cq.dec(listener, ip)
        assert cq.get(ip) == 9_999
    assert all(acceptor.waits == 0 for acceptor in sim.acceptors.values())


def test_max_connections_per_ip() -> None:
    """ConnectionQuotasTest.testMaxConnectionsPerIp"""
    limit = 17
    cq = quotas(max_connections_per_ip=limit)
    add_listeners(cq)
    ip = DEFAULT_IP[EXTERNAL]
    accept(cq, EXTERNAL, limit)
    assert cq.get(ip) == limit
    # Over the limit a connection is still counted; the acceptor closes it, and that
    # (Acceptor.closeChannel) is what takes it back out.
    acceptor = Acceptor(cq, Clock(), EXTERNAL)
    for _ in range(2):
        with pytest.raises(TooManyConnectionsError):
            acceptor.inc()
    assert cq.get(ip) == limit + 2
    # Another address on the same listener is not limited by this one.
    accept(cq, EXTERNAL, limit, KNOWN_HOST)
    for _ in range(4):
        cq.dec(EXTERNAL, ip)
    assert cq.get(ip) == limit - 2
    accept(cq, EXTERNAL, 2)
    assert cq.get(ip) == limit


def test_max_broker_wide_connection_limit() -> None:
    """ConnectionQuotasTest.testMaxBrokerWideConnectionLimit"""
    max_connections = 800
    cq = quotas(max_connections=max_connections)
    add_listeners(cq)
    external = Acceptor(cq, Clock(), EXTERNAL)
    for _ in range(max_connections):
        external.inc()
    assert cq.get(DEFAULT_IP[EXTERNAL]) == max_connections
    assert external.waits == 0
    assert not cq.max_connections_exceeded(EXTERNAL)
    # One more waits for a slot, and gets it when a connection closes.
    with pytest.raises(WouldBlockError):
        external.inc()
    assert external.waits == 1
    cq.dec(EXTERNAL, DEFAULT_IP[EXTERNAL])
    external.finish(DEFAULT_IP[EXTERNAL])
    assert cq.get(DEFAULT_IP[EXTERNAL]) == max_connections
    # The inter-broker listener is let in past the broker-wide limit...
    accept(cq, REPLICATION, 1)
    assert cq.max_connections_exceeded(EXTERNAL)
    # ...while another listener waits, even as more inter-broker connections come in.
    admin = Acceptor(cq, Clock(), ADMIN)
    with pytest.raises(WouldBlockError):
        admin.inc()
    accept(cq, REPLICATION, 1)
    for _ in range(2):
        cq.dec(EXTERNAL, DEFAULT_IP[EXTERNAL])
    assert not cq.slot_available(ADMIN)
    cq.dec(EXTERNAL, DEFAULT_IP[EXTERNAL])
    admin.finish(DEFAULT_IP[ADMIN])
    assert cq.get(DEFAULT_IP[ADMIN]) == 1


def test_max_listener_connection_limits() -> None:
    """ConnectionQuotasTest.testMaxListenerConnectionLimits"""
    listener_max = 200
    cq = quotas(max_connections=800)
    add_listeners(cq)
    for listener in DEFAULT_IP:
        cq.configure_listener(listener, max_connections=listener_max)
    for listener in DEFAULT_IP:
        accept(cq, listener, listener_max)
    acceptors = {listener: Acceptor(cq, Clock(), listener) for listener in DEFAULT_IP}
    for listener, ip in DEFAULT_IP.items():
        assert cq.get(ip) == listener_max
        assert not cq.max_connections_exceeded(listener)
        # Every listener is at its own limit, the inter-broker one too.
        with pytest.raises(WouldBlockError):
            acceptors[listener].inc()
    for listener, ip in DEFAULT_IP.items():
        cq.dec(listener, ip)
    for listener, ip in DEFAULT_IP.items():
        acceptors[listener].finish(ip)
        assert cq.get(ip) == listener_max


def test_broker_connection_rate_limit_when_actual_rate_below_limit() -> None:
    """ConnectionQuotasTest.testBrokerConnectionRateLimitWhenActualRateBelowLimit"""
    cq = quotas(max_connection_creation_rate=125)
    add_listeners(cq)
    sim = Simulation(cq)
    for listener, ip in DEFAULT_IP.items():
        sim.accept_connections(listener, listener, ip, 200, interval_ms=25)  # 3 x 40/s
    sim.run()
    assert all(acceptor.waits == 0 for acceptor in sim.acceptors.values())
    assert all(cq.get(ip) == 200 for ip in DEFAULT_IP.values())


def test_broker_connection_rate_limit_when_actual_rate_above_limit() -> None:
    """ConnectionQuotasTest.testBrokerConnectionRateLimitWhenActualRateAboveLimit"""
    cq = quotas(max_connection_creation_rate=90)
    add_listeners(cq)
    sim = Simulation(cq)
    for listener, ip in DEFAULT_IP.items():
        sim.accept_connections(listener, listener, ip, 400, interval_ms=10)  # 3 x 100/s
    sim.run()
    # Only the inter-broker listener is exempt from the broker-wide rate.
    assert sim.acceptors[REPLICATION].waits == 0
    assert sim.acceptors[EXTERNAL].waits > 0
    assert sim.acceptors[ADMIN].waits > 0
    assert all(cq.get(ip) == 400 for ip in DEFAULT_IP.values())


def test_listener_connection_rate_limit_when_actual_rate_below_limit() -> None:
    """ConnectionQuotasTest.testListenerConnectionRateLimitWhenActualRateBelowLimit"""
    cq = quotas(max_connection_creation_rate=125)
    add_listeners(cq, max_connection_creation_rate=50)
    sim = Simulation(cq)
    for listener, ip in DEFAULT_IP.items():
        sim.accept_connections(listener, listener, ip, 200, interval_ms=25)
    sim.run()
    assert all(acceptor.waits == 0 for acceptor in sim.acceptors.values())
    assert all(cq.get(ip) == 200 for ip in DEFAULT_IP.values())


def test_listener_connection_rate_limit_when_actual_rate_above_limit() -> None:
    """ConnectionQuotasTest.testListenerConnectionRateLimitWhenActualRateAboveLimit"""
    listener_rate = 30
    cq = quotas(max_connection_creation_rate=125)
    add_listeners(cq, max_connection_creation_rate=listener_rate)
    sim = Simulation(cq)
    for listener, ip in DEFAULT_IP.items():
        sim.accept_connections(listener, listener, ip, 600, interval_ms=25)
    elapsed_s = sim.run() / 1000.0
    for listener, ip in DEFAULT_IP.items():
        # Kafka's tolerance: the measurement may fall just before or after a quota window.
        assert cq.get(ip) / elapsed_s == pytest.approx(listener_rate, abs=7)
        assert sim.acceptors[listener].waits > 0
        assert value(cq.listener_throttle_metric(listener), sim.clock.now) > 0
        assert cq.get(ip) == 600


def test_ip_connection_rate_when_actual_rate_below_limit() -> None:
    """ConnectionQuotasTest.testIpConnectionRateWhenActualRateBelowLimit"""
    cq = quotas()
    add_listeners(cq)
    cq.update_ip_connection_rate_quota(DEFAULT_IP[EXTERNAL], 30)
    sim = Simulation(cq)
    assert measured_rate(sim, EXTERNAL, 200, interval_ms=40) == 25
    assert cq.get(DEFAULT_IP[EXTERNAL]) == 200
    # An address without a quota is not throttled either.
    assert measured_rate(sim, ADMIN, 200, interval_ms=20) == 50
    assert cq.get(DEFAULT_IP[ADMIN]) == 200
    assert all(acceptor.waits == 0 for acceptor in sim.acceptors.values())
    for listener in DEFAULT_IP:
        assert value(cq.ip_throttle_metric(listener), sim.clock.now) == 0


def test_ip_connection_rate_when_actual_rate_above_limit() -> None:
    """ConnectionQuotasTest.testIpConnectionRateWhenActualRateAboveLimit"""
    ip_rate = 20
    cq = quotas()
    add_listeners(cq)
    cq.update_ip_connection_rate_quota(DEFAULT_IP[EXTERNAL], ip_rate)
    sim = Simulation(cq)
    rate_ = measured_rate(sim, EXTERNAL, 80, interval_ms=25, expect_throttle=True)
    assert rate_ == pytest.approx(ip_rate, abs=1)
    assert value(cq.ip_throttle_metric(EXTERNAL), sim.clock.now) > 0
    # The default quota applies to addresses without one of their own.
    cq.update_ip_connection_rate_quota(None, ip_rate)
    assert value(cq.ip_throttle_metric(ADMIN), sim.clock.now) == 0
    rate_ = measured_rate(sim, ADMIN, 80, interval_ms=25, expect_throttle=True)
    assert rate_ == pytest.approx(ip_rate, abs=1)
    assert value(cq.ip_throttle_metric(ADMIN), sim.clock.now) > 0
    # An IP over its rate never makes the acceptor wait.
    assert all(acceptor.waits == 0 for acceptor in sim.acceptors.values())
    assert value(cq.ip_throttle_metric(REPLICATION), sim.clock.now) == 0


def test_ip_connection_rate_with_listener_connection_rate() -> None:
    """ConnectionQuotasTest.testIpConnectionRateWithListenerConnectionRate"""
    cq = quotas()
    cq.update_ip_connection_rate_quota(None, 25)
    add_listeners(cq, max_connection_creation_rate=35)
    sim = Simulation(cq)
    for ip in (KNOWN_HOST, UNKNOWN_HOST):
        sim.accept_connections(ip, EXTERNAL, ip, 35, expect_ip_throttle=True)
    sim.run()
    # The listener's rate makes the acceptor wait before either IP reaches its own rate.
    assert sim.acceptors[EXTERNAL].waits > 0
    assert sum(sim.results.values()) < 2


def test_rejected_ip_connection_unrecorded_from_connection_rate_quotas() -> None:
    """ConnectionQuotasTest.testRejectedIpConnectionUnrecordedFromConnectionRateQuotas"""
    cq = quotas()
    add_listeners(cq)
    clock = Clock()
    for listener in (EXTERNAL, REPLICATION):
        cq.update_ip_connection_rate_quota(DEFAULT_IP[listener], 0)
    with pytest.raises(ConnectionThrottledError):
        Acceptor(cq, clock, EXTERNAL).inc()
    ip_rate = cq.ip_rate_metric(DEFAULT_IP[EXTERNAL])
    assert ip_rate is not None
    assert rate(ip_rate, clock.now) == pytest.approx(0, abs=EPS)
    assert rate(cq.listener_rate_metric(EXTERNAL), clock.now) == pytest.approx(0, abs=EPS)
    assert rate(cq.broker_rate_metric(), clock.now) == pytest.approx(0, abs=EPS)
    with pytest.raises(ConnectionThrottledError):
        Acceptor(cq, clock, REPLICATION).inc()
    ip_rate = cq.ip_rate_metric(DEFAULT_IP[REPLICATION])
    assert ip_rate is not None
    assert rate(ip_rate, clock.now) == pytest.approx(0, abs=EPS)
    assert rate(cq.listener_rate_metric(REPLICATION), clock.now) == pytest.approx(0, abs=EPS)
    assert rate(cq.broker_rate_metric(), clock.now) == pytest.approx(0, abs=EPS)


def test_max_listener_connection_listener_must_be_above_zero() -> None:
    """ConnectionQuotasTest.testMaxListenerConnectionListenerMustBeAboveZero"""
    cq = quotas()
    cq.add_listener(EXTERNAL)
    with pytest.raises(ValueError, match=r"Invalid max\.connection\.creation\.rate 0"):
        cq.configure_listener(EXTERNAL, max_connection_creation_rate=0)


def test_max_listener_connection_rate_reconfiguration() -> None:
    """ConnectionQuotasTest.testMaxListenerConnectionRateReconfiguration"""
    cq = quotas()
    cq.add_listener(EXTERNAL)
    cq.configure_listener(EXTERNAL, max_connection_creation_rate=20)
    cq.configure_listener(EXTERNAL)  # the limit removed
    sim = Simulation(cq)
    sim.accept_connections(EXTERNAL, EXTERNAL, DEFAULT_IP[EXTERNAL], 1000)
    sim.run()
    assert sim.acceptors[EXTERNAL].waits == 0
    cq.configure_listener(EXTERNAL, max_connection_creation_rate=10)
    assert measured_rate(sim, EXTERNAL, 200, interval_ms=5) == pytest.approx(10, abs=3)
    assert sim.acceptors[EXTERNAL].waits > 0


def test_max_broker_connection_rate_reconfiguration() -> None:
    """ConnectionQuotasTest.testMaxBrokerConnectionRateReconfiguration"""
    cq = quotas()
    add_listeners(cq)
    cq.update_broker_max_connection_rate(50)
    sim = Simulation(cq)
    # A short run: Kafka's tolerance only shows that the rate is not unlimited.
    assert measured_rate(sim, EXTERNAL, 400, interval_ms=5) == pytest.approx(50, abs=20)
    assert sim.acceptors[EXTERNAL].waits > 0


def _assert_ip_quota(cq: ConnectionQuotas, ip: str, expected: int) -> None:
    """``verifyIpConnectionQuota``: the quota and the bound of the IP's rate metric."""
    assert cq.connection_rate_for_ip(ip) == expected
    sensor = cq.ip_rate_metric(ip)
    assert sensor is not None
    quota = sensor.metrics[0].config.quota
    assert quota is not None
    assert quota.bound == pytest.approx(expected, abs=0.1)


def test_ip_connection_rate_metric_update() -> None:
    """ConnectionQuotasTest.testIpConnectionRateMetricUpdate"""
    cq = quotas()
    cq.add_listener(EXTERNAL)
    cq.add_listener(ADMIN)
    external, admin = DEFAULT_IP[EXTERNAL], DEFAULT_IP[ADMIN]
    cq.update_ip_connection_rate_quota(None, 50)
    clock = Clock()
    Acceptor(cq, clock, EXTERNAL).inc()
    Acceptor(cq, clock, ADMIN).inc()
    _assert_ip_quota(cq, external, 50)
    _assert_ip_quota(cq, admin, 50)
    cq.update_ip_connection_rate_quota(external, 30)
    _assert_ip_quota(cq, external, 30)
    cq.update_ip_connection_rate_quota(None, 20)
    _assert_ip_quota(cq, external, 30)
    _assert_ip_quota(cq, admin, 20)
    cq.update_ip_connection_rate_quota(None, None)
    _assert_ip_quota(cq, admin, IP_CONNECTION_RATE_DEFAULT)
    _assert_ip_quota(cq, external, 30)
    cq.update_ip_connection_rate_quota(external, None)
    _assert_ip_quota(cq, external, IP_CONNECTION_RATE_DEFAULT)


def test_enforced_ip_connection_rate_quota_update() -> None:
    """ConnectionQuotasTest.testEnforcedIpConnectionRateQuotaUpdate"""
    ip_rate, attempts = 20, 40
    cq = quotas()
    add_listeners(cq)
    external, admin = DEFAULT_IP[EXTERNAL], DEFAULT_IP[ADMIN]
    clock = Clock()  # Kafka's MockTime: it stands still, nothing here sleeps
    acceptors = {name: Acceptor(cq, clock, name) for name in (EXTERNAL, ADMIN)}

    def connect(listener: str, count: int) -> None:
        for _ in range(count):
            acceptors[listener].inc()

    cq.update_ip_connection_rate_quota(external, ip_rate)
    with pytest.raises(ConnectionThrottledError):
        connect(EXTERNAL, attempts)
    assert cq.get(external) == ip_rate
    # A higher quota lets connections in up to the new bound.
    cq.update_ip_connection_rate_quota(external, 30)
    with pytest.raises(ConnectionThrottledError):
        connect(EXTERNAL, attempts)
    assert cq.get(external) == 30
    cq.update_ip_connection_rate_quota(external, None)
    connect(EXTERNAL, attempts)
    assert cq.get(external) == attempts + 30
    connect(ADMIN, attempts)
    assert cq.get(admin) == attempts
    # A default quota applies to an address that had none.
    cq.update_ip_connection_rate_quota(None, ip_rate)
    with pytest.raises(ConnectionThrottledError):
        connect(ADMIN, attempts)
    assert cq.get(admin) == attempts + ip_rate
    assert all(acceptor.waits == 0 for acceptor in acceptors.values())


def test_non_default_connection_count_limit_and_rate_limit() -> None:
    """ConnectionQuotasTest.testNonDefaultConnectionCountLimitAndRateLimit"""
    broker_rate, max_connections = 25, 350
    cq = quotas(max_connections=max_connections, max_connection_creation_rate=broker_rate)
    add_listeners(cq)
    sim = Simulation(cq)
    measured = measured_rate(sim, EXTERNAL, max_connections, interval_ms=10)
    assert measured == pytest.approx(broker_rate, abs=8)
    assert sim.acceptors[EXTERNAL].waits > 0
    ip = DEFAULT_IP[EXTERNAL]
    assert cq.get(ip) == max_connections
    acceptor = sim.acceptors[EXTERNAL]
    with pytest.raises(WouldBlockError):
        acceptor.inc()
    cq.dec(EXTERNAL, ip)
    acceptor.finish(ip)
    assert cq.get(ip) == max_connections


def test_throttle_is_capped_at_one_quota_window() -> None:
    """ConnectionQuotas.recordAndGetThrottleTimeMs: QuotaUtils.boundedThrottleTime with
    quota.window.size.seconds as the cap (here a quota of 0, which Java divides to infinity)."""
    cq = quotas()
    add_listeners(cq)
    cq.update_ip_connection_rate_quota(DEFAULT_IP[EXTERNAL], 0)
    with pytest.raises(ConnectionThrottledError) as raised:
        Acceptor(cq, Clock(), EXTERNAL).inc()
    assert raised.value.admission.throttle_ms == QUOTA_WINDOW_SIZE_S * 1000


def test_unlimited_means_int_max() -> None:
    """QuotaConfig.IP_CONNECTION_RATE_DEFAULT: an IP whose rate is Int.MaxValue has no
    quota at all (no sensor is made for it), whether set or defaulted."""
    cq = quotas()
    add_listeners(cq)
    cq.update_ip_connection_rate_quota(DEFAULT_IP[EXTERNAL], INT_MAX)
    accept(cq, EXTERNAL, 5)
    assert cq.ip_rate_metric(DEFAULT_IP[EXTERNAL]) is None


def test_ip_rate_sensors_expire_after_an_idle_hour() -> None:
    """ConnectionQuotaEntity.ipQuotaEntity: an IP's rate sensor expires after an hour
    (3600 s) without connections; the broker's and listeners' never do."""
    cq = quotas()
    add_listeners(cq)
    cq.update_ip_connection_rate_quota(None, 10)
    clock = Clock()
    Acceptor(cq, clock, EXTERNAL).inc()
    assert cq.expire_sensors(clock.now + 3_600_000) == []
    assert cq.expire_sensors(clock.now + 3_600_001) == [DEFAULT_IP[EXTERNAL]]
    assert cq.ip_rate_metric(DEFAULT_IP[EXTERNAL]) is None
    # A new connection makes a new sensor with the quota in force.
    clock.now += 3_600_001
    Acceptor(cq, clock, EXTERNAL).inc()
    _assert_ip_quota(cq, DEFAULT_IP[EXTERNAL], 10)
