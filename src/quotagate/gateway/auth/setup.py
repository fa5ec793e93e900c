"""From the gateway config to the authenticator factory of its SASL listeners."""

from __future__ import annotations

from quotagate.gateway.auth.jwks import JwksCache, JwksError
from quotagate.gateway.auth.oauthbearer import JwksTokenValidator, TokenValidator
from quotagate.gateway.auth.sasl import SaslAuthenticatorFactory
from quotagate.gateway.config import (
    SASL_TERMINATE,
    ConfigError,
    GatewayConfig,
    ListenerConfig,
    store_settings,
)
from quotagate.security.oauthbearer import TokenRules
from quotagate.security.protocol import SecurityProtocol
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
        listener_tokens={
            listener.name: token_validator(listener)
            for listener in sasl_listeners
            if listener.oauthbearer_jwks_endpoint_url
        },
        listener_max_reauth_ms={
            listener.name: listener.connections_max_reauth_ms for listener in sasl_listeners
        },
    )


def token_validator(listener: ListenerConfig) -> TokenValidator:
    """The listener's OAUTHBEARER validator, its JWKS fetched now: a gateway whose keys
    cannot be read does not start (as Kafka's broker does not)."""
    assert listener.oauthbearer_jwks_endpoint_url is not None
    keys = JwksCache(
        listener.oauthbearer_jwks_endpoint_url,
        listener.oauthbearer_jwks_endpoint_refresh_ms,
        retry_backoff_ms=listener.oauthbearer_jwks_endpoint_retry_backoff_ms,
        retry_backoff_max_ms=listener.oauthbearer_jwks_endpoint_retry_backoff_max_ms,
    )
    try:
        keys.load()
    except JwksError as exc:
        raise ConfigError(f"listener {listener.name}: {exc}") from None
    return JwksTokenValidator(
        keys,
        TokenRules(
            expected_audience=listener.oauthbearer_expected_audience,
            expected_issuer=listener.oauthbearer_expected_issuer,
            clock_skew_seconds=listener.oauthbearer_clock_skew_seconds,
            sub_claim_name=listener.oauthbearer_sub_claim_name,
            scope_claim_name=listener.oauthbearer_scope_claim_name,
        ),
    )
