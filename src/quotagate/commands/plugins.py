"""The plug-ins the ``quotagate`` command runs, and the config file as they make it.

The gateway knows no plug-in by name: each declares the config sections it owns
(``Plugin.sections``), and every sub-command that reads the config file reads it through
:func:`load_gateway_config`, so a section is accepted exactly when a plug-in owns it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from quotagate.enforcement import QuotaEnforcement
from quotagate.gateway import GatewayConfig, Plugin, load_config, validate

PLUGINS: Final[tuple[type[Plugin], ...]] = (QuotaEnforcement,)
PLUGIN_SECTIONS: Final = tuple(section for plugin in PLUGINS for section in plugin.sections)


def load_gateway_config(path: Path | None) -> GatewayConfig:
    """The config file at ``path`` (None: the defaults), as every plug-in configures it."""
    config = load_config(path, PLUGIN_SECTIONS) if path is not None else validate(GatewayConfig())
    for plugin in PLUGINS:
        config = plugin.configure(config)
    return config
