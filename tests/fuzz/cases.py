"""Hostile connections: what one fuzz case sends, and what it saw the gateway do.

A case is one TCP connection carrying one payload: raw random bytes, a valid request with a
length lie (from :mod:`fuzz.lies`), a request with a random body, a size prefix that lies, or
the issue's frame. :func:`run_case` sends it and reports how the connection ended; what the
gateway must have logged for it is checked by the tests against the gateway's log.
"""

from __future__ import annotations

import errno
import random
import re
import socket
import struct
import threading
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
from fuzz.worker import DecodeWorker
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.api_versions_body import parse_api_versions
from quotagate.protocol.framing import DEFAULT_MAX_FRAME_BYTES, with_size_prefix
from quotagate.protocol.headers import encode_request_header, response_correlation_id

# The issue's bytes, exactly as filed: the size prefix says 19 although 20 bytes follow, so
# the gateway sees a topics varint cut short and one stray byte after the frame.
ISSUE_FRAME: Final = bytes.fromhex("00000013001300050000000100046576696c008080808040")
# The same request with the size it meant: the topics count claims 2^34 - 1 entries.
ISSUE_FRAME_SIZED: Final = with_size_prefix(ISSUE_FRAME[4:])
# CreateTopics v5 whose topics array is null: kio decoded it as None (regression).
NULL_TOPICS_FRAME: Final = with_size_prefix(
    encode_request_header(api_keys.CREATE_TOPICS, 5, 2, "null") + b"\x00" + bytes(4) + b"\x00\x00"
)

_KNOWN_KEYS: Final = sorted(api_key_map)

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
    api_keys.DESCRIBE_CONFIGS,  # the gateway's own configs listed
    api_keys.INCREMENTAL_ALTER_CONFIGS,  # thresholds, tenant rules, exempt principals
    api_keys.DESCRIBE_CLIENT_QUOTAS,
    api_keys.ALTER_CLIENT_QUOTAS,
)


class Ending(Enum):
    CLOSED = "closed"  # the gateway closed (FIN or RST): it must have logged why
    ANSWERED = "answered"  # a complete response arrived; the client hung up itself
    PENDING = "pending"  # forwarded and still waiting upstream (a long poll); client hung up


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


def run_case(address: tuple[str, int], case: Case, patience_s: float = 3.0) -> Result:
    """Send ``case`` on a new connection; wait until the gateway closes it or answers.

    A request that reached the upstream intact may wait there (a fetch's ``max_wait``, a
    join-group): after ``patience_s`` without a close or an answer the client hangs up and
    the case counts as pending. That only ever spares a check, it never fails one.
    """
    with socket.create_connection(address, timeout=30) as sock:
        port = sock.getsockname()[1]
        try:
            sock.sendall(case.payload)
            if case.truncated:
                sock.shutdown(socket.SHUT_WR)
            sock.settimeout(patience_s)
            ending = _await_ending(sock)
        except (ConnectionResetError, BrokenPipeError):
            ending = Ending.CLOSED
        except TimeoutError:
            ending = Ending.PENDING
        except OSError as exc:
            if exc.errno != errno.ENOTCONN:  # half-closing a connection the peer had reset
                raise
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


class Bystander:
    """A well-behaved client connection kept open across the fuzzing: it must not notice."""

    def __init__(self, address: tuple[str, int]) -> None:
        self._sock = socket.create_connection(address, timeout=30)
        self._correlation_id = 0

    def api_versions(self) -> int:
        """Send an ApiVersions v3 request; the error code of the answer."""
        self._correlation_id += 1
        request = api_table.request_schema(api_keys.API_VERSIONS, 3)(  # type: ignore[call-arg]
            client_software_name="bystander", client_software_version="1"
        )
        self._sock.sendall(codec.encode_request_frame(request, self._correlation_id, "bystander"))
        size = struct.unpack(">i", self._read(4))[0]
        frame = struct.pack(">i", size) + self._read(size)
        assert response_correlation_id(frame) == self._correlation_id
        return parse_api_versions(frame, 3).error_code

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self._sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("the gateway closed the bystander's connection")
            data += chunk
        return data

    def close(self) -> None:
        self._sock.close()


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


# tansu creates whatever a CreateTopics asks, validate_only or not and without KRaft's cap of
# 10 000 records per request: one request for 2^31 - 1 partitions grows it by ~100 MB/s until
# the host is out of memory. Such a request is well-formed, so the gateway forwards it (and
# KIP-599 admits the request that empties the bucket): a lie that turns a valid request into
# one is kept away from the shared broker. That the gateway lets it through is reported with
# the suite, not asserted here.
MAX_UPSTREAM_PARTITIONS: Final = 1000

# tansu keeps a topic's records under a storage path made of its name and takes any name:
# creating "live-x/" reset topic live-x to empty, and deleting a topic named "" (created by
# an earlier case, or auto-created by a Metadata request) emptied every topic, the live test's
# too (found by the live test: 3 991 acknowledged messages gone, the consumer waiting for
# them). Kafka refuses such names (INVALID_TOPIC_EXCEPTION) and the gateway, which leaves
# topic validation to the broker, forwards them: a request naming one is kept away from the
# shared broker, like the partition floods above. Kafka's rule (Topic.validate):
LEGAL_TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]{1,249}")
# Requests that make tansu create (Metadata and Produce auto-create) or delete a topic.
_NAMING_TOPICS: Final = frozenset(
    {api_keys.PRODUCE, api_keys.METADATA, api_keys.CREATE_TOPICS, api_keys.DELETE_TOPICS}
)


def legal_topic_name(name: str) -> bool:
    return LEGAL_TOPIC_NAME.fullmatch(name) is not None and name not in (".", "..")


class UpstreamGuard:
    """Says whether a payload is safe to let through to tansu (decoding it in the child)."""

    def __init__(self, worker: DecodeWorker) -> None:
        self._worker = worker
        self._lock = threading.Lock()
        self.withheld = 0
        """Cases withheld, for either reason."""
        self.withheld_names = 0
        """Of those, cases naming a topic Kafka would refuse."""

    def safe(self, payload: bytes) -> bool:
        api_key = struct.unpack_from(">h", payload, 4)[0] if len(payload) >= 6 else None
        if api_key not in _NAMING_TOPICS:
            return True
        frame = payload[: 4 + max(struct.unpack_from(">i", payload)[0], 0)]
        with self._lock:
            names = self._worker.topic_names(frame)
            creates = api_key == api_keys.CREATE_TOPICS
            partitions = self._worker.partitions_created(frame) if creates else 0
        if not all(legal_topic_name(name) for name in names):
            self.withheld += 1
            self.withheld_names += 1
            return False
        if partitions > MAX_UPSTREAM_PARTITIONS:
            self.withheld += 1
            return False
        return True


class CaseMaker:
    """Draws fuzz cases of every kind from a seeded generator and a pool of valid frames."""

    def __init__(
        self, frames: Sequence[bytes], rng: random.Random, guard: UpstreamGuard | None = None
    ) -> None:
        self._frames = frames
        self._rng = rng
        self._guard = guard
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
        while True:
            case = self._rng.choice(self._kinds)()
            if self._guard is None or self._guard.safe(case.payload):
                return case

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


def describe(result: Result) -> dict[str, Any]:
    return {
        "kind": result.case.kind,
        "detail": result.case.detail,
        "payload": result.case.payload.hex(),
        "client_port": result.client_port,
        "ending": result.ending.value,
    }
