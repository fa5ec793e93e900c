"""The Java harness that drives Kafka's own quota classes (java/differential/Harness.java).

``build()`` compiles it with ``javac`` against the pinned Kafka jars (``jars.classpath("kafka")``)
into ``build/differential/<hash of the source and the class path>/`` of the checkout (git
ignores ``build/``), once; ``command()`` is the ``java`` command line that runs it.

    python tools/harness.py     # compile if needed, print where the classes are
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jars

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "java" / "differential" / "Harness.java"
BUILD = ROOT / "build" / "differential"
MAIN = "Harness"


class HarnessUnavailable(RuntimeError):  # noqa: N818 - as jars.JarsMissing
    pass


def _classes_dir(classpath: str) -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes() + classpath.encode()).hexdigest()[:12]
    return BUILD / digest


def build() -> Path:
    """Compile the harness if its classes are missing; return the folder holding them."""
    try:
        classpath = jars.classpath("kafka")
    except jars.JarsMissing as error:
        raise HarnessUnavailable(str(error)) from error
    target = _classes_dir(classpath)
    if (target / f"{MAIN}.class").exists():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise HarnessUnavailable("a JDK (`javac`) is needed to compile the Kafka harness")
    BUILD.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".harness-", dir=BUILD))
    try:
        subprocess.run(
            [javac, "-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d", str(staging),
             str(SOURCE)],
            check=True,
            capture_output=True,
            text=True,
        )
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
        for old in BUILD.iterdir():  # builds of earlier sources
            if old.is_dir() and old != target and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)
    except subprocess.CalledProcessError as error:
        raise HarnessUnavailable(f"javac failed:\n{error.stderr}") from error
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def command() -> list[str]:
    """``java`` running the harness (compiled first if needed), logging switched off."""
    classes = build()
    java = shutil.which("java")
    if java is None:
        raise HarnessUnavailable("a JDK (`java`) is needed to run the Kafka harness")
    classpath = os.pathsep.join([str(classes), jars.classpath("kafka")])
    return [
        java, "-Xshare:auto", "-XX:+UseSerialGC",
        "-Dlog4j2.level=OFF", "-Dlog4j2.statusLoggerLevel=OFF", "-cp", classpath, MAIN,
    ]


def main() -> int:
    try:
        print(build())
    except HarnessUnavailable as error:
        print(f"cannot build the Kafka harness: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
