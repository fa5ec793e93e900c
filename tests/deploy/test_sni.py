"""SNI routing (issue 35): one TLS port serves the bootstrap and all three Kafka brokers, each
connection sent to the broker its TLS server name names. The client resolves the advertised
names through a hosts file the test mounts over /etc/hosts in a mount namespace of its own
(the test runs as root; elsewhere it is skipped)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from quotagate.gateway.config import ConfigError
from quotagate.gateway.embedded.background import BackgroundGateway
from quotagate.protocol.sni_names import SniPattern, SniPatternError
from support.certificates import CertificateAuthority
from support.gateways import gateway_config
from support.upstreams import Upstream

PATTERN = "broker-$(nodeId).kafka.test"


def test_the_pattern_names_brokers_and_reads_them_back() -> None:
    pattern = SniPattern(PATTERN)
    assert pattern.host(3) == "broker-3.kafka.test"
    assert pattern.node_id("BROKER-3.Kafka.Test.") == 3
    for name in (
        "bootstrap.kafka.test",
        "broker-.kafka.test",
        "broker-03.kafka.test",
        "broker-x.kafka.test",
        "broker-99999999999.kafka.test",
        "broker-3.kafka.tes",
    ):
        assert pattern.node_id(name) is None, name
    for bad in ("kafka.example.com", "b-$(nodeId)-$(nodeId).x", "b_$(nodeId).x", "$(nodeId)"):
        with pytest.raises(SniPatternError):
            SniPattern(bad)


def test_sni_needs_tls_and_a_pattern() -> None:
    with pytest.raises(ConfigError, match=re.escape('needs security.protocol = "SSL"')):
        gateway_config("127.0.0.1:9", listener={"sni_host_pattern": PATTERN})
    with pytest.raises(ConfigError, match=re.escape("exactly once")):
        gateway_config(
            "127.0.0.1:9",
            security_protocol="SSL",
            listener={
                "sni_host_pattern": "kafka.test",
                "ssl_certificate_location": "c",
                "ssl_key_location": "k",
            },
        )


def _in_namespace_with_hosts(hosts: Path, command: list[str]) -> list[str]:
    script = 'mount --bind "$0" /etc/hosts && exec "$@"'
    return ["unshare", "--mount", "sh", "-c", script, str(hosts), *command]


@pytest.mark.integration
@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
def test_one_sni_port_reaches_every_kafka_broker(
    upstream_kafka: Upstream,
    start_gateway: Callable[..., BackgroundGateway],
    tmp_path: Path,
) -> None:
    authority = CertificateAuthority(tmp_path)
    leaf = authority.issue("kafka.test", dns=("bootstrap.kafka.test", "*.kafka.test"))
    gateway = start_gateway(
        upstream_kafka,
        security_protocol="SSL",
        listener=leaf.listener_fields(sni_host_pattern=PATTERN),
    )
    port = gateway.bootstrap.port
    pattern = SniPattern(PATTERN)
    names = ["bootstrap.kafka.test", *(pattern.host(n) for n in upstream_kafka.node_ids)]
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"127.0.0.1 {n}\n" for n in names))
    nodes = len(upstream_kafka.node_ids)
    client = [
        sys.executable,
        str(Path(__file__).with_name("sni_client.py")),
        f"bootstrap.kafka.test:{port}",
        str(authority.certificate),
        f"sni-{uuid.uuid4().hex[:8]}",
        str(nodes),
    ]
    done = subprocess.run(
        _in_namespace_with_hosts(hosts, client),
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    # Every broker advertised under its own name, all on the one port.
    assert seen["brokers"] == {str(n): f"{pattern.host(n)}:{port}" for n in upstream_kafka.node_ids}
    # A partition led by each broker, and a record produced to each: every broker reached
    # through the one port (a connection sent to the wrong broker is refused as not leader).
    assert seen["leaders"] == sorted(upstream_kafka.node_ids)
    assert seen["undelivered"] == 0 and seen["errors"] == []
    # Nothing else listens: no port per broker was opened.
    assert gateway.gateway.listeners["SSL"]._node_ports == {}
