"""The PROXY protocol parser (issue 35) on hostile bytes: it raises nothing but a
``ProxyHeaderError``, asks for no byte past a header's end, and never waits for more than
the largest header it accepts (what a peer declares is never allocated)."""

from __future__ import annotations

import ipaddress
import struct

from hypothesis import strategies as st

from fuzz.budget import Budget, run_examples
from quotagate.protocol.proxy_protocol import (
    V1_MAX,
    V2_FIXED,
    V2_MAX_PAYLOAD,
    V2_SIGNATURE,
    ProxyHeader,
    ProxyHeaderError,
    parse,
    v1_header,
    v2_header,
)

_LONGEST = V2_FIXED + V2_MAX_PAYLOAD


def _ipv4() -> st.SearchStrategy[str]:
    return st.integers(0, 2**32 - 1).map(lambda n: str(ipaddress.IPv4Address(n)))


def _ipv6() -> st.SearchStrategy[str]:
    return st.integers(0, 2**128 - 1).map(lambda n: str(ipaddress.IPv6Address(n)))


def _header(data: st.DataObject) -> bytes:
    ip = data.draw(st.sampled_from([_ipv4(), _ipv6()]))
    source = (data.draw(ip), data.draw(st.integers(0, 65535)))
    destination = (data.draw(ip), data.draw(st.integers(0, 65535)))
    if data.draw(st.booleans()):
        return v1_header(source, destination)
    return v2_header(source, destination, data.draw(st.binary(max_size=64)))


def _feed(stream: bytes) -> ProxyHeader | ProxyHeaderError | None:
    """Read as the gateway does, only the bytes asked for; None: the stream ran out first."""
    data = b""
    while True:
        try:
            result = parse(data)
        except ProxyHeaderError as exc:
            return exc
        if isinstance(result, ProxyHeader):
            assert result.length == len(data)
            return result
        assert 1 <= result <= _LONGEST - len(data), "waits for more than any accepted header"
        if len(data) + result > len(stream):
            return None
        data += stream[len(data) : len(data) + result]


def test_random_bytes_never_raise_anything_but_a_header_error(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        prefix = data.draw(st.sampled_from([b"", b"PROXY ", V2_SIGNATURE, b"PROXY TCP4 "]))
        _feed(prefix + data.draw(st.binary(max_size=300)))

    run_examples(body, budget.lie_frames * 8, budget, "lies")


def test_valid_headers_cut_or_followed_by_anything(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        header = _header(data)
        tail = data.draw(st.binary(max_size=40))
        parsed = _feed(header + tail)
        assert isinstance(parsed, ProxyHeader) and parsed.length == len(header)
        cut = data.draw(st.integers(0, len(header) - 1))
        assert _feed(header[:cut]) is None  # a prefix only ever asks for more

    run_examples(body, budget.lie_frames * 8, budget, "lies")


def test_every_byte_of_a_header_changed(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        header = bytearray(_header(data))
        at = data.draw(st.integers(0, len(header) - 1))
        header[at] = data.draw(st.integers(0, 255))
        result = _feed(bytes(header) + bytes(8))
        if isinstance(result, ProxyHeader):
            assert result.length <= max(V1_MAX, len(header))

    run_examples(body, budget.lie_frames * 8, budget, "lies")


def test_v2_length_lies(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        declared = data.draw(st.integers(0, 65535))
        family = data.draw(st.sampled_from([0x00, 0x11, 0x21, 0x31, 0x12]))
        body_bytes = data.draw(st.binary(max_size=300))
        stream = V2_SIGNATURE + struct.pack(">BBH", 0x21, family, declared) + body_bytes
        result = _feed(stream)
        if declared > V2_MAX_PAYLOAD:
            assert isinstance(result, ProxyHeaderError)
        elif isinstance(result, ProxyHeader):
            assert result.length == V2_FIXED + declared

    run_examples(body, budget.lie_frames * 8, budget, "lies")
