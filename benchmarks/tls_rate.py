"""TLS on both sides: small requests per second and CPU per request, quotagate against haproxy.

    .venv/bin/python benchmarks/tls_rate.py [--upstream tansu|kafka] [--seconds 10] [--rounds 3]

A is "the broker's TLS port". With ``--upstream kafka`` it is Apache Kafka's own SSL listener
(one KRaft broker, benchmarks/upstreams.py). tansu speaks no TLS, so with ``--upstream tansu``
(the default) haproxy A terminates TLS in front of it and tansu advertises A. In front of A,
each in its own process:

* haproxy B, one thread, ``bind … ssl`` towards clients and ``server … ssl verify required``
  towards A: a bare relay with TLS on both sides;
* ``quotagate serve`` with an ``SSL`` listener and ``[upstream] security.protocol = "SSL"``
  (quotas for every client and usage events on, as in benchmarks/request_rate.py).

The small-request load is request_rate.py's (Produce v9, 215 B, acks=1, fixed address, so
metadata never sends a client around a relay), over TLS. Then 1 KiB messages are produced
with confluent-kafka over TLS, straight to A and through the gateway, in the same run (not
through haproxy B: metadata names A, so a client would leave B after its first request).
Certificates (a CA and one leaf for localhost and 127.0.0.1) are made with openssl; the
clients and both relays trust this CA and, in front of Kafka, the test cluster's CA beside it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import upstreams
from passthrough import configure_quotas
from quotagate.gateway.embedded import LOOPBACK, TansuBroker, free_port
from request_rate import TOPIC, _report, _round
from support.gateways import TANSU_NODE_ID
from support.kafka_cluster import kafka_cluster

MESSAGE = b"m" * 1024


@dataclass(frozen=True)
class TlsBroker:
    """The broker's TLS port (A), the CA that signed it, and its node id."""

    address: str
    ca: Path
    node_id: int
    description: str


@contextmanager
def _tls_broker(kind: str, workdir: Path, combined: Path, ca: Path) -> Iterator[TlsBroker]:
    if kind == "kafka":
        with kafka_cluster(workdir / "kafka", nodes=1, request_log=False) as cluster:
            [node_id] = cluster.nodes
            yield TlsBroker(
                cluster.bootstrap("SSL"),
                cluster.certificates.certificate,
                node_id,
                "Apache Kafka's own SSL listener (one KRaft broker)",
            )
        return
    a_port = free_port()
    with TansuBroker(advertised=f"{LOOPBACK}:{a_port}") as broker:
        haproxy = _haproxy(workdir, "a", a_port, f"ssl crt {combined}", broker.bootstrap)
        try:
            yield TlsBroker(
                f"{LOOPBACK}:{a_port}",
                ca,
                TANSU_NODE_ID,
                "haproxy A terminating TLS in front of tansu (the broker's TLS port)",
            )
        finally:
            haproxy.terminate()
            haproxy.wait(30)


def _bundle(workdir: Path, *cas: Path) -> Path:
    """One CA file every client and relay here trusts: ours, and the broker's where it differs."""
    bundle = workdir / "trusted.pem"
    bundle.write_bytes(b"".join(ca.read_bytes() for ca in dict.fromkeys(cas)))
    return bundle


def _certificates(workdir: Path) -> tuple[Path, Path, Path, Path]:
    """(CA, leaf certificate, leaf key, certificate + key in one file for haproxy)."""
    ca_key, ca = workdir / "ca.key", workdir / "ca.pem"
    key, csr, cert = workdir / "leaf.key", workdir / "leaf.csr", workdir / "leaf.pem"
    ext = workdir / "leaf.ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    openssl("req", "-x509", *ec, "-days", "1", "-subj", "/CN=bench CA",
            "-keyout", str(ca_key), "-out", str(ca))  # fmt: skip
    openssl("req", *ec, "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(csr))
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
            "-CAcreateserial", "-days", "1", "-extfile", str(ext), "-out", str(cert))  # fmt: skip
    combined = workdir / "leaf.combined.pem"
    combined.write_bytes(cert.read_bytes() + key.read_bytes())
    return ca, cert, key, combined


def _haproxy(
    workdir: Path, name: str, port: int, listen: str, server: str
) -> subprocess.Popen[bytes]:
    config = workdir / f"haproxy-{name}.cfg"
    config.write_text(
        "global\n  maxconn 4096\n  nbthread 1\ndefaults\n  mode tcp\n  timeout connect 5s\n"
        f"  timeout client 60s\n  timeout server 60s\nlisten {name}\n"
        f"  bind {LOOPBACK}:{port} {listen}\n  server broker {server}\n",
        encoding="utf-8",
    )
    process = subprocess.Popen(["haproxy", "-f", str(config)], stdout=subprocess.DEVNULL)
    time.sleep(1.0)
    return process


def _gateway(
    workdir: Path, upstream: str, node_id: int, ca: Path, cert: Path, key: Path, store: Path
) -> tuple[str, subprocess.Popen[bytes]]:
    port = free_port()
    config = workdir / "gateway.toml"
    config.write_text(
        f'[upstream]\nbootstrap.servers = "{upstream}"\nsecurity.protocol = "SSL"\n'
        f'ssl.ca.location = "{ca}"\n'
        f'[[listeners]]\nname = "SSL"\nlisten = "{LOOPBACK}:{port}"\n'
        'security.protocol = "SSL"\n'
        f'ssl.certificate.location = "{cert}"\nssl.key.location = "{key}"\n'
        f"broker.port.start = {free_port()}\nbroker.node.id.start = {node_id}\n"
        "broker.port.count = 1\n"
        f'[log]\nlevel = "WARNING"\n[store]\npath = "{store}"\n'
        f'[usage]\npath = "{workdir / "usage"}"\n',
        encoding="utf-8",
    )
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "quotagate"), "serve", "--config", str(config)],
        stdout=subprocess.DEVNULL,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    bootstrap = f"{LOOPBACK}:{port}"
    admin = AdminClient({**_tls(bootstrap, ca), "log_level": 0})
    deadline = time.monotonic() + 60
    while True:
        try:
            if admin.list_topics(timeout=2).brokers:
                return bootstrap, process
        except Exception:  # not listening yet: confluent-kafka raises KafkaException
            if time.monotonic() > deadline:
                process.kill()
                raise
        time.sleep(0.2)


def _tls(bootstrap: str, ca: Path) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(ca)}


def _produce_mb_s(bootstrap: str, ca: Path, messages: int) -> float:
    producer = Producer({**_tls(bootstrap, ca), "linger.ms": 5, "acks": 1})
    producer.produce(TOPIC, MESSAGE)
    producer.flush(30)
    started = time.monotonic()
    for _ in range(messages):
        while True:
            try:
                producer.produce(TOPIC, MESSAGE)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(60):
        raise RuntimeError("undelivered messages")
    return messages * len(MESSAGE) / (time.monotonic() - started) / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--messages", type=int, default=20_000)
    upstreams.add_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        our_ca, cert, key, combined = _certificates(workdir)
        with _tls_broker(args.upstream, workdir, combined, our_ca) as broker:
            ca = _bundle(workdir, our_ca, broker.ca)
            a = broker.address
            admin = AdminClient(_tls(a, ca))
            for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
                future.result(30)
            b_port = free_port()
            b = _haproxy(
                workdir, "b", b_port, f"ssl crt {combined}", f"{a} ssl verify required ca-file {ca}"
            )
            processes = [b]
            try:
                store = workdir / "quotas.db"
                configure_quotas(store)
                gateway, gateway_process = _gateway(
                    workdir, a, broker.node_id, ca, cert, key, store
                )
                processes.append(gateway_process)
                targets = {
                    "direct broker": (a, None),
                    "haproxy, TLS both sides (one thread)": (f"{LOOPBACK}:{b_port}", b.pid),
                    "quotagate, TLS both sides, quotas and usage on": (
                        gateway,
                        gateway_process.pid,
                    ),
                }
                figures: dict[str, tuple[list[float], list[float]]] = {n: ([], []) for n in targets}
                throughput: dict[str, list[float]] = {"direct broker": [], "quotagate": []}
                for number in range(args.rounds):
                    for name, (target, pid) in targets.items():
                        rate, cpu_us = _round(target, args, pid, str(ca))
                        figures[name][0].append(rate)
                        figures[name][1].append(cpu_us)
                        print(f"round {number + 1} {name}: {rate:,.0f} req/s", file=sys.stderr)
                    throughput["direct broker"].append(_produce_mb_s(a, ca, args.messages))
                    throughput["quotagate"].append(_produce_mb_s(gateway, ca, args.messages))
            finally:
                for process in processes:
                    process.terminate()
                    process.wait(30)
    print(f"direct broker = {broker.description}")
    _report(figures, args)
    direct = statistics.median(throughput["direct broker"])
    gateway_mb_s = statistics.median(throughput["quotagate"])
    print(
        f"\n1 KiB produce over TLS, {args.messages} messages, medians of {args.rounds}: "
        f"direct {direct:.1f} MB/s, quotagate {gateway_mb_s:.1f} MB/s "
        f"({gateway_mb_s / direct:.2f} × direct); per round: "
        + ", ".join(f"{d:.1f}/{g:.1f}" for d, g in zip(*throughput.values(), strict=True))
    )


if __name__ == "__main__":
    main()
