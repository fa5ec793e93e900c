"""``quota.exempt.principals``: a list of principals, one rule for every place that takes it.

The store keeps the list as text (``User:a,User:b``, how ``kafka-configs --add-config
'quota.exempt.principals=[User:a,User:b]'`` sends it through IncrementalAlterConfigs); the
config file and the quota file write it as a TOML list. Both go through
:func:`check_principals`, so a name the gateway refuses is refused by every reader.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

EXEMPT_PRINCIPALS: Final = "quota.exempt.principals"


def parse_principal_list(text: str) -> list[str]:
    """``User:a,User:b`` as a list; raises ``ValueError`` naming what is not a principal."""
    return check_principals(part.strip() for part in text.split(",") if part.strip())


def check_principals(principals: Iterable[object]) -> list[str]:
    """The principals as a list, each ``TYPE:NAME``; raises ``ValueError`` naming the first
    that is not one and how to write it."""
    checked: list[str] = []
    for principal in principals:
        kind, sep, name = principal.partition(":") if isinstance(principal, str) else ("", "", "")
        if not (isinstance(principal, str) and kind and sep and name):
            raise ValueError(
                f"{principal!r} is not a principal: write TYPE:NAME, e.g. "
                f"{EXEMPT_PRINCIPALS}=[User:canary,User:cruise-control]"
            )
        checked.append(principal)
    return checked


def principal_list_text(principals: Iterable[str]) -> str:
    """The list as the store keeps it."""
    return ",".join(principals)
