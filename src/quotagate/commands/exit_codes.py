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
fractional rate, CLUSTER_AUTHORIZATION_FAILED for a principal that is no super user), or the
SASL login refused (wrong credentials in --command-config)."""
UNREACHABLE: Final = 4
"""No answer: the connection failed, the TLS handshake failed or the call timed out."""

HELP: Final = (
    "Exit codes: 0 done; 2 usage error (fix the arguments or the file), or drift found by "
    "apply --check; 3 refused by the "
    "gateway (an entry error such as an unknown key or no authorization, or a refused SASL "
    "login); 4 gateway unreachable (connection, TLS or timeout)."
)


def exit_for(error: KafkaError) -> typer.Exit:
    """The exit for an error raised by an admin call (not one reported per entity)."""
    # A call that ran out of time: no answer about the quotas came back. A refused login
    # is a refusal (3): the gateway answered, and retrying the same credentials cannot pass.
    unreachable = (
        isinstance(error, NetworkError | RequestTimeoutError)
        or error.code == ErrorCode.REQUEST_TIMED_OUT
    )
    return typer.Exit(UNREACHABLE if unreachable else REFUSED)
