"""Shadow quotas in the client-quota key space: ``shadow.<key>`` is a candidate for ``<key>``.

A shadow quota is evaluated on live traffic and enforced on nobody (docs/quotas.md, Shadow
quotas). KIP-546's AlterClientQuotas has no field for such a flag, so the flag travels in the
key: ``shadow.producer_byte_rate`` is the shadow of ``producer_byte_rate`` for the same
entity. Any Kafka admin client can set, describe and remove one, both store backends keep it
(and audit it) as any other value, and a fleet shares it through the same config topic.
Only the request quotas have shadows: ``connection_creation_rate`` limits connections, which
a shadow cannot accept and refuse at the same time.
"""

from __future__ import annotations

from typing import Final

SHADOW_PREFIX: Final = "shadow."


def is_shadow_key(key: str) -> bool:
    return key.startswith(SHADOW_PREFIX)


def shadow_key(key: str) -> str:
    """The shadow of a live key: ``producer_byte_rate`` -> ``shadow.producer_byte_rate``."""
    return SHADOW_PREFIX + key


def live_key(key: str) -> str:
    """The live key a shadow key stands for; a live key itself."""
    return key[len(SHADOW_PREFIX) :] if key.startswith(SHADOW_PREFIX) else key
