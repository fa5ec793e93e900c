"""The parent's side of :mod:`fuzz.decode_worker`: start it, give it frames, notice its death."""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Final

from fuzz.lies import lies
from quotagate.protocol.framing import with_size_prefix

TESTS_DIR: Final = Path(__file__).resolve().parents[1]


class WorkerDiedError(AssertionError):
    """The child decoding lies died: a decoder believed a lie (or crashed outright)."""


class DecodeWorker:
    """One child at a time; a dead one is replaced on the next job, so that hypothesis can
    replay and shrink a fatal frame, each attempt in a fresh child."""

    def __init__(self, *, without_bounds: bool = False) -> None:
        handle, progress = tempfile.mkstemp(prefix="fuzz-progress-")
        os.close(handle)
        self._progress = Path(progress)
        self._env = {
            **os.environ,
            "PYTHONPATH": str(TESTS_DIR),
            "QUOTAGATE_FUZZ_PROGRESS": progress,
            "RUST_BACKTRACE": "0",
        }
        if without_bounds:
            self._env["QUOTAGATE_FUZZ_WITHOUT_BOUNDS"] = "1"
        self._process = self._spawn()

    def _spawn(self) -> subprocess.Popen[str]:
        self._progress.write_bytes(b"")
        return subprocess.Popen(
            [sys.executable, "-m", "fuzz.decode_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self._env,
            text=True,
        )

    def check(self, kind: str, api_key: int, api_version: int, frame: bytes) -> dict[str, Any]:
        """Decode ``frame`` and all its lies in the child; its report, or WorkerDiedError."""
        job = {"kind": kind, "api_key": api_key, "api_version": api_version, "frame": frame.hex()}
        return self._ask(job)

    def partitions_created(self, frame: bytes) -> int:
        """What a CreateTopics request frame would create upstream (-1: it does not decode)."""
        job = {"kind": "creates", "api_key": 19, "api_version": -1, "frame": frame.hex()}
        partitions: int = self._ask(job)["partitions"]
        return partitions

    def topic_names(self, frame: bytes) -> list[str]:
        """The topic names a Produce, Metadata, CreateTopics or DeleteTopics request frame
        names (none when it does not decode)."""
        job = {"kind": "names", "api_key": -1, "api_version": -1, "frame": frame.hex()}
        names: list[str] = self._ask(job)["names"]
        return names

    def decode(self, kind: str, api_key: int, api_version: int, frame: bytes) -> dict[str, str]:
        """Decode one frame in the child: outcome ``decoded``, ``refused`` or ``escaped``."""
        job = {
            "kind": "decode",
            "inner": kind,
            "api_key": api_key,
            "api_version": api_version,
            "frame": frame.hex(),
        }
        return self._ask(job)

    def _ask(self, job: dict[str, Any]) -> dict[str, Any]:
        if self._process.poll() is not None:
            self._close_streams()
            self._process = self._spawn()
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(job) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            raise WorkerDiedError(self._death(job))
        report: dict[str, Any] = json.loads(line)
        return report

    def _death(self, job: dict[str, Any]) -> str:
        process = self._process
        returncode = process.wait(30)
        assert process.stderr is not None
        stderr = process.stderr.read()[:2000]
        frame = bytes.fromhex(job["frame"])
        what, hostile = self._fatal_lie(frame)
        return (
            f"the decoding child died (exit {returncode}) on {job['kind']} api {job['api_key']} "
            f"v{job['api_version']}: {what}\nvalid frame   {frame.hex()}\n"
            f"hostile frame {hostile.hex()}\nstderr:\n{stderr}"
        )

    def _fatal_lie(self, frame: bytes) -> tuple[str, bytes]:
        """The lie the child was decoding when it died, from the index it left behind."""
        recorded = self._progress.read_bytes()
        index = struct.unpack(">q", recorded[:8])[0] if len(recorded) >= 8 else -1
        if index == -2:
            return "after decoding every lie (answering the parent)", frame
        if index < 0:
            return "the valid frame itself", frame
        lie = next(itertools.islice(lies(frame[4:]), index, None))
        return lie.what, with_size_prefix(lie.body)

    @property
    def returncode(self) -> int | None:
        return self._process.poll()

    def close(self) -> None:
        process = self._process
        if process.poll() is None:
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._close_streams()
        self._progress.unlink(missing_ok=True)

    def _close_streams(self) -> None:
        process = self._process
        for stream in (process.stdin, process.stdout, process.stderr):
            if stream is not None and not stream.closed:
                with contextlib.suppress(BrokenPipeError):  # a dead child's unread stdin
                    stream.close()
