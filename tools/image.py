"""Build quotagate's OCI image with podman, where no container registry can be reached.

    .venv/bin/python tools/image.py     # what `make image` does

1. The base image (``localhost/quotagate-base:bookworm``): Debian bookworm's Python, C
   compiler and Python headers in a root filesystem made with debootstrap from Debian's
   mirror (the apt source this machine uses), kept as a tarball in the cache and imported
   into podman. Built once; a registry user would pass ``--build-arg BASE=python:3.12-slim``.
2. The Python wheels the image installs, downloaded by the venv's pip into
   ``build/image-wheels`` (pip's own cache makes this quick after the first time), so the
   build itself runs with ``--network=none``.
3. ``podman build -f deploy/image/Containerfile`` → ``localhost/quotagate:dev``.

Where podman's defaults cannot run (this sandbox: crun refuses hybrid cgroups, and raising
RLIMIT_NPROC is not permitted), :func:`podman` uses runc and limits no higher than the
caller's own; the test that runs the image uses the same. How long each step took goes to
``var/image-build.json``. The cache is ``$QUOTAGATE_CACHE``,
else ``$XDG_CACHE_HOME/quotagate``, else ``~/.cache/quotagate`` (as for the jars).
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from jars import cache_root

ROOT = Path(__file__).resolve().parent.parent
BASE = "localhost/quotagate-base:bookworm"
IMAGE = "localhost/quotagate:dev"
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("python3", "python3-venv", "python3-dev", "gcc", "libc6-dev", "ca-certificates")
WHEELS = ROOT / "build" / "image-wheels"


def limits() -> list[str]:
    """Explicit ulimits no higher than this process's: podman's default raises them, which
    an unprivileged-ish sandbox refuses."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    nproc = min(resource.getrlimit(resource.RLIMIT_NPROC)[0], 4096)
    return ["--ulimit", f"nofile={nofile}:{nofile}", "--ulimit", f"nproc={nproc}:{nproc}"]


def podman() -> list[str]:
    """podman, with runc when crun cannot run a container here (hybrid cgroups)."""
    probe = subprocess.run(
        ["podman", "run", "--rm", "--network=none", *limits(), BASE, "true"],
        check=False,
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0 and shutil.which("runc") is not None:
        return ["podman", "--runtime", "runc"]
    return ["podman"]


def run(*command: str, **kwargs: object) -> None:
    print("+", " ".join(command), flush=True)
    subprocess.run(command, check=True, **kwargs)  # type: ignore[call-overload]


def exists(image: str) -> bool:
    return subprocess.run(["podman", "image", "exists", image], check=False).returncode == 0


def base_image() -> None:
    if exists(BASE):
        return
    tarball = cache_root() / "image" / f"{SUITE}-python-rootfs.tar"
    if not tarball.exists():
        if shutil.which("debootstrap") is None:
            sys.exit("debootstrap is missing: apt-get install debootstrap (make tools does)")
        tarball.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="quotagate-rootfs-", dir="/var/tmp") as tmp:
            rootfs = Path(tmp) / "rootfs"
            run(
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(PACKAGES)}",
                SUITE,
                str(rootfs),
                MIRROR,
            )
            # Nothing of apt's lists or caches is needed in an image.
            for junk in ("var/lib/apt/lists", "var/cache/apt/archives"):
                shutil.rmtree(rootfs / junk, ignore_errors=True)
            partial = tarball.with_suffix(".partial")
            run("tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), ".")
            partial.rename(tarball)
    run("podman", "import", "--change", 'CMD ["/bin/bash"]', str(tarball), BASE)


def wheels() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    # The build tools: mypyc, and what mypy needs to follow the pipeline's imports.
    requirements = [*project["project"]["dependencies"], "mypy", "setuptools", "numpy", "pandas"]
    WHEELS.mkdir(parents=True, exist_ok=True)
    pip = Path(sys.executable).with_name("pip")
    run(str(pip), "download", "--quiet", "--only-binary=:all:", "-d", str(WHEELS), *requirements)


def build() -> None:
    run(
        *podman(),
        "build",
        "--network=none",
        *limits(),
        "--build-arg",
        f"BASE={BASE}",
        "--build-arg",
        f"BUILDER={BASE}",
        "-f",
        str(ROOT / "deploy" / "image" / "Containerfile"),
        "-t",
        IMAGE,
        str(ROOT),
    )


def main() -> int:
    if shutil.which("podman") is None:
        sys.exit("podman is missing: apt-get install podman (make tools does)")
    times: dict[str, float] = {}
    for name, step in (("base_s", base_image), ("wheels_s", wheels), ("build_s", build)):
        started = time.monotonic()
        step()
        times[name] = round(time.monotonic() - started, 1)
    record = ROOT / "var" / "image-build.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"image": IMAGE, **times}, indent=2) + "\n", encoding="utf-8")
    print(f"{IMAGE} built: {times}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
