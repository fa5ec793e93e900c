"""A plug-in: stages that share state, and the one owner of that state's life.

Stages are stateless towards each other unless something owns what they share; a plug-in is
that owner (Kroxylicious' ``FilterFactory.initialize`` / ``close``). The gateway starts every
plug-in before any stage starts, chains its stages in the order the plug-in gives (after the
gateway's plain stages, before the built-in ones), and closes the plug-in after every stage
was closed, once connections were drained.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from quotagate.gateway.stages.stage import Stage

if TYPE_CHECKING:
    from quotagate.gateway.config import GatewayConfig
    from quotagate.gateway.limits.connections import ConnectionLimits


class Plugin:
    """Base class: a plug-in with no shared state needs only :meth:`stages`."""

    sections: ClassVar[tuple[str, ...]] = ()
    """The config-file sections this plug-in owns (Kroxylicious gives each filter its own
    config): whoever loads the config passes them to ``load_config``, which accepts them and
    hands them over unparsed in ``GatewayConfig.extra``; the plug-in parses and checks them."""

    @classmethod
    def configure(cls, config: GatewayConfig) -> GatewayConfig:
        """Check this plug-in's sections and fill what they decide of the gateway's own
        settings (the quota plug-in's fleet names the store's topic); raises ``ConfigError``.
        Called by whoever loads the config, before anything starts."""
        return config

    def stages(self) -> Sequence[Stage]:
        """The plug-in's stages, in chain order (response stages run in reverse)."""
        return ()

    def attach(self, connections: ConnectionLimits) -> None:
        """Called once as the gateway is built, before any listener and :meth:`start`, with
        the limits its acceptors enforce, which a plug-in may configure (the windows rates
        are measured over, per-IP creation rates)."""

    async def start(self) -> None:
        """Called once on the gateway's loop, before any stage starts."""

    def readiness(self) -> str | None:
        """Why the plug-in cannot serve yet (``/readyz``), or None. Called from the health
        endpoint's thread: read state, never change it."""
        return None

    async def close(self) -> None:
        """Called once on shutdown, after every stage was closed."""
