"""quotagate's OCI image (deploy/image/Containerfile, issue 35), run with podman the way the
Helm chart runs it: a non-root user, a read-only root filesystem, the config mounted as a
file, its id from the environment. The running container serves a client in front of the
suite's Kafka cluster and answers /readyz.

Building the image takes minutes (`make image`; var/image-build.json has the times), more
than `make test` can spend: this test runs when the image exists, and says so when not."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import image  # tools/, on the tests' path
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from quotagate.gateway.embedded import free_port, free_ports
from support.upstreams import Upstream

IMAGE = "localhost/quotagate:dev"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        shutil.which("podman") is None
        or subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0,
        reason=f"{IMAGE} is not built: `make image` builds it",
    ),
]


def _config(upstream: Upstream, listen: int, brokers: int, metrics: int) -> str:
    first = min(upstream.node_ids)
    count = max(upstream.node_ids) - first + 1
    return f"""
[gateway]
id = "${{env:POD_NAME}}"
[upstream]
"bootstrap.servers" = "{upstream.bootstrap}"
[[listeners]]
name = "PLAINTEXT"
listen = "127.0.0.1:{listen}"
"advertised.host" = "127.0.0.1"
"broker.port.start" = {brokers}
"broker.node.id.start" = {first}
"broker.port.count" = {count}
[metrics]
listen = "127.0.0.1:{metrics}"
[store]
path = "/var/lib/quotagate/quotagate.db"
[quotas]
"super.users" = ["User:ANONYMOUS"]
"""


def _readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def _podman(*args: str) -> subprocess.CompletedProcess[str]:
    """``podman args``; the runtime option (runc here) goes first, as ``args`` carry it."""
    return subprocess.run(["podman", *args], check=False, capture_output=True, text=True)


@pytest.fixture
def container(upstream_kafka: Upstream, tmp_path: Path) -> Iterator[tuple[str, int, int]]:
    listen, metrics = free_port(), free_port()
    brokers = free_ports(max(upstream_kafka.node_ids) - min(upstream_kafka.node_ids) + 1)
    config = tmp_path / "etc"
    config.mkdir()
    (config / "quotagate.toml").write_text(
        _config(upstream_kafka, listen, brokers, metrics), encoding="utf-8"
    )
    config.chmod(0o755)
    # The store and usage files on a volume, as a PersistentVolume would hold them (podman
    # 4.3's --tmpfs there left SQLite unable to open its file as the image's user).
    state = config.parent / "state"
    state.mkdir()
    state.chmod(0o777)
    name = f"quotagate-test-{uuid.uuid4().hex[:8]}"
    started = _podman(
        *image.podman()[1:], "run", "--detach", *image.limits(),
        "--name", name, "--network=host", "--read-only",
        "--tmpfs", "/tmp", "--volume", f"{state}:/var/lib/quotagate",
        "--cap-drop=all", "--security-opt=no-new-privileges",
        "--env", "POD_NAME=quotagate-0",
        "--volume", f"{config}:/etc/quotagate:ro",
        IMAGE,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    try:
        yield name, listen, metrics
    finally:
        logs = _podman("logs", name)
        print(logs.stdout[-3000:], logs.stderr[-3000:])
        _podman("rm", "--force", "--time", "5", name)


def test_the_image_serves_a_client_in_front_of_kafka(container: tuple[str, int, int]) -> None:
    name, listen, metrics = container
    deadline = time.monotonic() + 90
    while _readyz(metrics)[0] != 200:
        assert time.monotonic() < deadline, f"never ready: {_readyz(metrics)}"
        assert _podman("container", "exists", name).returncode == 0, "the container exited"
        time.sleep(0.5)
    assert _readyz(metrics) == (200, "ready\n")
    # Not root, and nothing written outside its volumes.
    assert _podman("exec", name, "id", "-u").stdout.strip() == "10001"
    assert _podman("exec", name, "touch", "/opt/quotagate/x").returncode != 0
    # The hot path is the compiled one.
    compiled = _podman("exec", name, "python", "-c", "import quotagate; print(quotagate.COMPILED)")
    assert compiled.stdout.strip() == "True", compiled.stderr
    bootstrap = f"127.0.0.1:{listen}"
    topic = f"image-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 3, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    errors: list[str] = []
    for partition in range(3):
        producer.produce(
            topic, b"from the image", partition=partition,
            on_delivery=lambda err, _m: errors.append(str(err)) if err else None,
        )  # fmt: skip
    assert producer.flush(60) == 0
    assert errors == []
