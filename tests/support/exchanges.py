"""Hand-built exchanges for unit-testing stages without sockets (Kroxylicious' filter test
support at Python scale): a request frame from a kio body, the stages run in chain order, and
an upstream response fed back through them in reverse, as the connection would."""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from typing import Any

from quotagate.gateway import ConnectionInfo, Exchange, Outcome, Stage, StageChain
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.headers import parse_request_header
from quotagate.protocol.kio_nested import build, nested

NOW_MS = 1_700_000_000_000


def request_body(api_key: int, version: int, **fields: Any) -> Any:
    """A kio request body of any version from the fields that version has."""
    return build(api_table.request_schema(api_key, version), **fields)


def create_topics_request(
    version: int, topics: Sequence[tuple[str, int]], *, validate_only: bool = False
) -> Any:
    """CreateTopics asking for ``(name, partitions)`` each, replication factor 1."""
    schema = api_table.request_schema(api_keys.CREATE_TOPICS, version)
    topic_cls = nested(schema, "CreatableTopic")
    return build(
        schema,
        topics=tuple(
            build(
                topic_cls,
                name=name,
                num_partitions=count,
                replication_factor=1,
                assignments=(),
                configs=(),
            )
            for name, count in topics
        ),
        timeout=datetime.timedelta(seconds=30),
        validate_only=validate_only,
    )


def long_poll_fetch(topic: str, max_wait_ms: int) -> Any:
    """Fetch v4 of partition 0 from offset 0: on an empty partition it waits upstream for
    ``max_wait_ms``, so it stays in flight while a test does something else."""
    return request_body(
        api_keys.FETCH,
        4,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        topics=(
            build(
                nested(api_table.request_schema(api_keys.FETCH, 4), "FetchTopic"),
                topic=topic,
                partitions=(
                    build(
                        nested(api_table.request_schema(api_keys.FETCH, 4), "FetchPartition"),
                        partition=0,
                        fetch_offset=0,
                        partition_max_bytes=1 << 20,
                    ),
                ),
            ),
        ),
    )


def response_body(api_key: int, version: int, **fields: Any) -> Any:
    return build(api_table.response_schema(api_key, version), **fields)


def exchange(
    body: Any,
    *,
    client_id: str = "client",
    principal: str = "User:ANONYMOUS",
    now_ms: int = NOW_MS,
    connection_id: int = 1,
    correlation_id: int = 7,
) -> Exchange:
    """An exchange for ``body`` as the connection builds it when it reads the frame."""
    frame = codec.encode_request_frame(body, correlation_id, client_id)
    info = ConnectionInfo(connection_id, "PLAINTEXT", "PLAINTEXT", "127.0.0.1", 5555, principal)
    return Exchange(info, parse_request_header(frame), frame, now_ms, time.monotonic_ns())


def raw_exchange(
    frame: bytes,
    *,
    principal: str = "User:ANONYMOUS",
    now_ms: int = NOW_MS,
    connection_id: int = 1,
) -> Exchange:
    """An exchange for a request frame built by hand (versions kio does not model)."""
    info = ConnectionInfo(connection_id, "PLAINTEXT", "PLAINTEXT", "127.0.0.1", 5555, principal)
    return Exchange(info, parse_request_header(frame), frame, now_ms, time.monotonic_ns())


def chain(stages: Sequence[Stage]) -> StageChain:
    return StageChain(stages)


def run_request(stages: StageChain, ex: Exchange) -> int:
    """The request stages of its API in order, until one answers or closes; how many saw it."""
    seen = 0
    for stage in stages.request_stages(ex.api_key):
        seen += 1
        stage.on_request(ex)
        if ex.outcome is not Outcome.FORWARD:
            break
    return seen


def run_response(stages: StageChain, ex: Exchange, seen: int, body: Any = None) -> None:
    """The upstream's ``body`` (when forwarded) back through the stages that saw the request,
    in reverse; a locally answered request skips the stage that answered it."""
    if ex.outcome is Outcome.FORWARD:
        if isinstance(body, bytes):
            ex.response_frame = body  # a frame built by hand
        else:
            ex.response_frame = codec.encode_response_frame(body, ex.header.correlation_id)
        upto = seen
    else:
        upto = seen - 1
    for stage in stages.response_stages(ex.api_key, upto):
        stage.on_response(ex)


def sent_request(ex: Exchange) -> Any:
    """The request as the gateway forwards it (after any stage rewrote it)."""
    header = parse_request_header(ex.request_frame)
    return codec.decode_request(ex.request_frame, header)


def sent_response(ex: Exchange) -> Any:
    """The response as the client receives it."""
    assert ex.response_frame is not None
    return codec.decode_response(ex.response_frame, ex.api_key, ex.api_version)
