"""A real Apache Kafka cluster on loopback: KRaft nodes started from Kafka's own jars.

Three nodes by default, each broker and controller at once (three voters, so one node
killed leaves a quorum), formatted with Kafka's ``kafka.tools.StorageTool`` and run with
``kafka.Kafka``, with the jars of ``java/kafka/pom.xml`` (``tools/jars.py``). Every node has
four listeners:

* ``PLAINTEXT``, also the inter-broker listener;
* ``SSL``, client certificates requested (``ssl.client.auth=requested``);
* ``SASL_SSL`` with PLAIN (users in the JAAS config), SCRAM-SHA-512 (users created through
  Kafka's admin API, ``AlterUserScramCredentials``) and OAUTHBEARER validated by Kafka's own
  ``OAuthBearerValidatorCallbackHandler`` against the JWKS of an identity provider the test
  serves;
* ``REAUTH``, SASL_SSL again (PLAIN and SCRAM-SHA-512) with ``connections.max.reauth.ms`` of
  ``REAUTH_MS``: a client must re-authenticate (KIP-368) or is disconnected;
* ``CONTROLLER``, for the quorum only.

``kafka.request.logger`` writes at DEBUG into each node's ``request.log`` (what a broker's
request log is, for the pipeline), the rest of the broker's log into ``server.log``.
"""

from __future__ import annotations

import base64
import ctypes
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

import jars
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from quotagate.gateway.embedded import LOOPBACK, free_port
from quotagate.gateway.embedded.process import terminate, wait_until_accepting
from support.certificates import CertificateAuthority, Leaf
from support.oauth import AUDIENCE, ISSUER, IdentityProvider

LISTENERS: Final = ("PLAINTEXT", "SSL", "SASL_SSL", "REAUTH", "CONTROLLER")
REAUTH_MS: Final = 10_000
"""``connections.max.reauth.ms`` of the REAUTH listener (KIP-368)."""
PLAIN_USERS: Final = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
"""SASL/PLAIN users of the ``SASL_SSL`` listener (its JAAS config)."""
SCRAM_USERS: Final = {"carol": "carol-secret", "dave": "dave-secret"}
"""SCRAM-SHA-512 users, created through the admin API once the cluster is up."""

# Sized for two cores: one of three JVMs must not starve the other two or the tests.
JVM_OPTIONS: Final = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:ActiveProcessorCount=2",
    "-Djava.awt.headless=true",
)

_LOG4J2: Final = """\
status = warn
appender.server.type = File
appender.server.name = server
appender.server.fileName = {directory}/server.log
appender.server.layout.type = PatternLayout
appender.server.layout.pattern = [%d] %p %m (%c)%n
appender.requests.type = File
appender.requests.name = requests
appender.requests.fileName = {directory}/request.log
appender.requests.layout.type = PatternLayout
appender.requests.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.server.ref = server
logger.requests.name = kafka.request.logger
logger.requests.level = {level}
logger.requests.additivity = false
logger.requests.appenderRef.requests.ref = requests
"""


class KafkaClusterError(RuntimeError):
    pass


def _cluster_id() -> str:
    """A random cluster id as Kafka makes one: a UUID in URL-safe base64 without padding,
    never starting with ``-`` (Kafka's ``Uuid.randomUuid`` draws again; a command line would
    take it for an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


_PR_SET_PDEATHSIG: Final = 1
# Looked up now: after the fork only the call may run (no loader lock a thread of the
# parent may have held).
_PRCTL: Final = ctypes.CDLL(None).prctl


def _die_with_parent() -> None:
    """In the broker's process before it starts Java: SIGKILL when the test process ends,
    however it ends (a broker in a session of its own outlives a pytest killed by a timeout,
    and three leaked JVMs starve every later run on two cores)."""
    _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _jaas_plain(users: Mapping[str, str]) -> str:
    entries = " ".join(f'user_{user}="{password}"' for user, password in users.items())
    return (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'username="admin" password="{users["admin"]}" {entries};'
    )


@dataclass
class KafkaNode:
    node_id: int
    directory: Path
    ports: dict[str, int]
    process: subprocess.Popen[bytes] | None = None
    _stdout: IO[bytes] | None = field(default=None, repr=False)

    def address(self, listener: str = "PLAINTEXT") -> str:
        return f"{LOOPBACK}:{self.ports[listener]}"

    @property
    def request_log(self) -> Path:
        return self.directory / "request.log"

    @property
    def server_log(self) -> Path:
        return self.directory / "server.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None


class KafkaCluster:
    """Three KRaft nodes on loopback; ``start()`` formats and starts them, ``stop()`` ends
    them, ``kill(node_id)`` and ``restart(node_id)`` take one down and bring it back."""

    def __init__(
        self,
        directory: Path,
        certificates: CertificateAuthority,
        identity: IdentityProvider,
        overrides: Mapping[str, str] | None = None,
        nodes: int = 3,
        request_log: bool = True,
    ) -> None:
        """``overrides``: broker properties over the ones below (quota windows, say);
        ``nodes``: how many (a benchmark against one broker, like tansu, takes one);
        ``request_log``: whether ``kafka.request.logger`` writes at DEBUG (a line for every
        request, written by the broker's network threads: off for a benchmark)."""
        self.request_log = request_log
        self.directory = directory
        self.overrides = dict(overrides or {})
        self.certificates = certificates
        self.identity = identity
        self.cluster_id = _cluster_id()
        self.classpath = jars.classpath("kafka")
        self.server_certificate: Leaf = certificates.server("kafka")
        self.nodes = {
            node_id: KafkaNode(
                node_id, directory / f"node-{node_id}", {name: free_port() for name in LISTENERS}
            )
            for node_id in range(1, nodes + 1)
        }
        self.replication = min(nodes, 3)

    # -- addresses and client configs ------------------------------------------------------

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        return ",".join(node.address(listener) for node in self.nodes.values())

    def admin_config(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap()}

    def tls_config(self, listener: str = "SSL") -> dict[str, Any]:
        """librdkafka over TLS to ``listener``, trusting the test CA."""
        return {
            "bootstrap.servers": self.bootstrap(listener),
            "security.protocol": listener,
            "ssl.ca.location": str(self.certificates.certificate),
        }

    def sasl_config(self, mechanism: str, user: str) -> dict[str, Any]:
        """librdkafka to ``SASL_SSL`` as ``user`` with PLAIN or SCRAM-SHA-512."""
        password = {**PLAIN_USERS, **SCRAM_USERS}[user]
        return {
            **self.tls_config("SASL_SSL"),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }

    # -- life cycle ----------------------------------------------------------------------------

    def start(self, timeout_s: float = 120.0) -> None:
        for node in self.nodes.values():
            self._write_config(node)
        # Each node's storage formatted by a JVM of its own, all at once.
        formats = {node.node_id: self._format(node) for node in self.nodes.values()}
        for node_id, formatting in formats.items():
            self._formatted(node_id, formatting)
        for node in self.nodes.values():
            self._launch(node)
        for node in self.nodes.values():
            self._await_listening(node, timeout_s)
        self._await_brokers(timeout_s)
        self._create_scram_users()

    def stop(self) -> None:
        # All asked at once: one by one, each waits out the others' leadership moves.
        for node in self.nodes.values():
            if node.running:
                assert node.process is not None
                node.process.terminate()
        for node in self.nodes.values():
            self._end(node, graceful=True)

    def kill(self, node_id: int) -> None:
        """SIGKILL, as a crashed host would go: no controlled shutdown, no flush."""
        self._end(self.nodes[node_id], graceful=False)

    def restart(self, node_id: int, timeout_s: float = 120.0) -> None:
        node = self.nodes[node_id]
        self._end(node, graceful=True)
        self._launch(node)
        self._await_listening(node, timeout_s)
        self._await_brokers(timeout_s)

    # -- the parts -----------------------------------------------------------------------------

    def _properties(self, node: KafkaNode) -> dict[str, str]:
        listeners = ",".join(f"{name}://{node.address(name)}" for name in LISTENERS)
        advertised = ",".join(f"{name}://{node.address(name)}" for name in LISTENERS[:-1])
        voters = ",".join(
            f"{other.node_id}@{other.address('CONTROLLER')}" for other in self.nodes.values()
        )
        keystore = self.directory / "kafka-keystore.pem"
        sasl = "listener.name.sasl_ssl"
        return {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listeners": listeners,
            "advertised.listeners": advertised,
            "listener.security.protocol.map": (
                "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL,REAUTH:SASL_SSL,CONTROLLER:PLAINTEXT"
            ),
            "log.dirs": str(node.directory / "data"),
            # Small and quick for a test machine, replicated so one node may fail.
            "num.network.threads": "2",
            "num.io.threads": "2",
            "num.partitions": "1",
            "default.replication.factor": str(self.replication),
            "min.insync.replicas": str(min(self.replication, 2)),
            "offsets.topic.num.partitions": "6",
            "offsets.topic.replication.factor": str(self.replication),
            "transaction.state.log.num.partitions": "6",
            "transaction.state.log.replication.factor": str(self.replication),
            "transaction.state.log.min.isr": str(min(self.replication, 2)),
            "share.coordinator.state.topic.replication.factor": str(self.replication),
            "share.coordinator.state.topic.min.isr": str(min(self.replication, 2)),
            "group.initial.rebalance.delay.ms": "0",
            "log.segment.bytes": str(16 * 1024 * 1024),
            # TLS: a PEM keystore (key and chain in one file) and the test CA as trust store.
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.certificates.certificate),
            "listener.name.ssl.ssl.client.auth": "requested",
            # SASL_SSL: PLAIN, SCRAM-SHA-512 and OAUTHBEARER checked by Kafka's JWT validator.
            "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512,OAUTHBEARER",
            f"{sasl}.plain.sasl.jaas.config": _jaas_plain(PLAIN_USERS),
            f"{sasl}.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            f"{sasl}.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
            ),
            f"{sasl}.oauthbearer.sasl.server.callback.handler.class": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
            ),
            "listener.name.reauth.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
            "listener.name.reauth.connections.max.reauth.ms": str(REAUTH_MS),
            "listener.name.reauth.plain.sasl.jaas.config": _jaas_plain(PLAIN_USERS),
            "listener.name.reauth.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "sasl.oauthbearer.jwks.endpoint.url": self.identity.jwks_url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
            **self.overrides,
        }

    def _write_config(self, node: KafkaNode) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        keystore = self.directory / "kafka-keystore.pem"
        if not keystore.exists():
            leaf = self.server_certificate
            keystore.write_bytes(leaf.key.read_bytes() + leaf.certificate.read_bytes())
        lines = (f"{key}={value}" for key, value in self._properties(node).items())
        (node.directory / "server.properties").write_text("\n".join(lines) + "\n")
        level = "DEBUG" if self.request_log else "INFO"
        (node.directory / "log4j2.properties").write_text(
            _LOG4J2.format(directory=node.directory, level=level)
        )

    def _java(self, node: KafkaNode, main: str, *args: str) -> list[str]:
        return [
            "java",
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={node.directory / 'log4j2.properties'}",
            # Kafka 4 refuses to fetch a JWKS from a URL not allowed here (CVE-2025-27817).
            f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={self.identity.jwks_url}",
            "-cp",
            self.classpath,
            main,
            *args,
        ]

    def _format(self, node: KafkaNode) -> subprocess.Popen[bytes]:
        config = str(node.directory / "server.properties")
        command = self._java(
            node, "kafka.tools.StorageTool", "format", "-t", self.cluster_id, "-c", config
        )
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    @staticmethod
    def _formatted(node_id: int, formatting: subprocess.Popen[bytes]) -> None:
        output, _ = formatting.communicate(timeout=120)
        if formatting.returncode != 0:
            raise KafkaClusterError(
                f"formatting node {node_id} failed ({formatting.returncode}): "
                f"{output.decode(errors='replace')}"
            )

    def _launch(self, node: KafkaNode) -> None:
        node._stdout = open(node.directory / "stdout.log", "ab")  # noqa: SIM115
        command = self._java(node, "kafka.Kafka", str(node.directory / "server.properties"))
        node.process = subprocess.Popen(
            command,
            stdout=node._stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - one prctl call, nothing that locks
        )

    def _end(self, node: KafkaNode, *, graceful: bool) -> None:
        if node.process is not None and node.process.poll() is None:
            if graceful:
                terminate(node.process, 30.0)
            else:
                os.killpg(node.process.pid, signal.SIGKILL)
                node.process.wait()
        if node._stdout is not None:
            node._stdout.close()
            node._stdout = None

    def _await_listening(self, node: KafkaNode, timeout_s: float) -> None:
        assert node.process is not None
        host, port = LOOPBACK, node.ports["PLAINTEXT"]
        if not wait_until_accepting(node.process, host, port, timeout_s):
            raise KafkaClusterError(
                f"Kafka node {node.node_id} did not listen on {host}:{port} in {timeout_s} s "
                f"(exit code {node.process.poll()}); see {node.directory}/stdout.log and "
                "server.log"
            )

    def _await_brokers(self, timeout_s: float) -> None:
        """Until every running node is a broker in the metadata the cluster answers."""
        running = {node.node_id for node in self.nodes.values() if node.running}
        admin = AdminClient(self.admin_config())
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                brokers = set(admin.list_topics(timeout=5).brokers)
            except Exception:  # not answering yet is what we wait out
                brokers = set()
            if running <= brokers:
                return
            if time.monotonic() > deadline:
                raise KafkaClusterError(f"brokers {sorted(running - brokers)} never registered")
            time.sleep(0.2)

    def _create_scram_users(self) -> None:
        admin = AdminClient(self.admin_config())
        upserts = [
            UserScramCredentialUpsertion(
                user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
            )
            for user, password in SCRAM_USERS.items()
        ]
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(30)


@contextmanager
def kafka_cluster(
    directory: Path,
    overrides: Mapping[str, str] | None = None,
    nodes: int = 3,
    request_log: bool = True,
) -> Iterator[KafkaCluster]:
    """A started cluster with its CA and identity provider, stopped when the block ends."""
    directory.mkdir(parents=True, exist_ok=True)
    certificates = CertificateAuthority(directory)
    with IdentityProvider().serving() as identity:
        cluster = KafkaCluster(directory, certificates, identity, overrides, nodes, request_log)
        try:
            cluster.start()
            yield cluster
        finally:
            cluster.stop()


class ClusterStarter:
    """The session's cluster, started by a thread of its own while other tests run.

    The thread lives until ``stop()``: each node is started with ``PR_SET_PDEATHSIG``, which
    fires when the *thread* that started it ends, not the process."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._ready = threading.Event()
        self._done = threading.Event()
        self._cluster: KafkaCluster | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="kafka-cluster", daemon=True)

    def start(self) -> ClusterStarter:
        self._thread.start()
        return self

    def cluster(self) -> KafkaCluster:
        """The started cluster, once it answers; what stopped it from starting, raised."""
        self._ready.wait()
        if self._cluster is None:
            raise KafkaClusterError("the session's Kafka cluster did not start") from self._error
        return self._cluster

    def stop(self) -> None:
        """Idempotent: the fixture and the session's end both ask."""
        if self._done.is_set():
            return
        self._done.set()
        self._thread.join(120)
        if self._error is not None and self._cluster is not None:
            raise KafkaClusterError("the session's Kafka cluster did not stop") from self._error

    def _run(self) -> None:
        try:
            with kafka_cluster(self._directory) as cluster:
                self._cluster = cluster
                self._ready.set()
                self._done.wait()
        except BaseException as error:  # handed to the thread that asks for the cluster
            self._error = error
        finally:
            self._ready.set()
