"""What the per-request caches of the I/O runtime must not change: answers stay those of the
uncached computation, also after what they were computed from changes."""

from __future__ import annotations

import gc

from quotagate.gateway.heap import freeze_startup_heap
from quotagate.gateway.stages.chain import StageChain
from quotagate.gateway.stages.exchange import ConnectionInfo
from quotagate.protocol.api_support import VersionRange


def _info(host: str, port: int) -> ConnectionInfo:
    return ConnectionInfo(
        connection_id=1,
        listener="PLAINTEXT",
        security_protocol="PLAINTEXT",
        client_host=host,
        client_port=port,
        principal=None,
    )


def test_client_address_follows_the_host_and_port() -> None:
    info = _info("", 0)
    assert info.client_address == ":0"
    info.client_host, info.client_port = "127.0.0.1", 5555
    assert info.client_address == "127.0.0.1:5555"
    info.client_port = 5556
    assert info.client_address == "127.0.0.1:5556"
    info.client_host = "::1"
    assert info.client_address == "[::1]:5556"


def test_cached_address_is_not_part_of_equality_or_repr() -> None:
    first, second = _info("127.0.0.1", 1), _info("127.0.0.1", 1)
    assert first.client_address == "127.0.0.1:1"
    assert first == second
    assert repr(first) == repr(second)


def test_an_api_key_becomes_routable_when_the_upstream_learns_it() -> None:
    chain = StageChain([])
    unknown = 30_000  # neither kio nor any stage knows it
    assert not chain.is_routable(unknown)
    chain.learn_upstream([VersionRange(unknown, 0, 1)])
    assert chain.is_routable(unknown)
    chain.learn_upstream([])
    assert not chain.is_routable(unknown)


def test_freezing_the_startup_heap_exempts_what_exists() -> None:
    try:
        freeze_startup_heap()
        assert gc.get_freeze_count() > 0
        assert gc.isenabled()
    finally:
        gc.unfreeze()
