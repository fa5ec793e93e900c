"""From the gateway config to the authenticator factory of its SASL listeners."""

from __future__ import annotations

from quotagate.gateway.auth.authenticator import SecurityProtocol
from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.config import SASL_TERMINATE, ConfigError, GatewayConfig, store_settings
from quotagate.store.backends import StoreError, open_credentials


def authenticator_factory(config: GatewayConfig) -> SaslAuthenticatorFactory | None:
    """None when no listener terminates SASL; otherwise one factory over the credential store
    (passthrough listeners need none: the upstream checks their clients)."""
    sasl_listeners = [
        listener
        for listener in config.listeners
        if listener.security_protocol in SecurityProtocol.SASL
        and listener.sasl_mode == SASL_TERMINATE
    ]
    if not sasl_listeners:
        return None
    try:
        credentials = open_credentials(store_settings(config), "quotagate-credentials")
    except StoreError as exc:
        raise ConfigError(str(exc)) from exc
    return SaslAuthenticatorFactory(
        credentials,
        listener_mechanisms={
            listener.name: listener.sasl_enabled_mechanisms for listener in sasl_listeners
        },
    )
