"""Hostile connections: what one fuzz case sends, and what it saw the gateway do.

A case is one TCP connection carrying one payload: raw random bytes, a valid request with a
length lie (from :mod:`fuzz.lies`), a request with a random body, a size prefix that lies, or
the issue's frame. :func:`run_case` sends it and reports how the connection ended; what the
gateway must have logged for it is checked by the tests against the gateway's log.
"""

from __future__ import annotations

import random
import socket
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from kio.schema.index import api_key_map

from fuzz.entities import entities
from fuzz.lies import fixed_lies
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.framing import DEFAULT_MAX_FRAME_BYTES, with_size_prefix
from quotagate.protocol.headers import encode_request_header

# The issue's bytes, exactly as filed: the size prefix says 19 although 20 bytes follow, so
# the gateway sees a topics varint cut short and one stray byte after the frame.
ISSUE_FRAME: Final = bytes.fromhex("00000013001300050000000100046576696c008080808040")
# The same request with the size it meant: the topics count claims 2^34 - 1 entries.
ISSUE_FRAME_SIZED: Final = with_size_prefix(ISSUE_FRAME[4:])
# CreateTopics v5 whose topics array is null: kio decoded it as None (regression).
NULL_TOPICS_FRAME: Final = with_size_prefix(
    encode_request_header(api_keys.CREATE_TOPICS, 5, 2, "null") + b"\x00" + bytes(4) + b"\x00\x00"
)

# Requests some stage of `quotagate serve` decodes when quotas are configured.
DECODED_REQUESTS: Final = (
    api_keys.PRODUCE,
    api_keys.FETCH,
    api_keys.METADATA,
    api_keys.SASL_HANDSHAKE,
    api_keys.API_VERSIONS,
    api_keys.CREATE_TOPICS,
    api_keys.DELETE_TOPICS,
    api_keys.SASL_AUTHENTICATE,
    api_keys.CREATE_PARTITIONS,
    44,  # IncrementalAlterConfigs (topic bytes-in thresholds)
    api_keys.DESCRIBE_CLIENT_QUOTAS,
    api_keys.ALTER_CLIENT_QUOTAS,
)


class Ending(Enum):
    CLOSED = "closed"  # the gateway closed (FIN or RST): it must have logged why
    ANSWERED = "answered"  # a complete response arrived; the client hung up itself


@dataclass(frozen=True, slots=True)
class Case:
    kind: str
    detail: str
    payload: bytes
    truncated: bool
    """The payload stops inside a frame: the client half-closes so the gateway sees the end."""


@dataclass(frozen=True, slots=True)
class Result:
    case: Case
    client_port: int
    ending: Ending


def run_case(address: tuple[str, int], case: Case, timeout_s: float = 30.0) -> Result:
    """Send ``case`` on a new connection; wait until the gateway closes it or answers."""
    with socket.create_connection(address, timeout=timeout_s) as sock:
        port = sock.getsockname()[1]
        try:
            sock.sendall(case.payload)
            if case.truncated:
                sock.shutdown(socket.SHUT_WR)
            ending = _await_ending(sock)
        except (ConnectionResetError, BrokenPipeError):
            ending = Ending.CLOSED
        # No TIME_WAIT left behind on the client side: 100 000 cases would exhaust ports.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return Result(case, port, ending)


def _await_ending(sock: socket.socket) -> Ending:
    received = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return Ending.CLOSED
        received += chunk
        if len(received) >= 4 and len(received) >= 4 + struct.unpack_from(">i", received)[0]:
            return Ending.ANSWERED


# -- generation -------------------------------------------------------------------------------


def request_frames(count: int, seed: int | None) -> list[bytes]:
    """``count`` valid request frames (hypothesis-built) of the APIs the gateway decodes, of
    any modelled version."""
    schemas = [
        (api_key, version)
        for api_key in DECODED_REQUESTS
        for version in api_table.modelled_versions(api_key) or ()
    ]
    frames: list[bytes] = []

    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        derandomize=seed is None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def collect(data: st.DataObject) -> None:
        api_key, version = data.draw(st.sampled_from(schemas))
        body = data.draw(entities(api_table.request_schema(api_key, version)))
        header = encode_request_header(api_key, version, len(frames) + 1, "fuzz")
        frames.append(with_size_prefix(header + codec.encode_body(body)))

    if seed is not None:
        collect = _seeded(collect, seed)
    collect()
    return frames


def _seeded(test: Callable[[], None], seed: int) -> Callable[[], None]:
    seeded: Callable[[], None] = hypothesis_seed(seed)(test)
    return seeded


class CaseMaker:
    """Draws fuzz cases of every kind from a seeded generator and a pool of valid frames."""

    def __init__(self, frames: Sequence[bytes], rng: random.Random) -> None:
        self._frames = frames
        self._rng = rng
        self._fixed = fixed_lies()
        self._kinds: list[Callable[[], Case]] = [
            self.length_lie,
            self.length_lie,
            self.length_lie,
            self.truncation,
            self.raw_bytes,
            self.random_body,
            self.size_lie,
            self.issue_frame,
        ]

    def next(self) -> Case:
        return self._rng.choice(self._kinds)()

    def length_lie(self) -> Case:
        """A valid request with one lie from :func:`fuzz.lies.lies` at a random offset."""
        frame = self._rng.choice(self._frames)
        body = frame[4:]
        offset = self._rng.randrange(len(body) + 1)
        name, raw = self._rng.choice(self._fixed)
        if self._rng.random() < 0.5 and len(raw) <= len(body) - offset:
            hostile = body[:offset] + raw + body[offset + len(raw) :]
        else:
            hostile = body[:offset] + raw + body[offset:]
        return Case("length lie", f"{name} at {offset}", with_size_prefix(hostile), truncated=False)

    def truncation(self) -> Case:
        """A valid request cut short, with a size prefix that matches what is left."""
        frame = self._rng.choice(self._frames)
        end = self._rng.randrange(len(frame) - 4)
        return Case("truncated body", f"at {end}", with_size_prefix(frame[4 : 4 + end]), False)

    def raw_bytes(self) -> Case:
        """Random bytes; whatever their first four say about the size."""
        payload = self._rng.randbytes(self._rng.randint(1, 600))
        return Case("random bytes", "", payload, truncated=_is_truncated(payload))

    def random_body(self) -> Case:
        """A well-formed header of a known API (any version) followed by random bytes."""
        api_key = self._rng.choice(_KNOWN_KEYS)
        versions = api_table.modelled_versions(api_key) or range(1)
        version = self._rng.randint(max(versions.start - 1, 0), versions.stop)
        header = struct.pack(">hhih", api_key, version, 7, 4) + b"fuzz"
        if api_table.request_header_version(api_key, version) == 2:
            header += b"\x00"
        body = self._rng.randbytes(self._rng.randint(0, 300))
        return Case(
            "random body", f"api {api_key} v{version}", with_size_prefix(header + body), False
        )

    def size_lie(self) -> Case:
        """A valid request whose size prefix claims more (or less) than it holds."""
        frame = self._rng.choice(self._frames)
        real = len(frame) - 4
        claimed = self._rng.choice([real + 1, real + 1000, real - 1, DEFAULT_MAX_FRAME_BYTES])
        payload = struct.pack(">i", claimed) + frame[4:]
        return Case("size lie", f"{claimed} for {real}", payload, _is_truncated(payload))

    def issue_frame(self) -> Case:
        payload = self._rng.choice([ISSUE_FRAME, ISSUE_FRAME_SIZED, NULL_TOPICS_FRAME])
        return Case("issue frame", payload.hex(), payload, truncated=False)


def _is_truncated(payload: bytes) -> bool:
    """Whether the gateway, having read ``payload``, would still wait for the rest of a frame."""
    offset = 0
    while offset < len(payload):
        if len(payload) - offset < 4:
            return True
        size = struct.unpack_from(">i", payload, offset)[0]
        if size < 0 or size > DEFAULT_MAX_FRAME_BYTES:
            return False  # refused as soon as the prefix is read
        if len(payload) - offset - 4 < size:
            return True
        offset += 4 + size
    return False


_KNOWN_KEYS: Final = sorted(api_key_map)


def describe(result: Result) -> dict[str, Any]:
    return {
        "kind": result.case.kind,
        "detail": result.case.detail,
        "payload": result.case.payload.hex(),
        "client_port": result.client_port,
        "ending": result.ending.value,
    }
