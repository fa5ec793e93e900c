"""Errors the admin client raises or reports per topic / per entity.

Every error carries the Kafka error code and its name (``THROTTLING_QUOTA_EXCEEDED``), so a
command line can print exactly what the broker said. Whether an error is retriable follows
Kafka's ``RetriableException`` hierarchy for the codes the client handles (spec §8.1).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode as KioErrorCode

from quotagate.protocol.errors import ErrorCode, is_retriable
from quotagate.quota.controller_mutation import THROTTLING_QUOTA_EXCEEDED_MESSAGE


def error_name(code: int) -> str:
    """Kafka's constant name for an error code (``Errors.java``), e.g. ``INVALID_REQUEST``."""
    try:
        return KioErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


class KafkaError(Exception):
    """A Kafka error code with the message that came with it."""

    def __init__(self, code: int, message: str | None = None) -> None:
        self.code = code
        self.name = error_name(code)
        self.message = message or self.name.replace("_", " ").capitalize()
        super().__init__(f"{self.name} ({code}): {self.message}")

    @property
    def retriable(self) -> bool:
        return is_retriable(self.code)


class ThrottlingQuotaExceededError(KafkaError):
    """A controller-mutation quota refused the operation (KIP-599, error 89).

    ``throttle_time_ms`` is how long the client should wait before trying again; when the
    client gave up after retrying, it is what was left of the last throttle.
    """

    def __init__(self, throttle_time_ms: int, message: str | None = None) -> None:
        self.throttle_time_ms = throttle_time_ms
        super().__init__(
            ErrorCode.THROTTLING_QUOTA_EXCEEDED, message or THROTTLING_QUOTA_EXCEEDED_MESSAGE
        )
        self.args = (
            f"{self.name} ({self.code}): {self.message} throttle_time_ms={throttle_time_ms}",
        )

    def remaining_after(self, elapsed_ms: float) -> ThrottlingQuotaExceededError:
        """This error with ``elapsed_ms`` less throttle, never below zero (spec §5.6)."""
        remaining = max(0, int(self.throttle_time_ms - elapsed_ms))
        return ThrottlingQuotaExceededError(remaining, self.message)


class UnsupportedVersionError(KafkaError):
    """The broker speaks no version of an API that the client speaks too."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.UNSUPPORTED_VERSION, message)


class KafkaTimeoutError(KafkaError):
    """A call ran out of time (``default.api.timeout.ms`` or the per-call timeout).

    ``reason`` is what the call was waiting for, kept when an outer call wraps an inner one
    (a metadata fetch inside a createTopics call) so the message names the root cause.
    """

    def __init__(self, message: str, reason: str | None = None) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)
        self.reason = reason if reason is not None else message


class NetworkError(KafkaError):
    """A connection failed or was lost; retriable."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.NETWORK_EXCEPTION, message)


class ConnectError(NetworkError):
    """No connection could be set up; nothing was sent, so the call has not been tried."""


class AuthenticationError(KafkaError):
    """The broker refused the client's login (a wrong SASL password, say); not retriable,
    as Java's ``SaslAuthenticationException``: the same credentials would be refused again,
    so a call fails at once rather than retrying until its timeout. A
    :data:`quotagate.client.config.Connector` raises it for a refused login."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.SASL_AUTHENTICATION_FAILED, message)


class RequestTimeoutError(KafkaError):
    """No response within ``request.timeout.ms`` (throttled time not counted); retriable."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.REQUEST_TIMED_OUT, message)


def error_for(code: int, message: str | None, throttle_time_ms: int = 0) -> KafkaError:
    """The exception a non-zero error code in a response stands for."""
    if code == ErrorCode.THROTTLING_QUOTA_EXCEEDED:
        return ThrottlingQuotaExceededError(throttle_time_ms, message)
    return KafkaError(code, message)
