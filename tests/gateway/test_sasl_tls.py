"""The listener TLS context: a real handshake over loopback with a certificate made here."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from pathlib import Path

import pytest

from quotagate.gateway.listening.tls import server_context


def make_certificate(directory: Path, name: str = "localhost") -> tuple[Path, Path]:
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "1", "-subj", f"/CN={name}",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


async def echo_once(context: ssl.SSLContext, client: ssl.SSLContext) -> bytes:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readexactly(5))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client, server_hostname="localhost"
        )
        writer.write(b"hello")
        data = await reader.readexactly(5)
        writer.close()
        return data
    finally:
        server.close()
        await server.wait_closed()


async def test_clients_trusting_the_certificate_connect(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    client = ssl.create_default_context(cafile=str(cert))
    assert await echo_once(server_context(cert, key), client) == b"hello"


async def test_clients_not_trusting_it_are_refused(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    other, _ = make_certificate(tmp_path, "other")
    client = ssl.create_default_context(cafile=str(other))
    with pytest.raises(ssl.SSLCertVerificationError):
        await echo_once(server_context(cert, key), client)


async def test_required_client_certificates(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    client_cert, client_key = make_certificate(tmp_path, "client")
    context = server_context(cert, key, truststore=client_cert, client_auth="required")
    trusted = ssl.create_default_context(cafile=str(cert))
    trusted.load_cert_chain(str(client_cert), str(client_key))
    assert await echo_once(context, trusted) == b"hello"
    anonymous = ssl.create_default_context(cafile=str(cert))
    with pytest.raises((ssl.SSLError, ConnectionError, asyncio.IncompleteReadError)):
        await echo_once(context, anonymous)


def test_bad_material_and_settings_are_refused(tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    other_cert, _ = make_certificate(tmp_path, "other")
    with pytest.raises(ssl.SSLError):
        server_context(other_cert, key)  # key does not match the certificate
    with pytest.raises(FileNotFoundError):
        server_context(tmp_path / "missing.crt", key)
    with pytest.raises(ValueError, match="truststore"):
        server_context(cert, key, client_auth="required")
