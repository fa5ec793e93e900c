"""Whether this process runs the mypyc-compiled hot modules or their Python sources.

``tools/build_native.py`` compiles the modules pyproject.toml lists into extensions beside
their sources and records each source's hash in ``_compiled.json``. Python prefers an
extension to a source of the same name, so nothing has to happen for the compiled build to
run. This module steps in, once, when ``quotagate`` is imported, in two cases:

* ``QUOTAGATE_PURE_PYTHON`` is set (to anything but ``0`` or an empty string): the pure
  Python path, which stays importable and is what runs where no compiler was found;
* a compiled module's source no longer matches the hash it was compiled from (an edit, a
  checkout): a stale extension would run old code, so every listed module is imported from
  source instead, with a warning naming the first changed module.

It is all or nothing: compiled modules call each other's classes directly, so one module
from source beside compiled ones would give two classes of one name.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent
MANIFEST = PACKAGE / "_compiled.json"
PURE_PYTHON = "QUOTAGATE_PURE_PYTHON"


def source_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def source_of(module: str) -> Path:
    return PACKAGE.parent.joinpath(*module.split(".")).with_suffix(".py")


def read_manifest() -> dict[str, str]:
    """The compiled modules and their sources' hashes; empty when nothing is compiled."""
    try:
        manifest: dict[str, str] = json.loads(MANIFEST.read_text())
    except FileNotFoundError:
        return {}
    return manifest


def pure_python_asked() -> bool:
    return os.environ.get(PURE_PYTHON, "") not in ("", "0")


def stale_module(manifest: dict[str, str]) -> str | None:
    for module, digest in manifest.items():
        source = source_of(module)
        if not source.is_file() or source_hash(source) != digest:
            return module
    return None


class _FromSource:
    """Finds the listed modules' ``.py`` files, never their extensions (a meta path finder;
    not derived from ``importlib.abc``, whose import costs every start-up ~25 ms)."""

    def __init__(self, modules: set[str]) -> None:
        self._modules = modules

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self._modules:
            return None
        return importlib.util.spec_from_file_location(fullname, source_of(fullname))


def choose() -> bool:
    """Set up the imports of the listed modules; True when the compiled build will run."""
    manifest = read_manifest()
    if not manifest:
        return False
    if not pure_python_asked():
        stale = stale_module(manifest)
        if stale is None:
            return True
        warnings.warn(
            f"{stale} changed since it was compiled: running quotagate as pure Python "
            "(`make` or `python tools/build_native.py` compiles it again)",
            RuntimeWarning,
            stacklevel=3,
        )
    sys.meta_path.insert(0, _FromSource(set(manifest)))
    return False


COMPILED = choose()
"""True when this process runs the compiled hot modules."""
