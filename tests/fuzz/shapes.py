"""The shape of a kio field annotation, derived here rather than borrowed from bounds.py:
the fuzz suite's generator and oracle must not share the code they are checking."""

from __future__ import annotations

from dataclasses import fields, is_dataclass
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin


def field_shape(annotation: Any) -> tuple[Any, bool, bool]:
    """(element type, is an array, is nullable) of a kio field annotation."""
    optional = False
    if get_origin(annotation) in (UnionType, Union):
        args = get_args(annotation)
        optional = NoneType in args
        annotation = next(arg for arg in args if arg is not NoneType)
    if get_origin(annotation) is tuple:
        return get_args(annotation)[0], True, optional
    return annotation, False, optional


class IllTypedError(Exception):
    """A decoded entity that its own schema does not allow."""


def conform(entity: Any) -> Any:
    """``entity`` if no field holds null where its annotation does not allow it.

    kio's native reader does not enforce this for arrays (a null count in a non-nullable
    array decodes as ``None``), and a stage iterating such a field fails with a TypeError
    the connection code does not expect: so the fuzz oracle checks it on every decode.
    """
    for field in fields(entity):
        value = getattr(entity, field.name)
        _inner, is_array, optional = field_shape(field.type)
        if value is None:
            if not optional:
                raise IllTypedError(f"{type(entity).__name__}.{field.name} is null")
            continue
        for item in value if is_array else (value,):
            if is_dataclass(item):
                conform(item)
    return entity
