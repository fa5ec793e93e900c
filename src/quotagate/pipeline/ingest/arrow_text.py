"""Kafka 2.x text request-log bodies parsed with whole-array kernels: RE2 through
``pyarrow.compute`` for the regular expressions of ``ingest_text`` (the Python reference),
numpy for the cuts between them.

The bodies come from ASCII lines, where RE2 and Python's ``re`` agree on ``\\w``, ``\\d``
and ``\\b``; ``\\s`` is spelt out as Python knows it. Lookaheads (which RE2 lacks) become
the equivalent consumed text. A body this does not read as the reference would (no
header, an unknown API, more than one `` from connection ``, a metric that is no plain
number, no principal) is handed back, by row, to the reference.
"""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from quotagate.pipeline import apis
from quotagate.pipeline.ingest.arrays import (
    as_bool,
    find,
    found,
    group,
    integers_after,
    lengths,
    list_counts,
    list_sums,
    parents_of,
    slice_rows,
)
from quotagate.pipeline.ingest.arrow_json import Parsed
from quotagate.quota import request_rules as rules

_SPACE: Final = r"\t\n\x0b\x0c\r \x1c-\x1f"  # Python's \s in ASCII text
_HEADER: Final = (
    r"^(?P<all>RequestHeader\(apiKey=(?P<key>\w+), apiVersion=(?P<version>-?\d+), "
    r"clientId=(?P<client>.*?), correlationId=-?\d+(?:, headerVersion=\d+)?\) -- )"
)
_CONNECTION: Final = " from connection "
_NUMBER: Final = r"^-?\d+(?:\.\d+)?$"
_PARTITION_SIZE: Final = rf"([^\[\],={{}}{_SPACE}]+)-(\d+)=(\d+)"
_TOPIC_NAME: Final = rf"(?:\bname|\btopic)=['\"]?[^,'\"){_SPACE}]+"
_API_NAMES: Final = pa.array(list(apis.API_NAMES))
_LONG_NUMBER: Final = r"\d{16}"
_API_KEYS: Final = pa.array(list(apis.API_NAMES.values()), pa.int64())


def parse_text_bodies(
    lines: pa.Array, chosen: np.ndarray, start: np.ndarray, stop: np.ndarray
) -> Parsed:
    """The text-format bodies at bytes ``[start, stop)`` of the ``chosen`` rows of
    ``lines`` (one entry of ``start``/``stop`` per chosen row)."""
    rows = len(chosen)
    body = pc.cast(slice_rows(lines, start, stop, chosen), pa.string())
    size = lengths(body)
    zero = np.zeros(rows, np.int64)
    # The header regex on the body up to its first ") -- ": its lazy client id finds the
    # same end there as in the whole body, at a fraction of the cost.
    header_cut = find(body, ") -- ")
    header = pc.extract_regex(
        slice_rows(body, zero, np.where(header_cut < 0, 0, header_cut + 5)), _HEADER
    )
    ok = as_bool(pc.is_valid(header))
    # A number of 16 digits or more may not fit its column or a float: the reference
    # decides, exactly (no broker writes one).
    ok &= ~as_bool(pc.match_substring_regex(body, _LONG_NUMBER))
    name = pc.fill_null(pc.struct_field(header, "key"), "")
    index = pc.index_in(name, value_set=_API_NAMES)
    ok &= as_bool(pc.is_valid(index))
    api_key = pc.take(_API_KEYS, pc.fill_null(index, 0))
    key = np.asarray(api_key.to_numpy(), np.int64)
    header_end = lengths(pc.fill_null(pc.struct_field(header, "all"), ""))
    at = find(body, _CONNECTION)
    ok &= at >= header_end
    rest = slice_rows(body, at + len(_CONNECTION), np.where(at < 0, 0, size))
    ok &= find(rest, _CONNECTION) < 0  # the reference cuts at the last one: there is one
    semicolon = find(rest, ";")
    rest_size = lengths(rest)
    connection = slice_rows(rest, zero, np.where(semicolon < 0, rest_size, semicolon))
    metrics = slice_rows(rest, np.where(semicolon < 0, rest_size, semicolon + 1), rest_size)
    principal, listener, found_principal = _principal(metrics)
    ok &= found_principal
    times = {}
    for metric in ("totalTime", "localTime", "throttleTime"):
        value = group(metrics, rf"(?:^|,){metric}:(?P<v>-?[\d.]+)(?:,|$)", "v")
        ok &= as_bool(pc.match_substring_regex(value, _NUMBER))
        times[metric] = np.asarray(
            pc.cast(pc.if_else(pa.array(ok), value, "0"), pa.float64()).to_numpy(), np.float64
        )
    exchange = slice_rows(body, header_end, np.maximum(at, header_end))
    split = found(exchange, ",response[:=]")
    exchange_size = lengths(exchange)
    request = slice_rows(exchange, zero, np.where(split < 0, exchange_size, split))
    response = slice_rows(exchange, np.where(split < 0, exchange_size, split + 10), exchange_size)

    # What only some APIs need is found in their rows only.
    produce = np.flatnonzero(ok & (key == rules.PRODUCE))
    produce_request = request.take(pa.array(produce))
    topics = _spread_lists(_produce_topics(produce_request), produce, rows)
    request_bytes = list_sums(topics, pc.struct_field(pc.list_flatten(topics), "bytes"))
    acks = np.zeros(rows, np.int64)
    has_acks = np.zeros(rows, np.bool_)
    found_acks = pc.cast(group(produce_request, r"\backs=(?P<v>-?\d+)", "v"), pa.int64())
    acks[produce] = np.asarray(pc.fill_null(found_acks, 0).to_numpy(), np.int64)
    has_acks[produce] = as_bool(pc.is_valid(found_acks))

    fetch = np.flatnonzero(ok & (key == rules.FETCH))
    response_bytes = np.zeros(rows, np.int64)
    records = integers_after(response.take(pa.array(fetch)), r"Records\(size=", r"\d+")
    response_bytes[fetch] = list_sums(records)
    replica = pc.cast(
        group(request.take(pa.array(fetch)), r"\breplicaId=(?P<v>-?\d+)", "v"), pa.int64()
    )
    follower = np.zeros(rows, np.bool_)
    follower[fetch] = as_bool(pc.greater_equal(replica, 0))

    mutation = np.flatnonzero(ok & np.isin(key, sorted(rules.MUTATION_APIS)))
    mutation_request = request.take(pa.array(mutation))
    mutations = np.zeros(rows, np.int64)
    mutations[mutation] = _mutations(
        key[mutation], mutation_request, response.take(pa.array(mutation))
    )
    validate_only = np.zeros(rows, np.bool_)
    validate_only[mutation] = as_bool(pc.match_substring(mutation_request, "validateOnly=true"))

    keep = pa.array(ok)

    def kept(array: pa.Array) -> pa.Array:
        return pc.filter(array, keep)

    return Parsed(
        ok=ok,
        api_key=kept(api_key),
        api_version=pc.cast(kept(pc.struct_field(header, "version")), pa.int64()),
        client_id=kept(pc.struct_field(header, "client")),
        principal=kept(principal),
        listener=kept(listener),
        connection=kept(pc.cast(connection, pa.string())),
        total_ms=times["totalTime"][ok],
        local_ms=times["localTime"][ok],
        throttle_ms=np.trunc(times["throttleTime"][ok]),
        request_bytes=request_bytes[ok],
        response_bytes=response_bytes[ok],
        topics=kept(topics),
        partition_mutations=mutations[ok],
        acks=pa.array(acks[ok], mask=~has_acks[ok]),
        follower=follower[ok],
        validate_only=validate_only[ok],
    )


def _principal(metrics: pa.Array) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """As ``,principal:(.*?),listener:(.*?)(?:,clientInformation:|,|$)`` finds them: the
    principal up to the first ``,listener:`` after the first ``,principal:``, the listener
    up to the next comma or the end; and where both were found."""
    size = lengths(metrics)
    begin = find(metrics, ",principal:")
    after = slice_rows(metrics, begin + 11, np.where(begin < 0, 0, size))
    listener_at = find(after, ",listener:")
    found_both = (begin >= 0) & (listener_at >= 0)
    zero = np.zeros(len(size), np.int64)
    principal = slice_rows(after, zero, np.where(found_both, listener_at, 0))
    tail = slice_rows(after, listener_at + 10, np.where(found_both, lengths(after), 0))
    comma = find(tail, ",")
    listener = slice_rows(tail, zero, np.where(comma < 0, lengths(tail), comma))
    return principal, listener, found_both


def _spread_lists(lists: pa.ListArray, rows: np.ndarray, count: int) -> pa.ListArray:
    """``lists`` (one per row of ``rows``) placed at those rows of ``count``, empty elsewhere."""
    counts = np.zeros(count, np.int64)
    counts[rows] = list_counts(lists)
    offsets = np.zeros(count + 1, np.int64)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), pc.list_flatten(lists))


def _produce_topics(request: pa.Array) -> pa.Array:
    """Bytes per topic from ``partitionSizes=`` (TRACE only), topics in order of first
    mention: every ``topic-partition=bytes`` after it, as ``re.findall`` finds them."""
    rows = len(request)
    begin = find(request, "partitionSizes=")
    chosen = begin >= 0
    tail = slice_rows(
        request, np.where(chosen, begin + 15, 0), np.where(chosen, lengths(request), 0)
    )
    # Each match becomes "\x00topic\x01bytes\x02": the pieces after each "\x00" hold one.
    marked = pc.replace_substring_regex(tail, _PARTITION_SIZE, "\x00\\1\x01\\3\x02")
    pieces = pc.split_pattern(marked, "\x00")
    flat = pc.list_flatten(pieces)
    parents = parents_of(pieces)
    found_match = pc.extract_regex(flat, "^(?P<topic>[^\x01]*)\x01(?P<bytes>\\d+)\x02")
    first_piece = np.zeros(len(flat), np.bool_)
    counts = list_counts(pieces)
    first_piece[(np.cumsum(counts) - counts)[counts > 0]] = True
    keep = ~first_piece & as_bool(pc.is_valid(found_match))
    matches = pc.filter(found_match, pa.array(keep))
    table = pa.table(
        {
            "row": pa.array(parents[keep]),
            "seq": pa.array(np.arange(int(keep.sum()))),
            "topic": pc.struct_field(matches, "topic"),
            "bytes": pc.cast(pc.struct_field(matches, "bytes"), pa.int64()),
        }
    )
    totals = table.group_by(["row", "topic"], use_threads=False).aggregate(
        [("bytes", "sum"), ("seq", "min")]
    )
    totals = totals.sort_by([("row", "ascending"), ("seq_min", "ascending")])
    per_row = np.bincount(np.asarray(totals["row"].to_numpy(), np.int64), minlength=rows)
    offsets = np.zeros(rows + 1, np.int64)
    np.cumsum(per_row, out=offsets[1:])
    values = pa.StructArray.from_arrays(
        [
            totals["topic"].combine_chunks().cast(pa.string()),
            totals["bytes_sum"].combine_chunks().cast(pa.int32()),
        ],
        names=["topic", "bytes"],
    )
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)


def _mutations(key: np.ndarray, request: pa.Array, response: pa.Array) -> np.ndarray:
    """As ``ingest_text._mutations``: partitions for CreateTopics, one per topic otherwise,
    only for topics whose result carries error code 0 (when the response says)."""
    rows = len(key)
    errors = integers_after(response, r"(?:errorCode|error_code)=")
    error_counts = list_counts(errors)
    error_values = np.asarray(pc.list_flatten(errors).to_numpy(), np.int64)
    error_parents = parents_of(errors)
    partitions = integers_after(request, r"(?:numPartitions|num_partitions)=")
    partition_counts = list_counts(partitions)
    counts = np.maximum(np.asarray(pc.list_flatten(partitions).to_numpy(), np.int64), 1)
    partition_parents = parents_of(partitions)
    paired = error_counts == partition_counts
    # Where the counts are equal the two flattened lists line up element by element.
    pair_errors = error_values[paired[error_parents]]
    pair_counts = counts[paired[partition_parents]]
    pair_parents = partition_parents[paired[partition_parents]]
    succeeded = np.bincount(
        pair_parents, weights=np.where(pair_errors == 0, pair_counts, 0), minlength=rows
    )
    created = np.where(
        paired, succeeded, np.bincount(partition_parents, weights=counts, minlength=rows)
    ).astype(np.int64)
    zero_errors = np.bincount(error_parents, weights=error_values == 0, minlength=rows)
    named = np.asarray(pc.count_substring_regex(request, _TOPIC_NAME).to_numpy(), np.int64)
    others = np.where(error_counts > 0, zero_errors.astype(np.int64), named)
    return np.where(key == rules.CREATE_TOPICS, created, others)
