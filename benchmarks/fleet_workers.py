"""One instance with 1 and with 2 workers, and the broker straight, side by side in one run.

    python benchmarks/fleet_workers.py [--seconds 8] [--connections 8]

For each target (tansu direct, ``quotagate serve --workers 1``, ``--workers 2``; both on the
upstream-backed store with the fleet exchange on, a produce quota configured far above what
the run reaches):

* small requests: ``--connections`` confluent-kafka producers, each sending every 100-byte
  record as its own Produce request (acks=1, linger 0), for ``--seconds``: requests/s;
* produce MB/s: the same producers with 1 KiB records batched (linger 5 ms);
* CPU per request: user + system time of every gateway process (supervisor and workers,
  from /proc) over the small-request run, divided by the requests it carried.

The load generator shares the machine's cores with the gateway: on a 2-core machine the
second worker competes with the client for the second core, so the ratios here understate
what a second worker brings on a machine with cores to spare.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from quotagate.gateway.embedded import TansuBroker
from support.instances import Instance

TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(root: int) -> float:
    """User + system seconds of ``root`` and every process below it."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(entry), int(fields[1])
        if pid == root or _descends(ppid, root):
            total += (int(fields[11]) + int(fields[12])) / TICKS_PER_S
    return total


def _descends(pid: int, root: int) -> bool:
    for _ in range(4):
        if pid == root:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
    return False


def _load(bootstrap: str, connections: int, seconds: float, size: int, batched: bool) -> int:
    """Records acknowledged by ``connections`` producers in ``seconds``."""
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, connections, 1)]).values():
        future.result(30)
    acked = [0] * connections
    settings = (
        {"linger.ms": 5, "batch.size": 1_000_000}
        if batched
        else {
            "linger.ms": 0,
            "batch.num.messages": 1,
            "max.in.flight": 8,
            # A short local queue: what is measured is what the target carries, not a backlog.
            "queue.buffering.max.messages": 256,
        }
    )

    def run(index: int) -> None:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": 1, "client.id": "bench", **settings}
        )
        payload = os.urandom(size)

        def delivered(error: object, _message: object) -> None:
            if error is None:
                acked[index] += 1

        producer.produce(topic, payload, partition=index)
        producer.flush(30)
        acked[index] = 0
        stop = time.monotonic() + seconds
        while time.monotonic() < stop:
            try:
                producer.produce(topic, payload, partition=index, on_delivery=delivered)
            except BufferError:
                producer.poll(0.001)
            producer.poll(0)
        producer.flush(60)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(acked)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--connections", type=int, default=8)
    args = parser.parse_args()
    rows = []
    with TansuBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        targets: list[tuple[str, str, int | None]] = [("direct", broker.bootstrap, None)]
        instances = []
        for workers in (1, 2):
            instance = Instance(
                Path(tmp) / f"w{workers}", broker.bootstrap, workers, True, quota=1e12
            )
            instances.append(instance)
            targets.append((f"{workers} worker(s)", instance.bootstrap, instance.process.pid))
        try:
            for name, bootstrap, pid in targets:
                cpu_before = _tree_cpu_s(pid) if pid else 0.0
                small = _load(bootstrap, args.connections, args.seconds, 100, batched=False)
                cpu = (_tree_cpu_s(pid) - cpu_before) if pid else float("nan")
                batched = _load(bootstrap, args.connections, args.seconds, 1024, batched=True)
                rows.append(
                    (
                        name,
                        small / args.seconds,
                        cpu / small * 1e6 if pid else float("nan"),
                        batched * 1024 / args.seconds / 1e6,
                    )
                )
        finally:
            for instance in instances:
                instance.stop()
    direct_rate, direct_mb = rows[0][1], rows[0][3]
    print(f"{os.cpu_count()} cores; {args.connections} connections; {args.seconds:.0f} s each")
    print(
        "| target | small requests/s | vs direct | gateway CPU µs/request "
        "| produce MB/s | vs direct |"
    )
    print("|---|---|---|---|---|---|")
    for name, rate, cpu_us, mb in rows:
        cpu_text = "—" if math.isnan(cpu_us) else f"{cpu_us:.0f}"
        print(
            f"| {name} | {rate:,.0f} | {rate / direct_rate:.2f} | {cpu_text} "
            f"| {mb:.1f} | {mb / direct_mb:.2f} |"
        )


if __name__ == "__main__":
    main()
