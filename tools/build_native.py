"""Compile the gateway's hot modules with mypyc, in place, beside their sources.

    .venv/bin/python tools/build_native.py           # what `make run` and `make test` do
    .venv/bin/python tools/build_native.py --clean   # back to pure Python

The modules are listed once, in pyproject.toml (``[tool.quotagate.compiled] modules``). Each
compiled module is an extension file next to its ``.py`` (Python imports extensions first),
and all of them share one library, ``src/quotagate_native__mypyc*.so``. A manifest
(``src/quotagate/_compiled.json``) records the hash of every source as it was compiled:
``quotagate._compiled`` reads it at import and runs pure Python instead when a source has
changed since, or when ``QUOTAGATE_PURE_PYTHON`` is set. With no C compiler or no Python
headers the build says so and leaves pure Python in place: nothing else depends on it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import sysconfig
import time
import tomllib
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from mypyc.build import mypycify
from setuptools import setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
BUILD = ROOT / "build" / "native"
GROUP = "quotagate_native"

# The manifest, where a module's source is and how it is hashed: the runtime's own rules,
# from this tree. Importing the package checks the manifest, which this script is about to
# answer: its warning that a source changed since the build is no news here.
sys.path.insert(0, str(SRC))
with warnings.catch_warnings():
    warnings.simplefilter("ignore", RuntimeWarning)
    from quotagate import _compiled
PACKAGE = _compiled.PACKAGE


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove the compiled modules")
    parser.add_argument("--force", action="store_true", help="compile even when up to date")
    args = parser.parse_args()
    modules = listed_modules()
    if not (args.clean or args.force) and up_to_date(modules):
        print(f"{len(modules)} compiled modules are up to date")
        return 0
    clean()
    if args.clean:
        print("compiled modules removed: quotagate runs as pure Python")
        return 0
    missing = missing_toolchain()
    if missing:
        print(f"not compiling quotagate's hot modules ({missing}): running as pure Python")
        return 0
    started = time.monotonic()
    compile_in_place(modules)
    write_manifest(modules)
    print(f"compiled {len(modules)} modules with mypyc in {time.monotonic() - started:.0f} s")
    return 0


def listed_modules() -> list[str]:
    with (ROOT / "pyproject.toml").open("rb") as file:
        config = tomllib.load(file)
    modules: list[str] = config["tool"]["quotagate"]["compiled"]["modules"]
    for module in modules:
        if not _compiled.source_of(module).is_file():
            raise SystemExit(f"pyproject.toml lists {module} to compile, but it has no source")
    return modules


def up_to_date(modules: list[str]) -> bool:
    if missing_toolchain():
        return False
    built = _compiled.read_manifest()
    return sorted(built) == sorted(modules) and _compiled.stale_module(built) is None


def clean() -> None:
    """Remove every extension a build left, so a module taken off the list is Python again."""
    _compiled.MANIFEST.unlink(missing_ok=True)
    for built in [*PACKAGE.rglob("*.so"), *SRC.glob(f"{GROUP}__mypyc*.so")]:
        built.unlink()


def missing_toolchain() -> str | None:
    if _compiled.pure_python_asked():
        return f"{_compiled.PURE_PYTHON} is set"
    compiler = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    if shutil.which(compiler.split()[0]) is None:
        return f"no C compiler: {compiler.split()[0]} is not on PATH"
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.is_file():
        return f"no Python headers: {headers} is missing (Debian: python3-dev)"
    return None


def compile_in_place(modules: list[str]) -> None:
    paths = [str(_compiled.source_of(module).relative_to(SRC)) for module in modules]
    os.chdir(SRC)  # in-place extensions land by module name, relative to here
    # One C file per module, so that a rebuild recompiles only the modules that changed.
    extensions = mypycify(
        paths, opt_level="3", group_name=GROUP, multi_file=True, target_dir=str(BUILD / "c")
    )
    setup(
        name="quotagate-native",
        ext_modules=extensions,
        cmdclass={"build_ext": _CompileEachFileAtOnce},
        script_args=["--quiet", "build_ext", "--inplace", "--build-temp", str(BUILD / "temp")],
    )


class _CompileEachFileAtOnce(build_ext):
    """The shared library is one extension of some sixty C files, which setuptools compiles
    one after the other (64 s of a clean build here): each file gets a compiler of its own,
    as many at once as there are cores."""

    def build_extension(self, ext: Any) -> None:
        self.compiler.compile = _each_at_once(self.compiler.compile)
        super().build_extension(ext)


def _each_at_once(compile_files: Callable[..., list[str]]) -> Callable[..., list[str]]:
    def compile_each(sources: list[str], *args: Any, **kwargs: Any) -> list[str]:
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            objects = pool.map(lambda source: compile_files([source], *args, **kwargs), sources)
            return [obj for one in objects for obj in one]

    return compile_each


def write_manifest(modules: list[str]) -> None:
    hashes = {module: _compiled.source_hash(_compiled.source_of(module)) for module in modules}
    _compiled.MANIFEST.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    sys.exit(main())
