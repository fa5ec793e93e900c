"""Debian's haproxy terminating TLS in front of a plaintext broker (tansu speaks no TLS).

``bind … ssl crt …`` with a certificate the test made; tansu must advertise the proxy's address
so that clients following metadata stay on TLS.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from quotagate.gateway.embedded import LOOPBACK, TansuBroker, free_port
from quotagate.gateway.embedded.process import terminate, wait_until_accepting
from quotagate.gateway.lifecycle import Lifecycle
from quotagate.gateway.upstream.security import UpstreamSecurity, parse_upstream_security
from support.certificates import CertificateAuthority, Leaf


def haproxy_binary() -> str:
    path = shutil.which("haproxy") or (
        "/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None
    )
    if path is None:
        raise RuntimeError("haproxy is not installed: `make tools` (Debian's haproxy) installs it")
    return path


class TlsProxy(Lifecycle):
    """haproxy on ``port`` (TLS, ``certificate``: certificate and key in one PEM) → ``backend``."""

    def __init__(
        self,
        directory: Path,
        certificate: Path,
        backend: str,
        port: int | None = None,
        client_ca: Path | None = None,
    ) -> None:
        """``client_ca``: demand a client certificate signed by it (mTLS)."""
        verify = f" verify required ca-file {client_ca}" if client_ca else ""
        self.port = port if port is not None else free_port()
        self._config = directory / f"haproxy-{self.port}.cfg"
        self._log = directory / f"haproxy-{self.port}.log"
        self._config.write_text(
            "global\n"
            "  maxconn 512\n"
            "defaults\n"
            "  mode tcp\n"
            "  timeout connect 5s\n"
            "  timeout client 120s\n"
            "  timeout server 120s\n"
            "frontend tls\n"
            f"  bind {LOOPBACK}:{self.port} ssl crt {certificate}{verify}\n"
            "  default_backend broker\n"
            "backend broker\n"
            f"  server broker {backend}\n"
        )
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self, timeout_s: float = 10.0) -> None:
        with open(self._log, "ab") as log:
            self._process = subprocess.Popen(
                [haproxy_binary(), "-db", "-f", str(self._config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        if wait_until_accepting(self._process, LOOPBACK, self.port, timeout_s):
            return
        if self._process.poll() is not None:
            raise RuntimeError(f"haproxy exited: {self._log.read_text()[-2000:]}")
        self.stop()
        raise RuntimeError("haproxy did not accept connections in time")

    def stop(self) -> None:
        process, self._process = self._process, None
        terminate(process, 10)


class TlsUpstream(Lifecycle):
    """tansu behind haproxy; ``mtls``: haproxy demands a client certificate from our CA.
    ``with TlsUpstream(…) as upstream:`` runs both."""

    def __init__(self, directory: Path, mtls: bool = False) -> None:
        self.ca = CertificateAuthority(directory)
        # Named "localhost" only: reaching it as 127.0.0.1 is a host-name mismatch.
        self.leaf: Leaf = self.ca.issue("localhost", dns=("localhost",))
        self.other_ca = CertificateAuthority(directory, "someone else's CA")
        port = free_port()
        self.tansu = TansuBroker(log_file=directory / "tansu.log", advertised=f"localhost:{port}")
        client_ca = self.ca.certificate if mtls else None
        self.proxy = TlsProxy(directory, self.leaf.combined, self.tansu.bootstrap, port, client_ca)

    @property
    def bootstrap(self) -> str:
        return f"localhost:{self.proxy.port}"

    def start(self) -> None:
        self.tansu.start()
        try:
            self.proxy.start()
        except BaseException:
            self.tansu.stop()
            raise

    def stop(self) -> None:
        try:
            self.proxy.stop()
        finally:
            self.tansu.stop()

    def security(self, ca: Path | None = None, **extra: str) -> UpstreamSecurity:
        return parse_upstream_security(
            {"security.protocol": "SSL", "ssl.ca.location": str(ca or self.ca.certificate), **extra}
        )
