"""From the TOML config to the SASL authenticator: mechanisms per listener, the store path."""

from __future__ import annotations

from pathlib import Path

import pytest

from quotagate.gateway.auth.authenticator import AuthContext
from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.auth.setup import authenticator_factory
from quotagate.gateway.config import ConfigError, parse_config
from quotagate.store.credentials import CredentialStore


def config_document(store: Path, **listener: object) -> dict[str, object]:
    return {
        "upstream": {"bootstrap.servers": "127.0.0.1:9092"},
        "store": {"path": str(store)},
        "gateway": {"connection.failed.authentication.delay.ms": 0},
        "listeners": [
            {"name": "PLAIN_TEXT", "listen": "127.0.0.1:19092", "broker.port.start": 19100},
            {
                "name": "SECURE",
                "listen": "127.0.0.1:19093",
                "broker.port.start": 19200,
                "security.protocol": "SASL_PLAINTEXT",
                **listener,
            },
        ],
    }


def test_sasl_listeners_get_their_own_mechanisms_over_the_configured_store(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state" / "gw.db"
    CredentialStore.open(db).set_password("alice", "pw", iterations=4096)
    config = parse_config(config_document(db, **{"sasl.enabled.mechanisms": ["SCRAM-SHA-512"]}))
    assert config.connection_failed_authentication_delay_ms == 0
    factory = authenticator_factory(config)
    assert isinstance(factory, SaslAuthenticatorFactory)
    assert factory.mechanisms("SECURE") == ("SCRAM-SHA-512",)
    context = AuthContext("SECURE", "SASL_PLAINTEXT", "127.0.0.1", 1)
    assert factory(context) is not factory(context)  # one authenticator per connection


def test_default_mechanisms_and_no_factory_without_sasl(tmp_path: Path) -> None:
    config = parse_config(config_document(tmp_path / "gw.db"))
    factory = authenticator_factory(config)
    assert factory is not None
    assert factory.mechanisms("SECURE") == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    document = config_document(tmp_path / "other.db")
    document["listeners"] = document["listeners"][:1]  # type: ignore[index]
    assert authenticator_factory(parse_config(document)) is None
    assert not (tmp_path / "other.db").exists()  # no SASL listener: the store is not touched


@pytest.mark.parametrize(
    ("mechanisms", "message"),
    [(["GSSAPI"], "not supported"), ([], "at least one"), ("SCRAM-SHA-1", "not supported")],
)
def test_bad_mechanism_lists_are_config_errors(
    tmp_path: Path, mechanisms: object, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(config_document(tmp_path / "gw.db", **{"sasl.enabled.mechanisms": mechanisms}))


def test_an_unusable_store_path_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    config = parse_config(config_document(blocker / "gw.db"))
    with pytest.raises(ConfigError, match="cannot open the store"):
        authenticator_factory(config)
