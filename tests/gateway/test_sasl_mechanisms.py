"""Server-side PLAIN and SCRAM exchanges, pure: RFC 7677 vector, an independent client, attacks."""

from __future__ import annotations

import base64
from collections.abc import Callable

import pytest
from kafka.net.sasl.scram import ScramClient

from quotagate.gateway.auth.plain import PlainServer
from quotagate.gateway.auth.scram import ScramServer
from quotagate.security.sasl import SaslError
from quotagate.security.scram import ScramKeys, ScramMechanism, derive_keys
from support import rfc7677

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def users(**passwords: str) -> Callable[[str, ScramMechanism], ScramKeys | None]:
    table = {
        (name, mech): derive_keys(mech, pw, f"salt-{name}-{mech.value}".encode(), 4096)
        for name, pw in passwords.items()
        for mech in ScramMechanism
    }
    return lambda name, mech: table.get((name, mech))


def scram(mechanism: ScramMechanism = SHA256, **passwords: str) -> ScramServer:
    return ScramServer(mechanism, users(**passwords), decoy_secret=b"k" * 32)


def test_rfc7677_exchange_byte_for_byte() -> None:
    keys = derive_keys(SHA256, rfc7677.PASSWORD, base64.b64decode(rfc7677.SALT_BASE64), 4096)
    server = ScramServer(
        SHA256,
        lambda name, mech: keys if (name, mech) == (rfc7677.USER, SHA256) else None,
        decoy_secret=b"k" * 32,
        nonce_factory=lambda: rfc7677.SERVER_NONCE,
    )
    assert server.evaluate(rfc7677.CLIENT_FIRST) == rfc7677.SERVER_FIRST
    assert not server.complete
    assert server.evaluate(rfc7677.CLIENT_FINAL) == rfc7677.SERVER_FINAL
    assert server.complete
    assert server.username == "user"


def run_client(server: ScramServer, client: ScramClient) -> None:
    server_first = server.evaluate(client.first_message())
    client.process_server_first_message(server_first)
    server_final = server.evaluate(client.final_message())
    # Raises unless the server proved it knows the ServerKey.
    client.process_server_final_message(server_final)


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_independent_client_authenticates(mechanism: ScramMechanism) -> None:
    server = scram(mechanism, alice="correct horse")
    run_client(server, ScramClient("alice", "correct horse", mechanism.value))
    assert server.complete and server.username == "alice"


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_wrong_password_fails_without_revealing_why(mechanism: ScramMechanism) -> None:
    server = scram(mechanism, alice="correct horse")
    with pytest.raises(SaslError) as failure:
        run_client(server, ScramClient("alice", "wrong horse", mechanism.value))
    assert not failure.value.public
    assert not server.complete
    with pytest.raises(RuntimeError):
        _ = server.username


def test_unknown_user_gets_a_plausible_stable_challenge_then_fails() -> None:
    first = b"n,,n=mallory,r=abcdef"
    challenges = [scram(alice="pw").evaluate(first) for _ in range(2)]
    salts = [dict(p.split(b"=", 1) for p in c.split(b","))[b"s"] for c in challenges]
    assert salts[0] == salts[1]
    assert challenges[0].endswith(b",i=8192")
    server = scram(alice="pw")
    with pytest.raises(SaslError) as failure:
        run_client(server, ScramClient("mallory", "pw", "SCRAM-SHA-256"))
    assert not failure.value.public


def test_replayed_client_final_fails_on_a_new_session() -> None:
    client = ScramClient("alice", "pw", "SCRAM-SHA-256")
    first = client.first_message()
    original = scram(alice="pw")
    client.process_server_first_message(original.evaluate(first))
    final = client.final_message()
    original.evaluate(final)
    assert original.complete

    replay = scram(alice="pw")
    replay.evaluate(first)  # same client-first: the server still picks a fresh nonce
    with pytest.raises(SaslError, match="nonce"):
        replay.evaluate(final)


def test_nonce_must_extend_the_servers_nonce() -> None:
    server = scram(alice="pw")
    server_first = server.evaluate(b"n,,n=alice,r=clientnonce")
    nonce = server_first.split(b",")[0][2:]
    assert nonce.startswith(b"clientnonce") and len(nonce) > len(b"clientnonce")
    with pytest.raises(SaslError, match="nonce"):
        server.evaluate(b"c=biws,r=clientnonce,p=" + base64.b64encode(b"\0" * 32))


def test_channel_binding_data_must_echo_the_gs2_header() -> None:
    server = scram(alice="pw")
    nonce = server.evaluate(b"n,,n=alice,r=cn").split(b",")[0][2:]
    wrong_cbind = base64.b64encode(b"y,,")
    with pytest.raises(SaslError, match="channel-binding"):
        server.evaluate(b"c=" + wrong_cbind + b",r=" + nonce + b",p=" + base64.b64encode(b"0" * 32))


@pytest.mark.parametrize(
    "client_first",
    [
        b"",
        b"n=alice,r=abc",  # no gs2 header
        b"x,,n=alice,r=abc",  # bad cbind flag
        b"n,,n=alice",  # no nonce
        b"n,,n=alice,r=",  # empty nonce
        b"n,,n=al=2Xice,r=abc",  # invalid saslname escape
        b"n,,n=,r=abc",  # empty user
        b"n,,n=alice,r=ab,c",  # ',' inside the nonce
        b"n,,\xff\xfe,r=abc",  # not UTF-8
        b"p=tls-unique,,n=alice,r=abc",  # channel binding requested
        b"n,,m=ext,n=alice,r=abc",  # mandatory extension
        b"n,,n=alice,r=abc,tokenauth=true",  # delegation tokens are not supported
    ],
)
def test_malformed_client_first_is_refused(client_first: bytes) -> None:
    server = scram(alice="pw")
    with pytest.raises(SaslError):
        server.evaluate(client_first)
    with pytest.raises(SaslError):  # and the exchange is over
        server.evaluate(b"n,,n=alice,r=abc")


@pytest.mark.parametrize(
    "client_final",
    [
        b"",
        b"c=biws,r={nonce}",  # no proof
        b"c=biws,p=AAAA",  # no nonce
        b"c=bi!s,r={nonce},p=AAAA",  # bad base64
        b"c=biws,r={nonce},p=AAAA",  # proof of the wrong length
        b"c=biws,r={nonce},p=AAAA,x=1",  # proof not last
    ],
)
def test_malformed_client_final_is_refused(client_final: bytes) -> None:
    server = scram(alice="pw")
    nonce = server.evaluate(b"n,,n=alice,r=cn").split(b",")[0][2:]
    with pytest.raises(SaslError):
        server.evaluate(client_final.replace(b"{nonce}", nonce))
    assert not server.complete


def test_authorization_id_must_match_the_user() -> None:
    with pytest.raises(SaslError, match="authorization id") as failure:
        scram(alice="pw").evaluate(b"n,a=bob,n=alice,r=abc")
    assert failure.value.public
    assert scram(alice="pw").evaluate(b"n,a=alice,n=alice,r=abc").startswith(b"r=abc")


def test_escaped_usernames_are_decoded() -> None:
    server = scram(**{"a,b=c": "pw"})
    client = ScramClient("a=2Cb=3Dc", "pw", "SCRAM-SHA-256")  # kafka-python does not escape
    run_client(server, client)
    assert server.username == "a,b=c"


def test_client_extensions_are_part_of_the_signed_message() -> None:
    server = scram(alice="pw")
    client = ScramClient("alice", "pw", "SCRAM-SHA-256")
    client.auth_message = b""
    first = client.first_message() + b",ext=1"
    client.auth_message += b",ext=1"
    client.process_server_first_message(server.evaluate(first))
    client.process_server_final_message(server.evaluate(client.final_message()))
    assert server.complete


def test_no_token_after_completion() -> None:
    server = scram(alice="pw")
    run_client(server, ScramClient("alice", "pw", "SCRAM-SHA-256"))
    with pytest.raises(SaslError):
        server.evaluate(b"n,,n=alice,r=again")


# ---- PLAIN ---------------------------------------------------------------------------------


def plain(**passwords: str) -> PlainServer:
    return PlainServer(lambda user, pw: passwords.get(user) == pw)


def test_plain_success_with_and_without_authzid() -> None:
    for token in (b"\x00alice\x00pw", b"alice\x00alice\x00pw"):
        server = plain(alice="pw")
        assert server.evaluate(token) == b""
        assert server.complete and server.username == "alice"


@pytest.mark.parametrize(
    ("token", "public", "match"),
    [
        (b"\x00alice\x00nope", True, "Invalid username or password"),
        (b"\x00bob\x00pw", True, "Invalid username or password"),
        (b"bob\x00alice\x00pw", True, "authorization id"),
        (b"\x00\x00pw", False, "username not specified"),
        (b"\x00alice\x00", False, "password not specified"),
        (b"alice\x00pw", False, "expected 3 tokens"),
        (b"\x00alice\x00pw\x00x", False, "expected 3 tokens"),
        (b"\x00al\xffice\x00pw", False, "UTF-8"),
    ],
)
def test_plain_failures(token: bytes, public: bool, match: str) -> None:
    server = plain(alice="pw")
    with pytest.raises(SaslError, match=match) as failure:
        server.evaluate(token)
    assert failure.value.public is public
    assert not server.complete


def test_plain_is_a_single_token_exchange() -> None:
    server = plain(alice="pw")
    with pytest.raises(SaslError):
        server.evaluate(b"\x00alice\x00nope")
    with pytest.raises(SaslError):
        server.evaluate(b"\x00alice\x00pw")
    assert not server.complete
