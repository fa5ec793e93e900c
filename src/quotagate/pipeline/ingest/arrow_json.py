"""KIP-673 JSON request-log bodies parsed in bulk: the bodies of a block become one
newline-delimited JSON buffer read by ``pyarrow.json`` (C++) with an explicit schema of the
few fields the usage events need; the facts follow with whole-array kernels.

This is ``ingest_json`` (the Python reference) for the bodies a broker writes. A body
that is not read here exactly as the reference would read it is handed back, by row, for
the reference to parse: one the JSON reader rejects (invalid JSON, a field of another
type, a key twice), one missing a field the reference would fail on, one with a
``recordsSizeInBytes`` where this reader does not look, a mutation whose results do not
name the request's topics in order, a request a broker forwarded (``isForwarded``).
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from quotagate.pipeline.ingest.arrays import (
    BoolArray,
    IntArray,
    as_bool,
    list_counts,
    list_sums,
    offsets_of,
    parents_of,
    slice_rows,
    with_values,
)
from quotagate.quota import request_rules as rules

_I: Final = pa.int64()
_S: Final = pa.string()
_SIZES: Final = pa.list_(pa.struct([("recordsSizeInBytes", _I)]))
_RESULTS: Final = pa.list_(
    pa.struct([("name", _S), ("errorCode", _I), ("numPartitions", _I), ("partitions", _SIZES)])
)
_RESULT_LISTS: Final = ("topics", "responses", "results")
SCHEMA: Final = pa.schema(
    [
        (
            "requestHeader",
            pa.struct([("requestApiKey", _I), ("requestApiVersion", _I), ("clientId", _S)]),
        ),
        (
            "request",
            pa.struct(
                [
                    ("acks", _I),
                    (
                        "topicData",
                        pa.list_(
                            pa.struct([("name", _S), ("topicId", _S), ("partitionData", _SIZES)])
                        ),
                    ),
                    ("replicaState", pa.struct([("replicaId", _I)])),
                    ("replicaId", _I),
                    (
                        "topics",
                        pa.list_(
                            pa.struct(
                                [
                                    ("name", _S),
                                    ("numPartitions", _I),
                                    ("assignments", pa.list_(pa.struct([("brokerIds", _SIZES)]))),
                                ]
                            )
                        ),
                    ),
                    ("topicNames", pa.list_(_S)),
                    ("validateOnly", pa.bool_()),
                ]
            ),
        ),
        ("response", pa.struct([(name, _RESULTS) for name in _RESULT_LISTS])),
        ("isForwarded", pa.bool_()),
        ("connection", _S),
        ("principal", _S),
        ("listener", _S),
        ("totalTimeMs", pa.float64()),
        ("localTimeMs", pa.float64()),
        ("throttleTimeMs", pa.float64()),
    ]
)
_OPTIONS: Final = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore")
_SIZE_KEY: Final = '"recordsSizeInBytes"'
_NUMBERS: Final = ("totalTimeMs", "localTimeMs", "throttleTimeMs")


@dataclass(slots=True)
class Parsed:
    """The facts of the rows ``ok`` marks (every array has one entry per such row)."""

    ok: BoolArray
    api_key: pa.Array
    api_version: pa.Array
    client_id: pa.Array
    principal: pa.Array
    listener: pa.Array
    connection: pa.Array
    total_ms: np.ndarray
    local_ms: np.ndarray
    throttle_ms: np.ndarray
    """Whole milliseconds, as floats: whether they fit an int32 is decided with the rest."""
    request_bytes: IntArray
    response_bytes: IntArray
    topics: pa.Array
    partition_mutations: IntArray
    acks: pa.Array
    follower: BoolArray
    validate_only: BoolArray


def parse_json_bodies(lines: pa.Array, chosen: IntArray, start: IntArray, stop: IntArray) -> Parsed:
    """The KIP-673 bodies at bytes ``[start, stop)`` of the ``chosen`` rows of ``lines``
    (one entry of ``start``/``stop`` per chosen row), each followed in its line by at least
    one byte (the logger's suffix)."""
    document, readable, all_keys_read = _read(lines, chosen, start, stop)
    if all_keys_read:
        return _facts(document, readable)
    # The buffer's count did not settle it: count row by row.
    counts = pc.count_substring(lines.take(pa.array(chosen)), _SIZE_KEY)
    return _facts(document, readable, np.asarray(counts.to_numpy(), np.int64))


def _read(
    lines: pa.Array, chosen: IntArray, start: IntArray, stop: IntArray
) -> tuple[pa.Table, BoolArray, bool]:
    """Every body read (a row of nulls where it could not be), which could, and whether
    every ``recordsSizeInBytes`` key of the bodies is known to be one read. A buffer the
    reader rejects is halved until the bodies it rejects are found."""
    readable = np.ones(len(chosen), np.bool_)
    tables: list[pa.Table] = []
    pending = [np.arange(len(chosen))]
    keys: int | None = None
    while pending:
        part = pending.pop()
        read = _read_ndjson(lines, chosen[part], start[part], stop[part])
        if read is not None:
            table, keys = read
            tables.append(table.append_column("_row", pa.array(part)))
        elif len(part) == 1:
            readable[part] = False
        else:
            half = len(part) // 2
            pending += [part[half:], part[:half]]
    if len(tables) == 1 and readable.all():
        document = tables[0].drop_columns(["_row"])
        return document, readable, keys is not None and _all_read(document, keys)
    missing = np.flatnonzero(~readable)
    tables.append(_nulls(len(missing)).append_column("_row", pa.array(missing)))
    merged = pa.concat_tables(tables)
    merged = merged.take(pc.sort_indices(merged["_row"]))
    return merged.drop_columns(["_row"]), readable, False


def _all_read(document: pa.Table, keys: int) -> bool:
    """Whether the buffer's ``keys`` (written with no escaped character) are all read:
    each key read is then one written in its body, so equal totals mean equal counts in
    every body."""
    return int(_keys_read(document).sum()) == keys


def _nulls(count: int) -> pa.Table:
    return pa.table({f.name: pa.nulls(count, f.type) for f in SCHEMA}, schema=SCHEMA)


def _read_ndjson(
    lines: pa.Array, rows: IntArray, start: IntArray, stop: IntArray
) -> tuple[pa.Table, int | None] | None:
    """The bodies as one newline-delimited JSON buffer, read, with the buffer's count of
    size keys (None if the buffer has an escaped character); None if the reader refuses
    the buffer or does not read exactly one document per body."""
    if len(rows) == 0:
        return _nulls(0), 0
    # Each body with the byte after it (the suffix's blank), which becomes its line end.
    offsets, data = offsets_of(slice_rows(lines, start, stop + 1, rows))
    buffer = data[offsets[0] : offsets[-1]].copy()
    buffer[offsets[1:] - offsets[0] - 1] = ord("\n")
    text = buffer.tobytes()
    try:
        table = pj.read_json(
            io.BytesIO(text),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(text))),
            parse_options=_OPTIONS,
        )
    except pa.ArrowInvalid:
        return None
    if table.num_rows != len(rows):
        return None
    return table, None if b"\\" in text else text.count(_SIZE_KEY.encode())


def _facts(doc: pa.Table, readable: BoolArray, keys: IntArray | None = None) -> Parsed:
    """The facts of the bodies read; ``keys``: how many ``recordsSizeInBytes`` each body
    holds (unchecked when None: the whole buffer's count matched)."""
    header = doc["requestHeader"].combine_chunks()
    request = doc["request"].combine_chunks()
    response = doc["response"].combine_chunks()
    api_key = pc.struct_field(header, "requestApiKey")
    api_version = pc.struct_field(header, "requestApiVersion")
    numbers = {name: doc[name].combine_chunks() for name in _NUMBERS}
    principal = doc["principal"].combine_chunks()
    ok = readable.copy()
    for required in (api_key, api_version, principal, *numbers.values()):
        ok &= as_bool(pc.is_valid(required))
    # A request a broker forwarded to the controller: the reference says what it is.
    ok &= ~as_bool(doc["isForwarded"].combine_chunks())
    key = np.asarray(pc.fill_null(api_key, -1).to_numpy(), np.int64)

    topic_data = pc.struct_field(request, "topicData")
    partition_data = pc.struct_field(pc.list_flatten(topic_data), "partitionData")
    topic_sizes = list_sums(partition_data, pc.struct_field(pc.list_flatten(partition_data), 0))
    response_bytes = np.zeros(len(doc), np.int64)
    for name in _RESULT_LISTS:
        results = pc.struct_field(response, name)
        partitions = pc.struct_field(pc.list_flatten(results), "partitions")
        sizes = pc.struct_field(pc.list_flatten(partitions), 0)
        response_bytes += list_sums(results, list_sums(partitions, sizes))
    if keys is not None:
        # Every recordsSizeInBytes in the body must be one read here: the reference sums
        # them wherever they are under the node it reads.
        ok &= keys == _keys_read(doc)

    produce = key == rules.PRODUCE
    items = pc.list_flatten(topic_data)
    names = [_nonempty(pc.struct_field(items, field)) for field in ("name", "topicId")]
    topic = pa.StructArray.from_arrays(
        [pc.coalesce(*names, ""), pa.array(topic_sizes, pa.int64())],
        names=["topic", "bytes"],
    )
    topics = with_values(topic_data, topic, keep=produce)
    ok &= _no_null_items(topic_data) | ~produce
    request_bytes = np.where(produce, list_sums(topic_data, pa.array(topic_sizes)), 0)
    acks = pc.if_else(pa.array(produce), pc.struct_field(request, "acks"), pa.nulls(len(doc), _I))

    fetch = key == rules.FETCH
    state = pc.struct_field(request, "replicaState")
    replica = pc.if_else(
        pc.is_valid(state),
        pc.struct_field(state, "replicaId"),
        pc.struct_field(request, "replicaId"),
    )
    follower = fetch & as_bool(pc.greater_equal(replica, 0))
    response_bytes = np.where(fetch, response_bytes, 0)

    mutation = np.isin(key, sorted(rules.MUTATION_APIS)) & as_bool(pc.is_valid(request))
    mutations, mutations_ok = _mutations(key, request, response, mutation)
    ok &= mutations_ok
    validate_only = mutation & as_bool(pc.struct_field(request, "validateOnly"))

    keep = pa.array(ok)

    def kept(array: pa.Array) -> pa.Array:
        return pc.filter(array, keep)

    def kept_numbers(name: str) -> np.ndarray[Any, np.dtype[np.float64]]:
        return np.asarray(pc.fill_null(numbers[name], 0.0).to_numpy(), np.float64)[ok]

    return Parsed(
        ok=ok,
        api_key=kept(api_key),
        api_version=kept(api_version),
        client_id=kept(pc.fill_null(pc.struct_field(header, "clientId"), "")),
        principal=kept(principal),
        listener=kept(pc.fill_null(doc["listener"].combine_chunks(), "")),
        connection=kept(pc.fill_null(doc["connection"].combine_chunks(), "")),
        total_ms=kept_numbers("totalTimeMs"),
        local_ms=kept_numbers("localTimeMs"),
        throttle_ms=np.trunc(kept_numbers("throttleTimeMs")),
        request_bytes=request_bytes[ok],
        response_bytes=response_bytes[ok],
        topics=kept(topics),
        partition_mutations=mutations[ok],
        acks=kept(acks),
        follower=follower[ok],
        validate_only=validate_only[ok],
    )


def _nonempty(texts: pa.Array) -> pa.Array:
    """Null where empty: Python's ``or`` passes over "" as over None."""
    return pc.if_else(pc.equal(texts, ""), pa.nulls(len(texts), _S), texts)


def _valid_counts(lists: pa.Array) -> IntArray:
    """Per row, how many of its list's structs have a non-null first field."""
    values = pc.struct_field(pc.list_flatten(lists), 0)
    return list_sums(lists, pc.cast(pc.is_valid(values), pa.int64()))


def _keys_read(doc: pa.Table) -> IntArray:
    """Per body, the ``recordsSizeInBytes`` values read (where the reader looks)."""
    request = doc["request"].combine_chunks()
    response = doc["response"].combine_chunks()
    topic_data = pc.struct_field(request, "topicData")
    partition_data = pc.struct_field(pc.list_flatten(topic_data), "partitionData")
    found = list_sums(topic_data, _valid_counts(partition_data))
    for name in _RESULT_LISTS:
        results = pc.struct_field(response, name)
        partitions = pc.struct_field(pc.list_flatten(results), "partitions")
        found += list_sums(results, _valid_counts(partitions))
    return found


def _mutations(
    key: IntArray, request: pa.StructArray, response: pa.StructArray, mutation: BoolArray
) -> tuple[IntArray, BoolArray]:
    """Partitions created or deleted, as ``ingest_json._mutations`` counts them, where the
    results list the request's topics in the request's order, each once (a broker's do);
    rows where they do not are handed back."""
    rows = len(key)
    results = _chosen_results(response)
    says = as_bool(pc.is_valid(response)) & as_bool(pc.is_valid(results))
    create = key == rules.CREATE_TOPICS
    topics = pc.struct_field(request, "topics")
    topic_names = pc.struct_field(request, "topicNames")
    topic_items = pc.list_flatten(topics)
    by_topics = with_values(topics, pc.struct_field(topic_items, "name"))
    by_names = (list_counts(topic_names) > 0) & ~create
    names = pc.if_else(pa.array(by_names), topic_names, by_topics)
    result_items = pc.list_flatten(results)
    result_parents = parents_of(results)
    error = pc.fill_null(pc.struct_field(result_items, "errorCode"), 0)
    succeeded = as_bool(pc.equal(error, 0))
    # The reference skips entries that are not objects: handed back.
    name_counts = list_counts(names)
    # A request that names no topic counts none, whatever its response says.
    nameless = name_counts == 0
    ok = _no_null_items(topics) & (_no_null_items(results) | nameless)
    aligned = says & (name_counts == list_counts(results))
    left = pc.filter(pc.list_flatten(names), pa.array(aligned[parents_of(names)]))
    right_rows = aligned[result_parents]
    right = pc.filter(pc.struct_field(result_items, "name"), pa.array(right_rows))
    same = as_bool(
        pc.or_kleene(pc.equal(left, right), pc.and_(pc.is_null(left), pc.is_null(right)))
    )
    differing = parents_of(names)[aligned[parents_of(names)]][~same]
    aligned[differing] = False
    aligned &= _no_repeated_names(pc.struct_field(result_items, "name"), result_parents, rows)
    ok &= ~(mutation & says) | aligned | nameless
    succeeded_count = np.bincount(result_parents, weights=succeeded, minlength=rows)
    others = np.where(says & ~nameless, succeeded_count.astype(np.int64), name_counts)
    created = _created(
        topic_items,
        parents_of(topics),
        result_items,
        succeeded,
        aligned & create,
        result_parents,
        rows,
    )
    counted = np.where(create, created, others)
    return np.where(mutation, counted, 0), ok | ~mutation


def _chosen_results(response: pa.StructArray) -> pa.Array:
    """``response.topics or response.responses or response.results``, as Python's ``or``
    picks among them (the last whatever it is when neither before is a non-empty list)."""
    lists = [pc.struct_field(response, name) for name in _RESULT_LISTS]
    chosen = lists[2]
    for candidate in reversed(lists[:2]):
        nonempty = pc.greater(pc.fill_null(pc.list_value_length(candidate), 0), 0)
        chosen = pc.if_else(nonempty, candidate, chosen)
    return chosen


def _no_null_items(lists: pa.Array) -> BoolArray:
    items = pc.list_flatten(lists)
    null_item = ~as_bool(pc.is_valid(items))
    counts = np.bincount(parents_of(lists)[null_item], minlength=len(lists))
    return np.asarray(counts == 0, np.bool_)


def _no_repeated_names(names: pa.Array, parents: IntArray, rows: int) -> BoolArray:
    """Rows whose results name no topic twice (the reference's dict keeps the last)."""
    ok = np.ones(rows, np.bool_)
    if len(names) == 0:
        return ok
    table = pa.table({"row": pa.array(parents), "name": names})
    counted = table.group_by(["row", "name"], use_threads=False).aggregate([("row", "count")])
    repeats = np.asarray(counted["row_count"].to_numpy(), np.int64) > 1
    ok[np.asarray(counted["row"].to_numpy(), np.int64)[repeats]] = False
    return ok


def _created(
    topics: pa.Array,
    topic_parents: IntArray,
    results: pa.Array,
    succeeded: BoolArray,
    aligned: BoolArray,
    result_parents: IntArray,
    rows: int,
) -> IntArray:
    """CreateTopics: per topic that succeeded (every topic where the response does not
    say), the partitions the response reports, else the request's assignments or
    numPartitions; -1 and 0 count as 1. ``aligned``: rows whose results are the request's
    topics in order, one each."""
    assigned = list_counts(pc.struct_field(topics, "assignments"))
    requested = np.asarray(
        pc.fill_null(pc.struct_field(topics, "numPartitions"), -1).to_numpy(), np.int64
    )
    from_request = np.where(assigned > 0, assigned, requested)
    reported = np.full(len(topics), -1, np.int64)
    topic_ok = np.ones(len(topics), np.bool_)
    mine, theirs = aligned[topic_parents], aligned[result_parents]
    partitions = np.asarray(
        pc.fill_null(pc.struct_field(results, "numPartitions"), -1).to_numpy(), np.int64
    )[theirs]
    reported[mine] = np.where(partitions == 0, -1, partitions)
    topic_ok[mine] = succeeded[theirs]
    count = np.where(reported <= 0, from_request, reported)
    per_topic = np.where(topic_ok, np.maximum(count, 1), 0)
    return np.bincount(topic_parents, weights=per_topic, minlength=rows).astype(np.int64)
