"""Refused clients: every refusal counted, one line per client address per interval."""

from __future__ import annotations

import logging
import ssl

import pytest
from prometheus_client import CollectorRegistry, Counter

from quotagate.gateway.auth.authenticator import Refusal
from quotagate.gateway.refusals import RefusalLog, tls_refusal

WRONG = Refusal("sasl_authentication_failed", "Invalid client credentials", "SCRAM-SHA-512")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _log(interval_s: float = 60.0, max_addresses: int = 100) -> tuple[RefusalLog, Clock, Counter]:
    counter = Counter("refusals", "", ["listener", "reason"], registry=CollectorRegistry())
    clock = Clock()
    return RefusalLog(counter, interval_s, clock, max_addresses), clock, counter


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "quotagate.gateway.refusals"]


def test_a_client_retrying_is_one_line_then_its_count(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    refusals, clock, counter = _log()
    for second in range(60):  # a retry a second, each from a new port
        clock.now = second
        refusals.refused("authentication_failed", "SASL", "10.0.0.7", 40_000 + second, WRONG)
        refusals.flush()
    assert _lines(caplog) == [
        "event=authentication_failed listener=SASL client=10.0.0.7:40000 "
        'mechanism=SCRAM-SHA-512 reason=sasl_authentication_failed detail="Invalid client '
        'credentials"'
    ]
    clock.now = 60.0
    refusals.flush()
    assert _lines(caplog)[1:] == [
        "event=refusals_not_logged client=10.0.0.7 listeners=SASL "
        "refusals=sasl_authentication_failed:59 seconds=60"
    ]
    assert counter.labels("SASL", "sasl_authentication_failed")._value.get() == 60
    assert all(r.levelno == logging.WARNING for r in caplog.records)


def test_the_next_line_after_the_interval_carries_the_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    refusals, clock, _ = _log()
    refusals.refused("authentication_failed", "SASL", "10.0.0.7", 1, WRONG)
    clock.now = 1.0
    refusals.refused("authentication_failed", "SASL", "10.0.0.7", 2, WRONG)
    clock.now = 61.0
    refusals.refused("authentication_failed", "SASL", "10.0.0.7", 3, WRONG)
    first, second = _lines(caplog)
    assert "earlier_refusals" not in first
    assert second.endswith("earlier_refusals=sasl_authentication_failed:1")


def test_each_address_has_its_own_line_and_the_table_is_bounded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    refusals, _, counter = _log(max_addresses=2)
    for host in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.1"):
        refusals.refused("authentication_failed", "SASL", host, 1, WRONG)
    # 10.0.0.1 was forgotten for 10.0.0.3 (the table holds two): it is logged again.
    assert [line.split()[2] for line in _lines(caplog)] == [
        "client=10.0.0.1:1",
        "client=10.0.0.2:1",
        "client=10.0.0.3:1",
        "client=10.0.0.1:1",
    ]
    assert counter.labels("SASL", "sasl_authentication_failed")._value.get() == 4


def test_an_interval_of_zero_logs_every_refusal(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    refusals, _, _ = _log(interval_s=0)
    for port in range(3):
        refusals.refused("authentication_failed", "SASL", "::1", port, WRONG)
    assert [line.split()[2] for line in _lines(caplog)] == [
        "client=[::1]:0",
        "client=[::1]:1",
        "client=[::1]:2",
    ]


def _ssl_error(cls: type[ssl.SSLError], reason: str) -> ssl.SSLError:
    error = cls(1, f"[SSL: {reason}] {reason.lower()}")
    error.reason = reason
    return error


@pytest.mark.parametrize(
    ("exc", "reason"),
    [
        (_ssl_error(ssl.SSLError, "PEER_DID_NOT_RETURN_A_CERTIFICATE"), "certificate_missing"),
        (_ssl_error(ssl.SSLError, "TLSV1_ALERT_UNKNOWN_CA"), "tls_handshake_failed"),
        (_ssl_error(ssl.SSLError, "WRONG_VERSION_NUMBER"), "tls_handshake_failed"),
        (_ssl_error(ssl.SSLError, "UNEXPECTED_EOF_WHILE_READING"), None),
        (ConnectionResetError(104, "reset"), None),
    ],
)
def test_what_a_failed_handshake_is(exc: BaseException, reason: str | None) -> None:
    refusal = tls_refusal(exc)
    assert (refusal.reason if refusal else None) == reason
