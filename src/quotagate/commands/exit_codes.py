"""Exit codes of the ``quotagate quotas`` commands, so a script or CI job can tell a mistake
in its own input from a gateway that said no and from a gateway it never reached.

Click already exits 2 on a usage error (a bad option, a bad value); the gateway's answers get
their own codes rather than the generic 1 so that a retry loop retries only what may pass.
"""

from __future__ import annotations

from typing import Final

import typer

from quotagate.client.errors import KafkaError, NetworkError, RequestTimeoutError
from quotagate.protocol.errors import ErrorCode

OK: Final = 0
USAGE: Final = 2
"""The command line or the file given is wrong; the message says what to change. Also what
``apply --check`` returns when the live quotas differ from the file."""
REFUSED: Final = 3
"""The gateway answered with an error: an AlterClientQuotas entry refused (an unknown key, a
fractional rate, CLUSTER_AUTHORIZATION_FAILED for a principal that is no super user)."""
UNREACHABLE: Final = 4
"""No answer: the connection failed, the SASL/TLS login failed or the call timed out."""

HELP: Final = (
    "Exit codes: 0 done; 2 usage error (fix the arguments or the file), or drift found by "
    "apply --check; 3 refused by the "
    "gateway (an entry error such as an unknown key or no authorization); 4 gateway "
    "unreachable (connection, login or timeout)."
)


def exit_for(error: KafkaError) -> typer.Exit:
    """The exit for an error raised by an admin call (not one reported per entity)."""
    unreachable = isinstance(error, NetworkError | RequestTimeoutError) or error.code in (
        # A call that ran out of time, a login the gateway refused: either way no answer
        # about the quotas themselves came back.
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.SASL_AUTHENTICATION_FAILED,
    )
    return typer.Exit(UNREACHABLE if unreachable else REFUSED)
