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
from pathlib import Path

import jars
from java_drivers import compile_java

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "java" / "differential" / "Harness.java"
BUILD = ROOT / "build" / "differential"
MAIN = "Harness"


class HarnessUnavailableError(RuntimeError):
    pass


def _classes_dir(classpath: str) -> Path:
    digest = hashlib.sha256(SOURCE.read_bytes() + classpath.encode()).hexdigest()[:12]
    return BUILD / digest


def build() -> Path:
    """Compile the harness if its classes are missing; return the folder holding them."""
    try:
        classpath = jars.classpath("kafka")
        return compile_java([SOURCE], classpath, _classes_dir(classpath))
    except jars.JarsMissingError as error:
        raise HarnessUnavailableError(str(error)) from error
    except subprocess.CalledProcessError as error:
        raise HarnessUnavailableError(f"javac failed:\n{error.stderr}") from error


def command() -> list[str]:
    """``java`` running the harness (compiled first if needed), logging switched off."""
    classes = build()
    java = shutil.which("java")
    if java is None:
        raise HarnessUnavailableError("a JDK (`java`) is needed to run the Kafka harness")
    classpath = os.pathsep.join([str(classes), jars.classpath("kafka")])
    return [
        java,
        "-Xshare:auto",
        "-XX:+UseSerialGC",
        "-Dlog4j2.level=OFF",
        "-Dlog4j2.statusLoggerLevel=OFF",
        "-cp",
        classpath,
        MAIN,
    ]


def main() -> int:
    try:
        print(build())
    except HarnessUnavailableError as error:
        print(f"cannot build the Kafka harness: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
