"""Start-up discovery: ask the upstream which brokers and API versions it has.

Broker ports are also opened lazily by address rewriting; discovering them at start-up means
a client that kept metadata across a gateway restart finds its broker ports open again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from quotagate.gateway.stages.chain import StageChain
from quotagate.gateway.upstream.channel import (
    ControlChannel,
    build_request,
    connect_error_text,
    is_security_failure,
)
from quotagate.gateway.upstream.link import UpstreamHealth
from quotagate.gateway.upstream.security import PLAINTEXT_UPSTREAM, UpstreamSecurity
from quotagate.logs import kv
from quotagate.protocol import api_keys, api_support
from quotagate.protocol.host_port import HostPort

log = logging.getLogger(__name__)

BrokerSink = Callable[[int, str, int], object]
_TIMEOUT_S = 10.0


async def discover(
    bootstrap: tuple[HostPort, ...],
    health: UpstreamHealth,
    chain: StageChain,
    sinks: Iterable[BrokerSink],
    security: UpstreamSecurity = PLAINTEXT_UPSTREAM,
) -> None:
    """Retry with backoff until one discovery round succeeds.

    A TLS or SASL failure is logged at ERROR on every attempt: it will not heal by waiting,
    and someone has to fix a certificate or a password.
    """
    loop = asyncio.get_running_loop()
    attempt = 0
    while True:
        address = bootstrap[attempt % len(bootstrap)]
        attempt += 1
        await asyncio.sleep(health.wait_s(address, loop.time()))
        try:
            await _discover_once(address, chain, list(sinks), security)
        except (OSError, TimeoutError, ConnectionError) as exc:
            delay = health.failed(address, loop.time())
            log.log(
                logging.ERROR if is_security_failure(exc) else logging.WARNING,
                kv(
                    "upstream_discovery_failed",
                    upstream=address,
                    security=security.describe(),
                    attempt=attempt,
                    retry_in_ms=round(delay * 1000),
                    error=connect_error_text(exc),
                ),
            )
            continue
        health.succeeded(address)
        return


async def _discover_once(
    address: HostPort, chain: StageChain, sinks: list[BrokerSink], security: UpstreamSecurity
) -> None:
    channel = await ControlChannel.open(address, _TIMEOUT_S, security)
    try:
        versions = await channel.request(build_request(api_keys.API_VERSIONS, 0), _TIMEOUT_S)
        ranges = api_support.advertised_ranges(versions)
        chain.learn_upstream(ranges)
        metadata_version = api_support.best_version(api_keys.METADATA, ranges)
        metadata = await channel.request(
            build_request(
                api_keys.METADATA,
                metadata_version,
                topics=(),
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            ),
            _TIMEOUT_S,
        )
    finally:
        channel.close()
    for broker in metadata.brokers:
        for sink in sinks:
            sink(int(broker.node_id), broker.host, int(broker.port))
    log.info(
        kv(
            "upstream_discovered",
            upstream=address,
            brokers=",".join(f"{b.node_id}@{b.host}:{b.port}" for b in metadata.brokers),
        )
    )
