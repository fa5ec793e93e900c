"""Options that several commands take alike, declared once as a function of them.

typer reads a command's options from its signature and has no way to share a block of them,
so each command would repeat the block. :func:`with_options` instead adds a *group*
function's parameters to the signature typer reads of the command, calls the group with their
values and hands the command what the group returns (or nothing, for options declared only
so that click accepts them and ``--help`` shows them, as the entity options).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

R = TypeVar("R")


def with_options(
    group: Callable[..., object], into: str | None = None
) -> Callable[[Callable[..., R]], Callable[..., R]]:
    """The command with ``group``'s options after its own; ``into`` names the parameter of the
    command that receives ``group(...)``."""
    # Keyword-only: they follow whatever the command declares (typer passes all by keyword).
    group_parameters = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in inspect.signature(group, eval_str=True).parameters.values()
    ]
    group_names = {p.name for p in group_parameters}

    def add(command: Callable[..., R]) -> Callable[..., R]:
        declared = inspect.signature(command, eval_str=True).parameters
        if into is not None and into not in declared:
            raise TypeError(f"{command.__name__} has no parameter {into!r} to receive the group")
        own = [p for p in declared.values() if p.name != into]
        clash = group_names & {p.name for p in own}
        if clash:
            raise TypeError(f"{command.__name__} declares {sorted(clash)} already")

        @functools.wraps(command)
        def grouped(**kwargs: Any) -> R:
            values = {name: kwargs.pop(name) for name in group_names}
            made = group(**values)
            return command(**kwargs) if into is None else command(**kwargs, **{into: made})

        parameters = [*own, *group_parameters]
        # typer reads __signature__ (inspect's rule) and resolves the annotations it finds
        # there; they are resolved here already, each in its own module.
        grouped.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        grouped.__annotations__ = {p.name: p.annotation for p in parameters}
        return grouped

    return add
