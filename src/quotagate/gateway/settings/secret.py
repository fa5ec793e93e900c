"""A secret from the config: its value is reachable only through :meth:`Secret.reveal`.

Config values may name where a secret lives instead of holding it, as Kafka's config providers
do: ``${env:NAME}`` (an environment variable) or ``${file:PATH}`` (the whole file, one trailing
newline dropped). ``repr``, ``str`` and f-strings of a :class:`Secret` print a mask, so a
secret that reaches a log line, an exception or a dataclass repr by accident shows as ``******``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Final

MASK: Final = "******"
_REFERENCE = re.compile(r"\$\{(?P<provider>[a-z]+):(?P<name>[^}]*)\}")


class SecretError(ValueError):
    """A secret reference that cannot be resolved; the message says which and how to fix it."""


class Secret:
    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The value itself: for the wire or librdkafka only, never for a message."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({MASK})"

    def __str__(self) -> str:
        return MASK

    def __format__(self, spec: str) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __reduce__(self) -> tuple[type[Secret], tuple[str]]:
        # Workers get the config by pickling; the value must survive that trip.
        return (Secret, (self._value,))


def resolve_secret(key: str, value: str) -> Secret:
    """``value`` as written in the config: a literal, ``${env:NAME}`` or ``${file:PATH}``."""
    match = _REFERENCE.fullmatch(value.strip())
    if match is None:
        if "${" in value:
            raise SecretError(
                f"{key}: a reference must be the whole value, ${{env:NAME}} or ${{file:PATH}}"
            )
        return Secret(value)
    provider, name = match["provider"], match["name"]
    if provider == "env":
        found = os.environ.get(name)
        if found is None:
            raise SecretError(
                f"{key} = ${{env:{name}}}: the environment variable {name} is not set; "
                f"export it before starting, or write the value or ${{file:PATH}} instead"
            )
        return Secret(found)
    if provider == "file":
        try:
            text = Path(name).read_text(encoding="utf-8")
        except OSError as exc:
            raise SecretError(
                f"{key} = ${{file:{name}}}: cannot read the file ({exc.strerror}); "
                "check the path and its permissions"
            ) from None
        return Secret(text[:-1] if text.endswith("\n") else text)
    raise SecretError(
        f"{key}: unknown secret provider {provider!r}; write ${{env:NAME}} or ${{file:PATH}}"
    )
