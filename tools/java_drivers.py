"""The suite's small Java drivers (tests/clients/java/*.java), compiled with javac against a jar
set of tools/jars.py, once: the classes go into ``build/java/<set>-<hash>/`` (``build/`` is not
in git), named for the sources and the jar set, so a changed driver or pom compiles anew.

    python tools/java_drivers.py          # compile for every jar set (make test does this)
    python tools/java_drivers.py kafka    # one set

The test helpers (tests/support/java.py) call :func:`compiled` too, so running one test file
with pytest works without make.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

import jars

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "tests" / "clients" / "java"
BUILD = ROOT / "build" / "java"

STREAMS_ONLY: Final = frozenset({"JavaStreams.java"})
"""Drivers that need Kafka Streams, which only the ``kafka`` set carries."""


def sources(name: str) -> list[Path]:
    found = sorted(SOURCES.glob("*.java"))
    if name != "kafka":
        found = [s for s in found if s.name not in STREAMS_ONLY]
    return found


def classes_dir(name: str) -> Path:
    digest = hashlib.sha256(jars.jars_dir(name).name.encode())
    for source in sources(name):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return BUILD / f"{name}-{digest.hexdigest()[:12]}"


def compiled(name: str) -> Path:
    """The folder of the drivers' classes for jar set ``name``, compiled if missing."""
    return compile_java(sources(name), jars.classpath(name), classes_dir(name))


def compile_java(files: list[Path], classpath: str, directory: Path) -> Path:
    """``files`` compiled by javac against ``classpath`` into ``directory``, unless it is
    there already (name it for what went in); raises ``CalledProcessError`` with javac's
    errors, ``JarsMissingError`` without a JDK."""
    if directory.is_dir():
        return directory
    javac = shutil.which("javac")
    if javac is None:
        raise jars.JarsMissingError("javac (JDK 17 or newer) is needed for the suite's Java")
    directory.parent.mkdir(parents=True, exist_ok=True)
    # Compiled aside then renamed, so a half-compiled folder never looks done.
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    try:
        subprocess.run(
            [
                javac,
                "-nowarn",
                "-encoding",
                "UTF-8",
                "--release",
                "17",
                "-cp",
                classpath,
                "-d",
                str(staging),
                *(str(f) for f in files),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory


def main(argv: list[str]) -> int:
    for name in argv or jars.names():
        try:
            print(f"{name}: {compiled(name)}")
        except subprocess.CalledProcessError as error:
            print(f"javac failed for the {name} drivers:\n{error.stderr}", file=sys.stderr)
            return 1
        except jars.JarsMissingError as error:
            print(error, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
