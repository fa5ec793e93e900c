"""Refused clients: authentication failures, failed TLS handshakes, refused certificates.

A misconfigured client retries for ever, and each try is a refusal: logging every one would
bury the operator's log under one client. So every refusal is counted
(``quotagate_authentication_refusals_total{listener, reason}``), and each client address gets
one WARNING line per ``log.refusals.interval.ms``: the first refusal is logged at once, later
ones within the interval are counted, and the count (by reason) is logged once the interval is
over, from the gateway's periodic sweep or with the address's next logged refusal.

Lines carry the listener, the client's address, the mechanism where there is one and why, in
words; never what the client presented.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from prometheus_client import Counter as PrometheusCounter

from quotagate.logs import kv


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a client was refused, for the connection's log line and the refusals counter.

    ``reason`` labels the counter: one of a small fixed set (``sasl_authentication_failed``,
    ``sasl_unsupported_mechanism``, ``sasl_protocol_error``, ``tls_handshake_failed``,
    ``certificate_missing``, ``certificate_untrusted``, ``certificate_unmapped``).
    ``detail`` says why in words, never what the client presented.
    """

    reason: str
    detail: str
    mechanism: str | None = None


log = logging.getLogger(__name__)

TLS_HANDSHAKE_FAILED: Final = "tls_handshake_failed"
CERTIFICATE_MISSING: Final = "certificate_missing"
CERTIFICATE_UNTRUSTED: Final = "certificate_untrusted"
CERTIFICATE_UNMAPPED: Final = "certificate_unmapped"

MAX_ADDRESSES: Final = 10_000
"""Addresses remembered at once: past this the longest quiet one is forgotten (its refusals are
still counted by the metric), so a scan from many addresses cannot grow the table."""


@dataclass(slots=True)
class _Address:
    logged_at: float
    suppressed: Counter[str] = field(default_factory=Counter)
    listeners: set[str] = field(default_factory=set)


class RefusalLog:
    def __init__(
        self,
        counter: PrometheusCounter,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
        max_addresses: int = MAX_ADDRESSES,
    ) -> None:
        """``counter``: labelled (listener, reason). ``interval_s``: 0 logs every refusal."""
        self._counter = counter
        self._interval_s = interval_s
        self._clock = clock
        self._max_addresses = max_addresses
        self._addresses: OrderedDict[str, _Address] = OrderedDict()

    def refused(self, event: str, listener: str, host: str, port: int, refusal: Refusal) -> None:
        """One refusal: counted always, logged unless the address was logged lately."""
        self._counter.labels(listener, refusal.reason).inc()
        now = self._clock()
        known = self._addresses.get(host)
        if known is not None and now - known.logged_at < self._interval_s:
            known.suppressed[refusal.reason] += 1
            known.listeners.add(listener)
            self._addresses.move_to_end(host)
            return
        fields: dict[str, object] = {"listener": listener, "client": _address(host, port)}
        if refusal.mechanism:
            fields["mechanism"] = refusal.mechanism
        fields["reason"] = refusal.reason
        fields["detail"] = refusal.detail
        if known is not None and known.suppressed:
            # The interval is over and this address's count was not yet said: say it here.
            fields["earlier_refusals"] = _counts(known.suppressed)
        log.warning(kv(event, **fields))
        if self._interval_s <= 0:
            return
        self._addresses[host] = _Address(now)
        self._addresses.move_to_end(host)
        while len(self._addresses) > self._max_addresses:
            self._addresses.popitem(last=False)

    def flush(self) -> None:
        """Log the count of every address whose interval is over, and forget those."""
        now = self._clock()
        for host, known in list(self._addresses.items()):
            if now - known.logged_at < self._interval_s:
                continue
            del self._addresses[host]
            if known.suppressed:
                log.warning(
                    kv(
                        "refusals_not_logged",
                        client=host,
                        listeners=",".join(sorted(known.listeners)),
                        refusals=_counts(known.suppressed),
                        seconds=round(now - known.logged_at),
                    )
                )


def tls_refusal(exc: BaseException) -> Refusal | None:
    """Why a client's TLS handshake failed, or None when it is no refusal (a connection closed
    or reset before or during the handshake: a port probe, a health check)."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return Refusal(
            CERTIFICATE_UNTRUSTED,
            f"client certificate refused: {exc.verify_message} (check the listener's "
            "ssl.ca.location against the CA that signed the client's certificate)",
        )
    if not isinstance(exc, ssl.SSLError) or isinstance(exc, ssl.SSLEOFError):
        return None
    reason = str(exc.reason or "")
    if reason == "UNEXPECTED_EOF_WHILE_READING":
        return None
    if reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
        return Refusal(
            CERTIFICATE_MISSING,
            "no client certificate: the listener requires one (ssl.client.auth = required)",
        )
    if reason == "CERTIFICATE_VERIFY_FAILED":
        return Refusal(CERTIFICATE_UNTRUSTED, f"client certificate refused: {exc.strerror}")
    if "ALERT" in reason:
        # The client ended the handshake: most often it does not trust the gateway's certificate.
        return Refusal(
            TLS_HANDSHAKE_FAILED,
            f"the client refused the handshake ({reason}): does it trust the CA of the "
            "listener's ssl.certificate.location, and name a host the certificate names?",
        )
    if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST", "UNKNOWN_PROTOCOL"):
        return Refusal(
            TLS_HANDSHAKE_FAILED,
            f"not a TLS client ({reason}): is the client set to security.protocol SSL or SASL_SSL?",
        )
    return Refusal(TLS_HANDSHAKE_FAILED, f"TLS handshake failed: {reason or exc}")


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _counts(reasons: Counter[str]) -> str:
    """``sasl_authentication_failed:41,tls_handshake_failed:2``."""
    return ",".join(f"{reason}:{count}" for reason, count in sorted(reasons.items()))
