"""The verification keys of a JWKS endpoint (``sasl.oauthbearer.jwks.endpoint.url``), kept fresh.

As Kafka's ``RefreshingHttpsJwks``: the keys are fetched once at start (a failure stops the
gateway from starting, loudly), then every ``sasl.oauthbearer.jwks.endpoint.refresh.ms`` by a
timer thread, and at once when a token names a key id the set does not have (at most once a
minute per key id, so unknown ids cannot make the gateway hammer the endpoint). Fetches never
run on the event loop. A failed refresh is retried with backoff (100 ms doubling, for up to
10 s, Kafka's defaults) and otherwise keeps the keys it had; two refreshes never overlap.

The timer holds the cache only weakly: a cache nobody uses any more (a stopped gateway's)
lets its timer end at the next tick.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Final

from jwt import PyJWKClient, PyJWKClientError

from quotagate.logs import error_text, kv
from quotagate.security.oauthbearer import VerificationKey, parse_key_set

log = logging.getLogger(__name__)

DEFAULT_REFRESH_MS: Final = 3_600_000
MISSING_KEY_ID_RECHECK_S: Final = 60.0
_MISSING_KEY_IDS_KEPT: Final = 16
_MAX_KEY_ID_LENGTH: Final = 1000
_FETCH_TIMEOUT_S: Final = 10


class JwksError(Exception):
    """The JWKS could not be fetched or read."""


class JwksCache:
    def __init__(
        self,
        url: str,
        refresh_ms: int = DEFAULT_REFRESH_MS,
        *,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 10_000,
    ) -> None:
        """The retry settings are Kafka's ``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms``
        and ``.max.ms``, with their defaults."""
        self.url = url
        self._refresh_s = refresh_ms / 1000
        self._retry_backoff_s = retry_backoff_ms / 1000
        self._retry_backoff_max_s = retry_backoff_max_ms / 1000
        self._client = PyJWKClient(
            url, cache_jwk_set=False, cache_keys=False, timeout=_FETCH_TIMEOUT_S
        )
        self._keys: Mapping[str, VerificationKey] = {}
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()  # held while a refresh runs
        self._expedited: threading.Thread | None = None
        self._missing: OrderedDict[str, float] = OrderedDict()
        self._stop = threading.Event()
        self.refreshes = 0
        """Refreshes done since start, failed or not (for the tests and the log)."""

    def load(self) -> None:
        """The first fetch, in the caller's thread, then the refresh timer; raises
        :class:`JwksError`."""
        self._keys = self._fetch()
        log.info(kv("jwks_loaded", url=self.url, keys=len(self._keys)))
        timer = threading.Thread(
            target=_tick,
            args=(weakref.ref(self), self._stop, self._refresh_s),
            name="jwks-refresh-timer",
            daemon=True,
        )
        timer.start()

    def keys(self) -> Mapping[str, VerificationKey]:
        return self._keys

    def missing(self, key_id: str | None, now: float) -> None:
        """A token named a key the set lacks: refresh soon, once per key id per minute.

        ``now`` is ``time.monotonic()`` seconds.
        """
        if key_id is None or len(key_id) > _MAX_KEY_ID_LENGTH:
            return
        with self._lock:
            recheck = self._missing.get(key_id)
            if recheck is not None and recheck > now:
                return
            self._missing[key_id] = now + MISSING_KEY_ID_RECHECK_S
            self._missing.move_to_end(key_id)
            while len(self._missing) > _MISSING_KEY_IDS_KEPT:
                self._missing.popitem(last=False)
            if self._expedited is not None and self._expedited.is_alive():
                return
            self._expedited = threading.Thread(
                target=self.refresh, name="jwks-refresh", daemon=True
            )
            self._expedited.start()

    def join(self, timeout: float | None = None) -> None:
        """Wait for an expedited refresh in progress, if any."""
        thread = self._expedited
        if thread is not None:
            thread.join(timeout)

    def close(self) -> None:
        """Stop the refresh timer."""
        self._stop.set()

    def refresh(self) -> None:
        """Fetch the keys again, retrying with backoff; skipped while another refresh runs."""
        if not self._refresh_lock.acquire(blocking=False):
            return
        try:
            self._refresh_with_retries()
        finally:
            self._refresh_lock.release()

    def _refresh_with_retries(self) -> None:
        backoff, waited, limit = self._retry_backoff_s, 0.0, self._retry_backoff_max_s
        while True:
            try:
                keys = self._fetch()
            except JwksError as exc:
                if waited >= limit or self._stop.is_set():
                    self.refreshes += 1
                    log.warning(kv("jwks_refresh_failed", url=self.url, error=str(exc)))
                    return
                delay = min(backoff, limit - waited)
                self._stop.wait(delay)  # this refresh thread's own pause between attempts
                waited += delay
                backoff *= 2
                continue
            self._keys = keys
            self.refreshes += 1
            log.info(kv("jwks_refreshed", url=self.url, keys=len(keys)))
            return

    def _fetch(self) -> dict[str, VerificationKey]:
        try:
            document = self._client.fetch_data()
            keys = parse_key_set(document)
        except (PyJWKClientError, ValueError) as exc:
            raise JwksError(f"cannot read the JWKS at {self.url}: {error_text(exc)}") from None
        if not keys:
            raise JwksError(f"the JWKS at {self.url} has no usable verification key")
        return keys


def _tick(cache_ref: weakref.ref[JwksCache], stop: threading.Event, interval_s: float) -> None:
    """Kafka's fixed-rate refresh: every ``interval_s`` while the cache is alive."""
    while not stop.wait(interval_s):
        cache = cache_ref()
        if cache is None:
            return
        cache.refresh()
        del cache  # hold it only while refreshing
