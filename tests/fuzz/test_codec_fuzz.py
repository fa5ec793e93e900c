"""Structure-aware fuzzing of every body the gateway may decode, requests and responses.

Valid bodies (hypothesis, from kio's schemas) must walk to exactly their length, decode,
conform to their schema and encode back to the same bytes. Then every truncation and every
length lie at every offset of a valid frame is decoded in a child process capped at 1 GiB
of address space: a lie some decoder believes shows as that child dying, not as pytest dying.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.static.protocol import Entity

from fuzz.budget import Budget, run_examples
from fuzz.cases import DECODED_REQUESTS
from fuzz.entities import body_schemas, entities
from fuzz.shapes import conform
from fuzz.worker import DecodeWorker, WorkerDiedError
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.bounds import check_body
from quotagate.protocol.framing import with_size_prefix
from quotagate.protocol.headers import encode_request_header, encode_response_header

SCHEMAS = body_schemas()
KINDS_AND_KEYS = sorted({(kind, api_key) for kind, api_key, _, _ in SCHEMAS})

# Responses some stage decodes, splices or rewrites (the quota stages, broker addresses,
# ApiVersions); with DECODED_REQUESTS, what `make test` lies to. `make fuzz` lies to all.
DECODED_RESPONSES = frozenset(
    {
        api_keys.PRODUCE,
        api_keys.FETCH,
        api_keys.METADATA,
        api_keys.FIND_COORDINATOR,
        api_keys.API_VERSIONS,
        api_keys.CREATE_TOPICS,
        api_keys.DELETE_TOPICS,
        api_keys.CREATE_PARTITIONS,
        44,  # IncrementalAlterConfigs
        api_keys.DESCRIBE_CLUSTER,
    }
)


def frame_of(kind: str, api_key: int, version: int, body: bytes) -> bytes:
    if kind == "request":
        return with_size_prefix(encode_request_header(api_key, version, 7, "fuzz") + body)
    return with_size_prefix(encode_response_header(7, api_key, version) + body)


@pytest.mark.parametrize(("kind", "api_key"), KINDS_AND_KEYS)
def test_valid_bodies_walk_decode_and_round_trip(kind: str, api_key: int, budget: Budget) -> None:
    versions = api_table.modelled_versions(api_key)
    assert versions is not None
    schema_of = api_table.request_schema if kind == "request" else api_table.response_schema

    def round_trip(data: st.DataObject) -> None:
        schema: type[Entity] = schema_of(api_key, data.draw(st.sampled_from(versions)))
        body = codec.encode_body(data.draw(entities(schema)))
        assert check_body(schema, body, 0) == len(body)
        decoded = conform(codec.decode_body(schema, body, 0))
        assert codec.encode_body(decoded) == body

    # About one example a version under `make test`: every schema is still covered there.
    run_examples(round_trip, budget.round_trip_examples + len(versions), budget, "round_trip")


def _lied_to(budget: Budget) -> list[tuple[str, int, int, type[Entity]]]:
    if budget.fuzzing:
        return SCHEMAS
    return [
        entry
        for entry in SCHEMAS
        if (entry[0] == "request" and entry[1] in DECODED_REQUESTS)
        or (entry[0] == "response" and entry[1] in DECODED_RESPONSES)
    ]


def test_length_lies_in_every_field(budget: Budget, decode_worker: DecodeWorker) -> None:
    schemas = _lied_to(budget)
    totals = {"frames": 0, "cases": 0, "known_short_splice": 0}

    def lie(data: st.DataObject) -> None:
        kind, api_key, version, schema = data.draw(st.sampled_from(schemas))
        body = codec.encode_body(_as_sent(kind, api_key, data.draw(entities(schema))))
        report = decode_worker.check(kind, api_key, version, frame_of(kind, api_key, version, body))
        assert report["escapes"] == [], report["escapes"]
        totals["frames"] += 1
        totals["cases"] += report["cases"]
        totals["known_short_splice"] += report["known_short_splice"]

    run_examples(lie, budget.lie_frames, budget, "lies")
    print(f"length lies: {totals}")
    assert totals["cases"] > 0


def _as_sent(kind: str, api_key: int, entity: Any) -> Any:
    """``entity`` as a peer can send it: an ApiVersions UNSUPPORTED_VERSION answer is always
    a v0 body (KIP-511), so the gateway parses it as one; a flexible body with that error is
    not a frame any broker sends, and its lies would test nothing."""
    if (
        kind == "response"
        and api_key == api_keys.API_VERSIONS
        and entity.error_code == ErrorCode.unsupported_version
    ):
        return dataclasses.replace(entity, error_code=ErrorCode.none)
    return entity


def test_the_oracle_sees_a_missed_lie() -> None:
    """Without the bounds walk, the child must die on a lie in the topics count (kio asks
    for gigabytes): the harness notices a regression, and names the lie, instead of passing."""
    create_topics: Any = api_table.request_schema(api_keys.CREATE_TOPICS, 5)
    header = encode_request_header(api_keys.CREATE_TOPICS, 5, 7, "fuzz")
    frame = with_size_prefix(header + codec.encode_body(create_topics(topics=())))
    worker = DecodeWorker(without_bounds=True)
    try:
        topics_count = rf"uvarint \d+ over offset {len(header)}\n"
        with pytest.raises(WorkerDiedError, match=topics_count) as died:
            worker.check("request", api_keys.CREATE_TOPICS, 5, frame)
        assert "memory allocation of" in str(died.value)
        assert worker.returncode is not None and worker.returncode != 0
    finally:
        worker.close()
