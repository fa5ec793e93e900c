"""Java jars the test suite runs, fetched once from Maven Central into a cache.

Each folder of ``java/`` with a ``pom.xml`` names one set of jars (``kafka``: Apache Kafka's
brokers, tools, client and Streams; ``kafka-3.9``: an older Java client; ``spark-kafka``:
Spark's Kafka connector for ``pipeline stream``). ``jars_dir(name)``
is where that set lives: a folder of the cache named for the pom's content, so a changed pom
fetches anew and an unchanged one never touches the network again.

    python tools/jars.py            # fetch every set that is missing, print where each is
    python tools/jars.py kafka      # one set

The cache is ``$QUOTAGATE_CACHE``, else ``$XDG_CACHE_HOME/quotagate``, else ``~/.cache/quotagate``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JAVA = ROOT / "java"
_COMPLETE = ".complete"


class JarsMissingError(RuntimeError):
    pass


def cache_root() -> Path:
    explicit = os.environ.get("QUOTAGATE_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "quotagate"


def names() -> list[str]:
    return sorted(p.parent.name for p in JAVA.glob("*/pom.xml"))


def _pom(name: str) -> Path:
    pom = JAVA / name / "pom.xml"
    if not pom.is_file():
        expected = pom.relative_to(ROOT)
        raise JarsMissingError(f"no jar set {name!r}: expected {expected}; sets: {names()}")
    return pom


def jars_dir(name: str) -> Path:
    """Where the set ``name`` is (or will be) in the cache."""
    digest = hashlib.sha256(_pom(name).read_bytes()).hexdigest()[:12]
    return cache_root() / f"{name}-{digest}"


def classpath(name: str) -> str:
    """The set's jars as a class path; raises ``JarsMissingError`` with the command that fetches
    them when they are not there."""
    directory = jars_dir(name)
    if not (directory / _COMPLETE).exists():
        raise JarsMissingError(
            f"the {name} jars are not fetched yet: run `make jars` (or `python tools/jars.py "
            f"{name}`), which copies them from Maven Central into {directory}"
        )
    return os.pathsep.join(str(jar) for jar in sorted(directory.glob("*.jar")))


def fetch(name: str) -> Path:
    """Copy the set's jars with every dependency into the cache, once."""
    directory = jars_dir(name)
    if (directory / _COMPLETE).exists():
        return directory
    if shutil.which("mvn") is None:
        raise JarsMissingError("Maven (`mvn`) is needed once to fetch the test suite's jars")
    directory.parent.mkdir(parents=True, exist_ok=True)
    # Into a fresh folder then renamed, so an interrupted fetch never looks complete.
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=directory.parent))
    try:
        subprocess.run(
            [
                "mvn",
                "-B",
                "-q",
                "-Dstyle.color=never",
                "-f",
                str(_pom(name)),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging}",
            ],
            check=True,
        )
        (staging / _COMPLETE).touch()
        if directory.exists():
            shutil.rmtree(directory)
        staging.rename(directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return directory


def main(argv: list[str]) -> int:
    for name in argv or names():
        try:
            print(f"{name}: {fetch(name)}")
        except (JarsMissingError, subprocess.CalledProcessError) as error:
            print(f"cannot fetch the {name} jars: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
