"""Ports picked for the suite's gateways and brokers: below the kernel's ephemeral range, where
no client connection can take one before its listener opens it, and never handed out twice."""

from __future__ import annotations

import socket

from quotagate.gateway.embedded import free_port, free_ports
from quotagate.gateway.embedded.broker import _ephemeral_low


def test_ports_are_below_the_ephemeral_range_free_and_handed_out_once() -> None:
    seen: set[int] = set()
    for _ in range(50):
        start = free_ports(3)
        ports = set(range(start, start + 3))
        assert max(ports) < _ephemeral_low()
        assert seen.isdisjoint(ports)
        seen |= ports
        single = free_port()
        assert single not in seen
        seen.add(single)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))  # free when handed out
