"""From the gateway config to the authenticator factory of its SASL listeners."""

from __future__ import annotations

import sqlite3

from quotagate.gateway.auth.authenticator import SecurityProtocol
from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.config import ConfigError, GatewayConfig
from quotagate.store.credentials import CredentialStore


def authenticator_factory(config: GatewayConfig) -> SaslAuthenticatorFactory | None:
    """None when no listener uses SASL; otherwise one factory over the credential store."""
    sasl_listeners = [
        listener
        for listener in config.listeners
        if listener.security_protocol in SecurityProtocol.SASL
    ]
    if not sasl_listeners:
        return None
    try:
        credentials = CredentialStore.open(config.store_path)
    except (OSError, sqlite3.Error, RuntimeError) as exc:
        raise ConfigError(f"cannot open the store {config.store_path}: {exc}") from exc
    return SaslAuthenticatorFactory(
        credentials,
        listener_mechanisms={
            listener.name: listener.sasl_enabled_mechanisms for listener in sasl_listeners
        },
    )
