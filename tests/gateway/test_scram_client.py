"""The gateway's SCRAM client, pure: RFC 7677's vector byte for byte, then against the
gateway's own SCRAM server (a separate implementation of the other side), then refusals."""

from __future__ import annotations

import base64

import pytest

from quotagate.gateway.auth.scram import ScramServer
from quotagate.gateway.upstream.scram_client import ScramClient
from quotagate.security.sasl import SaslError
from quotagate.security.scram import ScramMechanism, derive_keys, encode_saslname
from support import rfc7677

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def scram(mechanism: ScramMechanism, **passwords: str) -> ScramServer:
    keys = {
        name: derive_keys(mechanism, pw, b"salt-" + name.encode(), 4096)
        for name, pw in passwords.items()
    }
    return ScramServer(mechanism, lambda name, mech: keys.get(name), decoy_secret=b"k" * 32)


def test_rfc7677_exchange_byte_for_byte() -> None:
    client = ScramClient(SHA256, rfc7677.USER, rfc7677.PASSWORD, nonce=rfc7677.CLIENT_NONCE)
    assert client.first() == rfc7677.CLIENT_FIRST
    assert client.final(rfc7677.SERVER_FIRST) == rfc7677.CLIENT_FINAL
    client.verify(rfc7677.SERVER_FINAL)
    assert client.complete


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
@pytest.mark.parametrize("name", ["alice", "a,b=c", "ünï"])
def test_against_the_gateway_scram_server(mechanism: ScramMechanism, name: str) -> None:
    server = scram(mechanism, **{name: "s3cret"})
    client = ScramClient(mechanism, name, "s3cret")
    server_first = server.evaluate(client.first())
    server_final = server.evaluate(client.final(server_first))
    client.verify(server_final)
    assert server.complete and server.username == name


def test_wrong_password_is_refused_by_the_server() -> None:
    server = scram(SHA512, alice="right")
    client = ScramClient(SHA512, "alice", "wrong")
    client_final = client.final(server.evaluate(client.first()))
    with pytest.raises(SaslError):
        server.evaluate(client_final)


def test_a_server_that_does_not_know_the_password_is_caught() -> None:
    client = ScramClient(SHA256, rfc7677.USER, rfc7677.PASSWORD, nonce=rfc7677.CLIENT_NONCE)
    client.first()
    client.final(rfc7677.SERVER_FIRST)
    forged = b"v=" + base64.b64encode(b"\0" * 32)
    with pytest.raises(SaslError, match="server signature"):
        client.verify(forged)
    assert not client.complete


@pytest.mark.parametrize(
    "server_first",
    [
        b"r=someoneelse,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # nonce not extending ours
        b"r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",  # no server part
        b"r=rOprNGfwEbeRWgbNEkqOx,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999",  # iterations
        b"r=rOprNGfwEbeRWgbNEkqOx,s=!!!,i=4096",
        b"garbage",
        b"\xff\xfe",
    ],
)
def test_hostile_server_first_messages_are_refused(server_first: bytes) -> None:
    client = ScramClient(SHA256, rfc7677.USER, rfc7677.PASSWORD, nonce=rfc7677.CLIENT_NONCE)
    client.first()
    with pytest.raises(SaslError):
        client.final(server_first)


def test_server_error_is_reported() -> None:
    client = ScramClient(SHA256, rfc7677.USER, rfc7677.PASSWORD, nonce=rfc7677.CLIENT_NONCE)
    client.first()
    client.final(rfc7677.SERVER_FIRST)
    with pytest.raises(SaslError, match="invalid-proof"):
        client.verify(b"e=invalid-proof")


def test_saslname_encoding() -> None:
    assert encode_saslname("a=b,c") == "a=3Db=2Cc"
