"""How the gateway reaches its upstream: one spec, built once from ``[upstream]``, used by every
connection the gateway opens (client links, discovery and control, the fleet's topics).

The keys are Kafka's client names (``security.protocol``, ``ssl.ca.location``,
``sasl.mechanism``, ...). The asyncio side gets :func:`client_ssl_context`; confluent-kafka
gets :meth:`UpstreamSecurity.librdkafka_config`. TLS is never optional once asked for: there
is no code path from a TLS spec to a plain socket.
"""

from __future__ import annotations

import dataclasses
import functools
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from quotagate.gateway.settings.secret import Secret, SecretError, resolve_secret
from quotagate.security.protocol import (
    CLIENT_MECHANISMS,
    OAUTHBEARER,
    SecurityProtocol,
)

_HTTPS: Final = "https"
_NO_ENDPOINT_CHECK: Final = ("", "none")


class UpstreamSecurityError(ValueError):
    """A wrong ``[upstream]`` security key or value; the message says how to fix it."""


@dataclass(frozen=True, slots=True)
class OAuthClientCredentials:
    """OAUTHBEARER's client-credentials grant (Kafka's ``sasl.oauthbearer.*`` client keys)."""

    token_endpoint_url: str
    client_id: str
    client_secret: Secret
    scope: str | None = None


@dataclass(frozen=True, slots=True)
class UpstreamSecurity:
    security_protocol: str = SecurityProtocol.PLAINTEXT
    ssl_ca_location: str | None = None
    """PEM file of the CAs that sign the upstream's certificates; None: the system's CAs."""
    ssl_endpoint_identification_algorithm: str = _HTTPS
    """``https``: the certificate must name the host connected to; ``""``/``none``: not checked."""
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: Secret | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    oauth: OAuthClientCredentials | None = None
    warnings: tuple[str, ...] = ()
    """What the config said that the gateway read in its own way (logged at start)."""

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in SecurityProtocol.TLS

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in SecurityProtocol.SASL

    @property
    def verifies_host_name(self) -> bool:
        return self.ssl_endpoint_identification_algorithm.lower() == _HTTPS

    def without_sasl(self) -> UpstreamSecurity:
        """The same transport without the gateway's own SASL: the links of a passthrough
        listener, whose clients authenticate to the upstream themselves."""
        if not self.uses_sasl:
            return self
        protocol = SecurityProtocol.SSL if self.uses_tls else SecurityProtocol.PLAINTEXT
        return dataclasses.replace(self, security_protocol=protocol)

    def librdkafka_config(self) -> dict[str, str]:
        """The same spec as librdkafka properties, for confluent-kafka clients."""
        props = {"security.protocol": self.security_protocol}
        if self.uses_tls:
            props["ssl.endpoint.identification.algorithm"] = (
                _HTTPS if self.verifies_host_name else "none"
            )
            optional = {
                "ssl.ca.location": self.ssl_ca_location,
                "ssl.certificate.location": self.ssl_certificate_location,
                "ssl.key.location": self.ssl_key_location,
            }
            props.update({key: value for key, value in optional.items() if value})
            if self.ssl_key_password is not None:
                props["ssl.key.password"] = self.ssl_key_password.reveal()
        if self.uses_sasl:
            assert self.sasl_mechanism is not None  # parse_upstream_security requires it
            props["sasl.mechanism"] = self.sasl_mechanism
            if self.sasl_mechanism == OAUTHBEARER:
                assert self.oauth is not None
                props["sasl.oauthbearer.method"] = "oidc"
                props["sasl.oauthbearer.token.endpoint.url"] = self.oauth.token_endpoint_url
                props["sasl.oauthbearer.client.id"] = self.oauth.client_id
                props["sasl.oauthbearer.client.secret"] = self.oauth.client_secret.reveal()
                if self.oauth.scope:
                    props["sasl.oauthbearer.scope"] = self.oauth.scope
            else:
                assert self.sasl_username is not None and self.sasl_password is not None
                props["sasl.username"] = self.sasl_username
                props["sasl.password"] = self.sasl_password.reveal()
        return props

    def describe(self) -> str:
        """For log lines: protocol and mechanism, never a secret."""
        if self.uses_sasl:
            return f"{self.security_protocol}/{self.sasl_mechanism}"
        return self.security_protocol


PLAINTEXT_UPSTREAM: Final = UpstreamSecurity()


@functools.lru_cache(maxsize=8)
def client_ssl_context(spec: UpstreamSecurity) -> ssl.SSLContext:
    """The TLS context of every upstream connection of ``spec`` (built once per spec)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    # Kafka's default ssl.enabled.protocols is TLSv1.2,TLSv1.3.
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_REQUIRED
    context.check_hostname = spec.verifies_host_name
    if spec.ssl_ca_location:
        context.load_verify_locations(cafile=spec.ssl_ca_location)
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if spec.ssl_certificate_location:
        password = spec.ssl_key_password.reveal() if spec.ssl_key_password else None
        context.load_cert_chain(
            spec.ssl_certificate_location, spec.ssl_key_location, password=password
        )
    return context


# -- parsing ------------------------------------------------------------------------------

_SSL_KEYS: Final = (
    "ssl.ca.location",
    "ssl.endpoint.identification.algorithm",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
)
_SASL_KEYS: Final = ("sasl.mechanism", "sasl.username", "sasl.password")
_OAUTH_KEYS: Final = (
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.scope",
)
SECURITY_KEYS: Final = ("security.protocol", *_SSL_KEYS, *_SASL_KEYS, *_OAUTH_KEYS)
"""The ``[upstream]`` keys this module owns (``bootstrap.servers`` is the config's)."""
_SECRET_KEYS: Final = frozenset(
    {"ssl.key.password", "sasl.password", "sasl.oauthbearer.client.secret"}
)


def parse_upstream_security(values: Mapping[str, Any]) -> UpstreamSecurity:
    """The spec from flat ``[upstream]`` keys (only :data:`SECURITY_KEYS`); checks files too,
    so a missing CA file or a key that does not match its certificate stops the start."""
    raw: dict[str, str | Secret] = {}
    for key, value in values.items():
        if key not in SECURITY_KEYS:
            raise UpstreamSecurityError(f"unknown key {key!r} in [upstream]")
        if not isinstance(value, str):
            raise UpstreamSecurityError(f'{key} = {value!r} must be a string, e.g. {key} = "..."')
        try:
            raw[key] = resolve_secret(key, value) if key in _SECRET_KEYS else value
        except SecretError as exc:
            raise UpstreamSecurityError(str(exc)) from None
    protocol = str(raw.get("security.protocol", SecurityProtocol.PLAINTEXT))
    if protocol not in SecurityProtocol.ALL:
        upper = protocol.upper()
        hint = f' (write "{upper}")' if upper in SecurityProtocol.ALL else ""
        raise UpstreamSecurityError(
            f"security.protocol = {protocol!r} is not one of "
            f"{', '.join(SecurityProtocol.ALL)}{hint}"
        )
    tls, sasl = protocol in SecurityProtocol.TLS, protocol in SecurityProtocol.SASL
    warnings: list[str] = []
    if not sasl and "sasl.mechanism" in raw:
        # sasl.mechanism with its credentials is read as "authenticate": a Kafka client would
        # ignore them and the upstream would then refuse the gateway, which helps nobody.
        implied = SecurityProtocol.SASL_SSL if tls else SecurityProtocol.SASL_PLAINTEXT
        warnings.append(
            f"sasl.mechanism is set with security.protocol = {protocol!r}: the gateway "
            f'authenticates as with {implied!r}; write security.protocol = "{implied}" to say so, '
            "or remove the sasl.* keys"
        )
        protocol, sasl = implied, True
    if not tls:
        stray = [key for key in _SSL_KEYS if key in raw]
        if stray:
            raise UpstreamSecurityError(
                f"{', '.join(stray)} set, but security.protocol = {protocol!r} does not use TLS: "
                'set security.protocol = "SSL" (or "SASL_SSL"), or remove them'
            )
    unused = () if sasl else tuple(key for key in (*_SASL_KEYS, *_OAUTH_KEYS) if key in raw)
    if unused:
        warnings.append(
            f"{', '.join(unused)} set without sasl.mechanism: not used; set sasl.mechanism (and "
            'security.protocol = "SASL_SSL" or "SASL_PLAINTEXT") or remove them'
        )
    spec = UpstreamSecurity(
        security_protocol=protocol,
        ssl_ca_location=_path(raw, "ssl.ca.location"),
        ssl_endpoint_identification_algorithm=_endpoint_algorithm(raw),
        ssl_certificate_location=_path(raw, "ssl.certificate.location"),
        ssl_key_location=_path(raw, "ssl.key.location"),
        ssl_key_password=_secret(raw, "ssl.key.password"),
        warnings=tuple(warnings),
    )
    if tls:
        _check_tls_material(spec)
    if sasl:
        spec = dataclasses.replace(spec, **_sasl_fields(raw))
    return spec


def _text(raw: Mapping[str, str | Secret], key: str) -> str | None:
    value = raw.get(key)
    return None if value is None else str(value)


def _path(raw: Mapping[str, str | Secret], key: str) -> str | None:
    value = _text(raw, key)
    if value is not None and not Path(value).is_file():
        raise UpstreamSecurityError(
            f"{key} = {value!r}: no such file; write the path of a PEM file"
        )
    return value


def _secret(raw: Mapping[str, str | Secret], key: str) -> Secret | None:
    value = raw.get(key)
    return value if isinstance(value, Secret) else None


def _endpoint_algorithm(raw: Mapping[str, str | Secret]) -> str:
    value = _text(raw, "ssl.endpoint.identification.algorithm")
    if value is None:
        return _HTTPS
    if value.lower() == _HTTPS or value.lower() in _NO_ENDPOINT_CHECK:
        return value.lower()
    raise UpstreamSecurityError(
        f'ssl.endpoint.identification.algorithm = {value!r}: write "https" (the certificate '
        'must name the upstream host, the default) or "" to not check the host name'
    )


def _check_tls_material(spec: UpstreamSecurity) -> None:
    # A certificate without a key is fine: the key may sit in the certificate's file.
    if spec.ssl_key_location and not spec.ssl_certificate_location:
        raise UpstreamSecurityError(
            "ssl.key.location is set without ssl.certificate.location: set both (the gateway's "
            "own certificate, for an upstream that asks for one) or neither"
        )
    try:
        client_ssl_context(spec)
    except (OSError, ssl.SSLError) as exc:
        raise UpstreamSecurityError(
            f"[upstream] TLS material is unusable: {exc}; check ssl.ca.location, "
            "ssl.certificate.location, ssl.key.location (PEM files) and ssl.key.password"
        ) from None


def _sasl_fields(raw: Mapping[str, str | Secret]) -> dict[str, Any]:
    mechanism = _text(raw, "sasl.mechanism")
    if mechanism is None:
        raise UpstreamSecurityError(
            "security.protocol uses SASL: set sasl.mechanism, one of "
            f"{', '.join(CLIENT_MECHANISMS)}"
        )
    if mechanism not in CLIENT_MECHANISMS:
        raise UpstreamSecurityError(
            f"sasl.mechanism = {mechanism!r} is not supported; choose one of "
            f"{', '.join(CLIENT_MECHANISMS)}"
        )
    if mechanism == OAUTHBEARER:
        missing = [key for key in _OAUTH_KEYS[:3] if key not in raw]
        if missing:
            raise UpstreamSecurityError(
                f"sasl.mechanism = OAUTHBEARER needs {', '.join(missing)} (the client-credentials "
                "grant the gateway fetches its tokens with)"
            )
        secret = _secret(raw, "sasl.oauthbearer.client.secret")
        assert secret is not None
        oauth = OAuthClientCredentials(
            token_endpoint_url=str(raw["sasl.oauthbearer.token.endpoint.url"]),
            client_id=str(raw["sasl.oauthbearer.client.id"]),
            client_secret=secret,
            scope=_text(raw, "sasl.oauthbearer.scope"),
        )
        return {"sasl_mechanism": mechanism, "oauth": oauth}
    missing = [key for key in ("sasl.username", "sasl.password") if key not in raw]
    if missing:
        raise UpstreamSecurityError(
            f"sasl.mechanism = {mechanism} needs {' and '.join(missing)}; a password may be "
            'written "${env:NAME}" or "${file:PATH}" instead of the value'
        )
    return {
        "sasl_mechanism": mechanism,
        "sasl_username": _text(raw, "sasl.username"),
        "sasl_password": _secret(raw, "sasl.password"),
    }
