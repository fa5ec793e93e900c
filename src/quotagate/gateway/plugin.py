"""A plug-in: stages that share state, and the one owner of that state's life.

Stages are stateless towards each other unless something owns what they share; a plug-in is
that owner (Kroxylicious' ``FilterFactory.initialize`` / ``close``). The gateway starts every
plug-in before any stage starts, chains its stages in the order the plug-in gives (after the
gateway's plain stages, before the built-in ones), and closes the plug-in after every stage
was closed, once connections were drained.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from quotagate.gateway.stage import Stage

if TYPE_CHECKING:
    from quotagate.gateway.connection_limits import ConnectionLimits


class Plugin:
    """Base class: a plug-in with no shared state needs only :meth:`stages`."""

    def stages(self) -> Sequence[Stage]:
        """The plug-in's stages, in chain order (response stages run in reverse)."""
        return ()

    def attach(self, connections: ConnectionLimits) -> None:
        """Called once as the gateway is built, before :meth:`start`. ``connections`` takes
        the ``connection_creation_rate`` quotas of ip entities
        (:meth:`ConnectionLimits.set_ip_connection_rate`), which the acceptors enforce."""

    async def start(self) -> None:
        """Called once on the gateway's loop, before any stage starts."""

    async def close(self) -> None:
        """Called once on shutdown, after every stage was closed."""
