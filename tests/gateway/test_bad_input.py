"""Malformed input on the wire closes only the offending connection, with a log line, while
another client keeps producing through the same gateway."""

from __future__ import annotations

import logging
import random
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import generate_latest

from quotagate.gateway.embedded.background import BackgroundGateway
from support.producers import SteadyProducer

pytestmark = pytest.mark.integration


@pytest.fixture
def steady(gateway: BackgroundGateway, wait_for: Any) -> Iterator[SteadyProducer]:
    with SteadyProducer(str(gateway.bootstrap)) as producer:
        wait_for(lambda: producer.acked > 0, 30, "the steady producer to get going")
        yield producer


def _send_and_expect_close(
    gateway: BackgroundGateway, payload: bytes, *, half_close: bool = False
) -> None:
    address = gateway.bootstrap
    with socket.create_connection((address.host, address.port), timeout=30) as sock:
        sock.sendall(payload)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        try:
            while sock.recv(65536):
                pass  # the gateway may answer something before closing; keep reading
        except ConnectionResetError:
            pass  # a reset is a close too


def _request(api_key: int, client_id_length: int, client_id: bytes, body: bytes = b"") -> bytes:
    header = struct.pack(">hhih", api_key, 0, 1, client_id_length) + client_id
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


CASES = {
    "truncated frame": (struct.pack(">i", 100) + b"x" * 10, True, "truncated_frame"),
    "frame over socket.request.max.bytes": (struct.pack(">i", 104_857_601), False, "bad_frame"),
    "negative frame size": (struct.pack(">i", -5), False, "bad_frame"),
    "unknown api key": (_request(999, 3, b"abc"), False, "unknown api key 999"),
    "header lies about its size": (_request(3, 500, b"short"), False, "bad_header"),
    "frame shorter than a header": (struct.pack(">i", 3) + b"abc", False, "bad_header"),
    # CreateTopics v0 (removed in Kafka 4.0, walked by hand) claiming 2^30 topics: forwarded,
    # it would make tansu allocate for them.
    "removed version lies about a count": (
        _request(19, 3, b"abc", struct.pack(">i", 1 << 30) + b"\0" * 8),
        False,
        "bad_body",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_closes_only_that_connection(
    case: str,
    gateway: BackgroundGateway,
    steady: SteadyProducer,
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    payload, half_close, logged = CASES[case]
    caplog.set_level(logging.INFO, logger="quotagate")
    acked_before = steady.acked
    _send_and_expect_close(gateway, payload, half_close=half_close)
    wait_for(lambda: logged in caplog.text, 10, f"a log line mentioning {logged!r}")
    wait_for(lambda: steady.acked > acked_before + 20, 30, "the other producer to keep going")
    assert not steady.errors


def test_random_garbage(
    gateway: BackgroundGateway,
    steady: SteadyProducer,
    caplog: pytest.LogCaptureFixture,
    wait_for: Any,
) -> None:
    caplog.set_level(logging.INFO, logger="quotagate")
    rng = random.Random(3)
    for _ in range(20):
        acked_before = steady.acked
        garbage = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4096)))
        _send_and_expect_close(gateway, garbage, half_close=True)
        wait_for(lambda n=acked_before: steady.acked > n, 30, "the other producer to keep going")
    assert "event=protocol_error" in caplog.text
    assert not steady.errors


def test_unknown_api_keys_add_no_metric_labels(gateway: BackgroundGateway) -> None:
    for key in (4242, 4243):
        _send_and_expect_close(gateway, _request(key, 3, b"abc"))
    text = generate_latest(gateway.gateway.metrics.registry).decode()
    assert "unknown_4242" not in text and "unknown_4243" not in text
