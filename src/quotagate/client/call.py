"""Running one admin call to completion, as ``KafkaAdminClient`` runs its ``Call`` objects:

* the call picks a node (the controller, or the least loaded node) and waits until it is
  ready (reconnect backoff, KIP-219 throttle) — waiting is not a try;
* a connection that cannot be set up sends the call back to pick a node again, paced by the
  reconnect backoff, without counting a try;
* a retriable failure after sending counts a try and waits ``backoff(tries++)`` (KIP-580,
  spec §7.3); NOT_CONTROLLER also forces a metadata refresh;
* the call fails when its deadline passes or ``retries`` is exhausted.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import Any, TypeVar

from quotagate.client.backoff_policy import CallBackoff
from quotagate.client.clock import Clock
from quotagate.client.cluster import Cluster
from quotagate.client.config import AdminConfig
from quotagate.client.errors import ConnectError, KafkaError, KafkaTimeoutError
from quotagate.client.network import NetworkClient
from quotagate.client.node import Node
from quotagate.client.requests import metadata_request
from quotagate.protocol import api_keys
from quotagate.protocol.errors import ErrorCode
from quotagate.quota.backoff import ExponentialBackoff

T = TypeVar("T")


class Target(enum.Enum):
    CONTROLLER = "controller"
    LEAST_LOADED = "least loaded node"


class CallRunner:
    def __init__(
        self,
        config: AdminConfig,
        network: NetworkClient,
        cluster: Cluster,
        clock: Clock,
        retry_backoff: ExponentialBackoff,
    ) -> None:
        self._config = config
        self._network = network
        self._cluster = cluster
        self._clock = clock
        self._retry_backoff = retry_backoff
        self._metadata_lock = asyncio.Lock()

    async def run(
        self,
        name: str,
        api_key: int,
        target: Target,
        build: Callable[[int], Any],
        handle: Callable[[Any, int], T],
        deadline_ms: float,
    ) -> T:
        """Send ``build(version)`` until ``handle(response, version)`` returns.

        ``handle`` raises a retriable :class:`KafkaError` for call-level errors that deserve
        another try (e.g. NOT_CONTROLLER) and a non-retriable one to fail the call.
        """
        backoff = CallBackoff(self._retry_backoff)
        while True:
            if self._clock() >= deadline_ms:
                reason = "the deadline passed before the call could be sent"
                raise KafkaTimeoutError(
                    f"Call(callName={name}) timed out after {backoff.tries} retried "
                    f"attempt(s): {reason}",
                    reason,
                )
            try:
                node = await self._node_for(target, deadline_ms)
                response, version = await self._network.send(node, api_key, build, deadline_ms)
                return handle(response, version)
            except KafkaTimeoutError as exc:
                raise self._timed_out(name, backoff.tries, exc) from exc
            except ConnectError as exc:
                # Nothing was sent: pick a node again, the reconnect backoff paces this.
                if target is Target.CONTROLLER:
                    self._cluster.stale = True
                if self._clock() >= deadline_ms:
                    raise self._timed_out(name, backoff.tries, exc) from exc
                continue
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                if exc.code == ErrorCode.NOT_CONTROLLER:
                    self._cluster.stale = True
                delay_ms = backoff.next_delay_ms()
                if backoff.tries > self._config.retries:
                    raise
                now = self._clock()
                if now + delay_ms >= deadline_ms:
                    await asyncio.sleep(max(deadline_ms - now, 0.0) / 1000)
                    raise self._timed_out(name, backoff.tries, exc) from exc
                await asyncio.sleep(delay_ms / 1000)

    async def refresh_metadata(self, deadline_ms: float) -> None:
        async with self._metadata_lock:
            if not self._cluster.stale:
                return  # another call refreshed it while we queued
            await self.run(
                "fetchMetadata",
                api_keys.METADATA,
                Target.LEAST_LOADED,
                metadata_request,
                lambda response, _version: self._cluster.update(response),
                deadline_ms,
            )

    async def _node_for(self, target: Target, deadline_ms: float) -> Node:
        if target is Target.LEAST_LOADED:
            return self._network.least_loaded(self._cluster.nodes())
        if self._cluster.stale:
            await self.refresh_metadata(deadline_ms)
        controller = self._cluster.controller()
        if controller is None:
            return self._network.least_loaded(self._cluster.nodes())
        return controller

    def _timed_out(self, name: str, tries: int, cause: KafkaError) -> KafkaTimeoutError:
        reason = cause.reason if isinstance(cause, KafkaTimeoutError) else cause.message
        return KafkaTimeoutError(
            f"Call(callName={name}) timed out after {tries} retried attempt(s): {reason}",
            reason,
        )
