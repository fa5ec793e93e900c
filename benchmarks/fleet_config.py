"""How fast a quota change made through one instance reaches another.

    python benchmarks/fleet_config.py [--changes 100]

Two ``quotagate serve`` instances (one and two workers) on one upstream and one store topic.
Each change is an AlterClientQuotas through one instance, alternating; the clock starts when
the gateway acknowledges it and stops when DescribeClientQuotas through the other answers the
new value (polled every 5 ms, so figures carry up to 5 ms of polling). What Describe answers
is the runtime's own table, the one the quota managers were just configured from: described
is enforced.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from quotagate.gateway.embedded import TansuBroker
from support.instances import Instance, propagation_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--changes", type=int, default=100)
    args = parser.parse_args()
    topic = f"_quotagate.bench-{uuid.uuid4().hex[:8]}.config"
    with TansuBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        first = Instance(Path(tmp) / "a", broker.bootstrap, 1, True, 1e6, store_topic=topic)
        second = Instance(Path(tmp) / "b", broker.bootstrap, 2, True, 1e6, store_topic=topic)
        try:
            delays = []
            for i in range(args.changes):
                writer, reader = (first, second) if i % 2 == 0 else (second, first)
                delays.append(propagation_ms(writer.bootstrap, reader.bootstrap, 1e6 + i + 1))
        finally:
            first.stop()
            second.stop()
    delays.sort()
    p99 = delays[min(len(delays) - 1, len(delays) * 99 // 100)]
    print(
        f"{len(delays)} changes: p50 {statistics.median(delays):.1f} ms, p99 {p99:.1f} ms, "
        f"max {delays[-1]:.1f} ms"
    )


if __name__ == "__main__":
    main()
