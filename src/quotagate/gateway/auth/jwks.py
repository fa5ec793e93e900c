"""The verification keys of a JWKS endpoint (``sasl.oauthbearer.jwks.endpoint.url``), kept fresh.

As Kafka's ``RefreshingHttpsJwks``: the keys are fetched once at start (a failure stops the
gateway from starting, loudly), then again every ``sasl.oauthbearer.jwks.endpoint.refresh.ms``,
and at once when a token names a key id the set does not have (at most once a minute per key
id, so unknown ids cannot make the gateway hammer the endpoint). A refresh runs in a thread of
its own, never on the event loop; a failed one is retried with backoff (100 ms doubling, for
up to 10 s, Kafka's defaults) and otherwise keeps the keys it had.

The time is passed in (``time.monotonic()`` seconds), so when a refresh is due is decided
without reading a clock here.
"""

from __future__ import annotations

import logging
import threading
import time
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
        self._due = 0.0
        self._lock = threading.Lock()
        self._refreshing: threading.Thread | None = None
        self._missing: OrderedDict[str, float] = OrderedDict()
        self.refreshes = 0
        """Completed fetches, failed or not (for the tests and the log)."""

    def load(self, now: float) -> None:
        """The first fetch, in the caller's thread; raises :class:`JwksError`."""
        self._keys = self._fetch()
        self._due = now + self._refresh_s
        log.info(kv("jwks_loaded", url=self.url, keys=len(self._keys)))

    def keys(self, now: float) -> Mapping[str, VerificationKey]:
        """The keys now; starts a refresh in the background when one is due."""
        if now >= self._due:
            self._start_refresh(now)
        return self._keys

    def missing(self, key_id: str | None, now: float) -> None:
        """A token named a key the set lacks: refresh soon, once per key id per minute."""
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
        self._start_refresh(now)

    def join(self, timeout: float | None = None) -> None:
        """Wait for a refresh in progress, if any."""
        thread = self._refreshing
        if thread is not None:
            thread.join(timeout)

    def _start_refresh(self, now: float) -> None:
        with self._lock:
            if self._refreshing is not None and self._refreshing.is_alive():
                return
            # The next scheduled refresh counts from this one, failed or not (as Kafka's
            # fixed-rate schedule does).
            self._due = now + self._refresh_s
            self._refreshing = threading.Thread(
                target=self._refresh, name="jwks-refresh", daemon=True
            )
            self._refreshing.start()

    def _refresh(self) -> None:
        backoff, waited, limit = self._retry_backoff_s, 0.0, self._retry_backoff_max_s
        while True:
            try:
                keys = self._fetch()
            except JwksError as exc:
                if waited >= limit:
                    self.refreshes += 1
                    log.warning(kv("jwks_refresh_failed", url=self.url, error=str(exc)))
                    return
                delay = min(backoff, limit - waited)
                time.sleep(delay)  # this thread's own wait, between attempts
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
