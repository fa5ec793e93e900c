"""The ordered stages of a gateway, indexed by API key for a cheap per-request lookup."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from quotagate.gateway.stage import Stage
from quotagate.protocol import api_table
from quotagate.protocol.api_support import VersionRange

_ROUTABLE_CACHE: Final = 1024


class StageChain:
    """Which stages see which API, and which API keys the gateway routes at all."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        self._stages = tuple(stages)
        self._by_key: dict[int, tuple[Stage, ...]] = {}
        # Per API key, indexed by how many stages saw the request: the stages to run on its
        # response, in order. Built with the request stages, so a response costs an index.
        self._responders: dict[int, tuple[tuple[Stage, ...], ...]] = {}
        self._upstream_keys: frozenset[int] = frozenset()
        self._routable: dict[int, bool] = {}  # is_routable's answers, until the upstream changes
        self.local_apis: dict[int, range] = {}
        for stage in self._stages:
            self.local_apis.update(stage.local_apis)

    @property
    def stages(self) -> tuple[Stage, ...]:
        return self._stages

    def learn_upstream(self, ranges: Iterable[VersionRange]) -> None:
        """Remember which API keys the upstream speaks (from an ApiVersions response)."""
        keys = frozenset(entry.api_key for entry in ranges)
        if keys != self._upstream_keys:
            self._upstream_keys = keys
            self._routable = {}

    def is_routable(self, api_key: int) -> bool:
        """Unknown keys (neither kio nor the upstream knows them) close the connection."""
        routable = self._routable.get(api_key)
        if routable is None:
            routable = (
                api_table.is_known_api(api_key)
                or api_key in self._upstream_keys
                or api_key in self.local_apis
            )
            if len(self._routable) < _ROUTABLE_CACHE:  # clients choose the keys they send
                self._routable[api_key] = routable
        return routable

    def request_stages(self, api_key: int) -> tuple[Stage, ...]:
        stages = self._by_key.get(api_key)
        if stages is None:
            stages = tuple(
                s for s in self._stages if s.request_keys is None or api_key in s.request_keys
            )
            self._by_key[api_key] = stages
            responders = [
                s for s in stages if s.response_keys is None or api_key in s.response_keys
            ]
            self._responders[api_key] = tuple(
                tuple(s for s in reversed(stages[:seen]) if s in responders)
                for seen in range(len(stages) + 1)
            )
        return stages

    def response_stages(self, api_key: int, seen: int) -> tuple[Stage, ...]:
        """Stages to run on a response, given that the first ``seen`` saw the request."""
        by_seen = self._responders.get(api_key)
        if by_seen is None:
            self.request_stages(api_key)
            by_seen = self._responders[api_key]
        return by_seen[seen]
