"""Fetching the exposition texts: the only I/O of ``quotagate top``."""

from __future__ import annotations

import http.client
import socket
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from quotagate.top.model import Scrape


def scrape(url: str, timeout_s: float) -> Scrape:
    """One endpoint; an unreachable one gives a sentence, never an exception."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return Scrape(url, response.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as exc:
        return Scrape(url, None, f"HTTP {exc.code} {exc.reason}")
    except urllib.error.URLError as exc:
        return Scrape(url, None, _reason(exc.reason))
    except TimeoutError:
        return Scrape(url, None, f"no answer within {timeout_s:g} s")
    except (OSError, http.client.HTTPException, ValueError) as exc:
        return Scrape(url, None, _reason(exc))


def scrape_all(pool: ThreadPoolExecutor, urls: Sequence[str], timeout_s: float) -> list[Scrape]:
    """Every endpoint at once, so one slow instance costs one timeout, not one each."""
    return list(pool.map(lambda url: scrape(url, timeout_s), urls))


def _reason(reason: object) -> str:
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the gateway running, with [metrics] listen set?)"
    if isinstance(reason, socket.gaierror):
        return f"unknown host ({reason.strerror})"
    if isinstance(reason, TimeoutError):
        return "no answer in time"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason) or type(reason).__name__
