"""An AlterClientQuotas acknowledged by one instance is described, and so enforced, by
another instance of the fleet (two ``quotagate serve`` processes, one store topic on the
upstream: tansu, then Kafka)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from support.instances import Instance, propagation_ms
from support.upstreams import Upstream

pytestmark = pytest.mark.integration


def test_a_quota_altered_through_one_instance_is_described_by_another(
    upstream: Upstream, tmp_path: Path
) -> None:
    topic = f"_quotagate.test-{uuid.uuid4().hex[:8]}.config"
    first = Instance(tmp_path / "a", upstream, 1, True, 1e6, store_topic=topic)
    second = Instance(tmp_path / "b", upstream, 2, True, 1e6, store_topic=topic)
    try:
        delays = [propagation_ms(first.bootstrap, second.bootstrap, 2e6 + i) for i in range(5)]
        delays += [propagation_ms(second.bootstrap, first.bootstrap, 3e6 + i) for i in range(5)]
    finally:
        first.stop()
        second.stop()
    # Measured p99 is tens of milliseconds (BENCHMARKS.md); 1 s leaves room for a loaded CI.
    assert max(delays) < 1000, delays
