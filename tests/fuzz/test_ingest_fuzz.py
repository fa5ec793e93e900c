"""The request-log parsers, fuzzed: whatever a log line holds, the ingest neither raises nor
loses it, and the vectorized parse agrees with the reference line by line.

Request logs are input a user points the pipeline at, written by brokers of many versions,
cut by log rotation, sometimes damaged. A line the parsers cannot read must land in the
``error`` bucket with a reason; one exception would fail the task and with it the ingest of
every other line. Damaged lines are made from real ones (the fixtures, both formats): JSON
values replaced by values of every other JSON type and by out-of-range numbers, keys given
twice, lines cut short, bytes that are not UTF-8 put in; every damaged line goes through both
``parse_block`` (the vectorized parse and its fallback) and ``parse_line`` (the reference).
"""

from __future__ import annotations

import json
import random
import re
from datetime import UTC
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
from hypothesis import strategies as st

from fuzz.budget import Budget, run_examples
from quotagate.pipeline.ingest.arrow import parse_block
from quotagate.usage.schema import USAGE_SCHEMA
from support.ingest_rows import ordered, reference

_LOGS: Final = Path(__file__).resolve().parent.parent / "pipeline" / "fixtures" / "logs"
_MARKER: Final = "Completed request:"
_SUFFIX: Final = " (kafka.request.logger)"
_GATEWAY: Final = "broker-9"
_ODD_WORDS: Final = ("", "-1", "99999999999999999999", "1e9", "NaN", "x", "(", ",", "=")
_ODD_VALUES: Final = (
    None,
    True,
    False,
    0,
    -1,
    2**31,
    -(2**63),
    2**64,
    1e300,
    2**31,
    1.5,
    -0.0,
    "",
    "x",
    "PRODUCE",
    "12",
    [],
    [None],
    {},
    {"name": None},
)


def _seed_lines() -> list[str]:
    lines: list[str] = []
    for path in sorted(_LOGS.iterdir()):
        lines += path.read_text().splitlines()
    return [line for line in lines if _MARKER in line]


_SEEDS: Final = _seed_lines()


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document a value stands."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def _replaced(node: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        return {k: (_replaced(v, rest, value) if k == head else v) for k, v in node.items()}
    return [(_replaced(v, rest, value) if i == head else v) for i, v in enumerate(node)]


def _damaged_json(data: st.DataObject, prefix: str, document: Any) -> str:
    """A KIP-673 line with one value of its document replaced, or a key given twice."""
    paths = _paths(document)
    path = data.draw(st.sampled_from(paths))
    if data.draw(st.booleans()):
        value = data.draw(st.sampled_from(_ODD_VALUES))
        body = json.dumps(_replaced(document, path, value), separators=(",", ":"))
    else:
        # A key given twice: JSON readers differ on which one counts.
        body = json.dumps(document, separators=(",", ":"))
        key = json.dumps(path[-1]) if isinstance(path[-1], str) else '"requestApiKey"'
        extra = json.dumps(data.draw(st.sampled_from(_ODD_VALUES)))
        at = body.find(key + ":")
        if at > 0:
            body = f"{body[:at]}{key}:{extra},{body[at:]}"
    return f"{prefix}{_MARKER}{body}{_SUFFIX}"


def _damaged_text(data: st.DataObject, line: str) -> str:
    """A Kafka 2.x text line with one of its numbers or words replaced."""
    spans = [m.span() for m in re.finditer(r"-?\d+(?:\.\d+)?|[A-Z_]{3,}", line)]
    start, end = data.draw(st.sampled_from(spans))
    odd = data.draw(st.sampled_from(_ODD_WORDS))
    return line[:start] + odd + line[end:]


def _damaged(data: st.DataObject) -> str:
    line = data.draw(st.sampled_from(_SEEDS))
    how = data.draw(st.sampled_from(["value", "cut", "bytes"]))
    if how == "cut":
        return line[: data.draw(st.integers(0, len(line)))]
    if how == "bytes":
        at = data.draw(st.integers(0, len(line)))
        junk = data.draw(st.sampled_from(["\ufffd", "\x00", "\t", '"', "{", "}", "\\", "é"]))
        return line[:at] + junk + line[at:]
    prefix, _, rest = line.partition(_MARKER)
    if rest.startswith("{") and rest.endswith(_SUFFIX):
        return _damaged_json(data, prefix, json.loads(rest.removesuffix(_SUFFIX)))
    return _damaged_text(data, line)


def _check(lines: list[str]) -> None:
    events, rest = reference(lines, _GATEWAY, UTC)
    block = parse_block(pa.array(lines, pa.string()), _GATEWAY, UTC)
    assert block.events.schema == USAGE_SCHEMA
    assert block.events.num_rows + block.rest.num_rows == len(lines)  # nothing lost
    assert ordered(block.rest.to_pylist()) == rest, lines
    assert ordered(block.events.to_pylist()) == events, lines


def test_damaged_request_log_lines_are_read_alike_or_refused(budget: Budget) -> None:
    def body(data: st.DataObject) -> None:
        count = data.draw(st.integers(1, 6))
        lines = [_damaged(data) for _ in range(count)]
        # Undamaged lines beside them: a damaged line must not disturb its block.
        _check([*lines, *_SEEDS])

    run_examples(body, max(budget.round_trip_examples * 150, 300), budget, "ingest")


def test_every_cut_of_every_seed_line_is_read_alike_or_refused() -> None:
    rng = random.Random(27)
    lines = [seed[:cut] for seed in _SEEDS for cut in range(0, len(seed), 7)]
    rng.shuffle(lines)
    _check(lines)
