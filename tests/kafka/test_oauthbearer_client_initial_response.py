"""Kafka's ``OAuthBearerClientInitialResponseTest`` (server-side parsing) as vectors."""

from __future__ import annotations

import pytest

from quotagate.security.oauthbearer_message import (
    ClientFirst,
    InvalidClientFirstError,
    parse_client_first,
)


def _parse(message: str) -> ClientFirst:
    return parse_client_first(message.encode())


def test_build_server_response() -> None:
    parsed = _parse("n,,\x01auth=Bearer 123.345.567\x01nineteen=42\x01\x01")
    assert parsed == ClientFirst("123.345.567", "", {"nineteen": "42"})


def test_token() -> None:
    parsed = _parse("n,,\x01auth=Bearer 123.345.567\x01\x01")
    assert (parsed.token, parsed.authorization_id) == ("123.345.567", "")


def test_authorization_id() -> None:
    parsed = _parse("n,a=myuser,\x01auth=Bearer 345\x01\x01")
    assert (parsed.token, parsed.authorization_id) == ("345", "myuser")


def test_extensions() -> None:
    parsed = _parse("n,,\x01propA=valueA1, valueA2\x01auth=Bearer 567\x01propB=valueB\x01\x01")
    assert parsed.token == "567"
    assert parsed.authorization_id == ""
    assert parsed.extensions == {"propA": "valueA1, valueA2", "propB": "valueB"}


def test_rfc7628_example() -> None:
    parsed = _parse(
        "n,a=user@example.com,\x01host=server.example.com\x01port=143\x01"
        "auth=Bearer vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg\x01\x01"
    )
    assert parsed.token == "vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg"
    assert parsed.authorization_id == "user@example.com"
    assert parsed.extensions == {"host": "server.example.com", "port": "143"}


def test_char_support_for_rfc6750_token() -> None:
    parsed = _parse(
        "n,a=user@example.com,\x01host=server.example.com\x01port=143\x01"
        "auth=Bearer vF-9.df_t4qm~Tc2Nvb3RlckBhbHR+hdmlzdGEuY29/tCg==\x01\x01"
    )
    assert parsed.token == "vF-9.df_t4qm~Tc2Nvb3RlckBhbHR+hdmlzdGEuY29/tCg=="
    assert parsed.authorization_id == "user@example.com"
    assert parsed.extensions == {"host": "server.example.com", "port": "143"}


def test_no_extensions_from_byte_array() -> None:
    parsed = _parse(
        "n,a=user@example.com,\x01auth=Bearer vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg\x01\x01"
    )
    assert parsed.token == "vF9dft4qmTc2Nvb3RlckBhbHRhdmlzdGEuY29tCg"
    assert parsed.authorization_id == "user@example.com"
    assert parsed.extensions == {}


@pytest.mark.parametrize(
    ("message", "why"),
    [
        # testThrowsSaslExceptionOnInvalidExtensionKey: keys are letters only.
        ("n,,\x01auth=Bearer 123.345.567\x0119=42\x01\x01", "client first message$"),
        ("n,,\x01nineteen=42\x01\x01", "'auth' not specified"),
        ("n,,\x01auth=Bearer\x01\x01", "invalid 'auth' format"),
        ("n,,\x01auth=Basic abc\x01\x01", "Invalid scheme"),
        ("y,,\x01auth=Bearer abc\x01\x01", "client first message$"),
        ("n,,\x01auth=Bearer abc\x01", "client first message$"),
        ("n,a=x,y,\x01auth=Bearer abc\x01\x01", "client first message$"),
        ("n,,\x01auth=Bearer ab\xe9\x01\x01", "client first message$"),
    ],
)
def test_messages_kafka_refuses(message: str, why: str) -> None:
    with pytest.raises(InvalidClientFirstError, match=why):
        _parse(message)


def test_scheme_is_case_insensitive_and_authzid_is_kept_as_sent() -> None:
    parsed = _parse("n,a=a=2Cb,\x01auth=bEaReR   tok\x01\x01")
    assert (parsed.token, parsed.authorization_id) == ("tok", "a=2Cb")


def test_bytes_that_are_not_utf8_are_refused() -> None:
    with pytest.raises(InvalidClientFirstError):
        parse_client_first(b"n,,\x01auth=Bearer abc\xff\x01\x01")
