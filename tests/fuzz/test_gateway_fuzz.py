"""Hostile connections against ``quotagate serve`` with every quota stage decoding.

Each case is one connection: the gateway must close it with an ``event=protocol_error`` or
``event=connection_closed`` line naming that client, or answer it, and nothing else: no
traceback in its log, the process up, and a bystander connection opened before the fuzzing
still answered after it.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any

import pytest

from fuzz.budget import Budget, expired
from fuzz.cases import (
    ISSUE_FRAME,
    ISSUE_FRAME_SIZED,
    NULL_TOPICS_FRAME,
    Bystander,
    Case,
    CaseMaker,
    Ending,
    Result,
    UpstreamGuard,
    request_frames,
    run_case,
)
from fuzz.served import ServedGateway
from quotagate.gateway.embedded import TansuBroker

pytestmark = pytest.mark.integration

FIXED_SEED = 14  # `make test` fuzzes the same cases every run; `make fuzz` draws a new seed

NAMED = {
    # As filed: the prefix says 19 bytes, so the topics varint is cut short by one byte.
    "issue 14 frame as filed": (ISSUE_FRAME, "CreateTopicsRequest.topics: varint runs past"),
    "issue 14 frame, sized": (ISSUE_FRAME_SIZED, "topics: 17179869183 entries claimed"),
    "null topics array": (NULL_TOPICS_FRAME, "topics: null in a non-nullable array"),
}


def closing_line(gateway: ServedGateway, offset: int, port: int) -> str | None:
    """The gateway's log line, written after ``offset``, that closed client ``port``."""
    pattern = re.compile(rf"event=(protocol_error|connection_closed) .*client=127\.0\.0\.1:{port} ")
    for line in gateway.log_since(offset).splitlines():
        if pattern.search(line):
            return line
    return None


def assert_unharmed(gateway: ServedGateway, bystander: Bystander) -> None:
    assert gateway.alive(), gateway.log()[-3000:]
    assert gateway.tracebacks() == []
    assert bystander.api_versions() == 0


@pytest.mark.parametrize("name", list(NAMED))
def test_named_hostile_frame_closes_only_its_connection(
    name: str, served_gateway: ServedGateway, wait_for: Any
) -> None:
    payload, reason = NAMED[name]
    bystander = Bystander(served_gateway.address)
    try:
        assert bystander.api_versions() == 0
        offset = served_gateway.log_size()
        result = run_case(served_gateway.address, Case(name, "", payload, truncated=False))
        assert result.ending is Ending.CLOSED
        line = wait_for(
            lambda: closing_line(served_gateway, offset, result.client_port),
            10,
            "the log line closing the hostile connection",
        )
        # Refused by the connection's bounds check before any stage or the upstream sees it.
        assert "event=protocol_error reason=bad_body" in line and reason in line
        assert_unharmed(served_gateway, bystander)
    finally:
        bystander.close()


def test_random_hostile_connections(
    served_gateway: ServedGateway,
    fuzz_tansu: TansuBroker,
    upstream_guard: UpstreamGuard,
    budget: Budget,
    wait_for: Any,
) -> None:
    seed = random.randrange(1 << 32) if budget.fuzzing else FIXED_SEED
    print(f"socket fuzz seed {seed}")
    frames = request_frames(200, seed if budget.fuzzing else None)
    maker = CaseMaker(frames, random.Random(seed), upstream_guard)
    deadline = budget.deadline("sockets")
    bystander = Bystander(served_gateway.address)
    endings: Counter[tuple[str, str]] = Counter()
    try:
        for _ in range(budget.cases):
            if expired(deadline):
                break
            offset = served_gateway.log_size()
            result = run_case(served_gateway.address, maker.next())
            endings[result.case.kind, result.ending.value] += 1
            if result.ending is Ending.CLOSED:
                _expect_closing_line(served_gateway, offset, result, wait_for, seed)
        assert_unharmed(served_gateway, bystander)
        assert fuzz_tansu.running
    finally:
        bystander.close()
    print(
        f"socket fuzz endings: {dict(endings)}, withheld: {upstream_guard.withheld} "
        f"({upstream_guard.withheld_names} for topic names)"
    )
    assert sum(n for (_, ending), n in endings.items() if ending == "closed") > 0


def _expect_closing_line(
    gateway: ServedGateway, offset: int, result: Result, wait_for: Any, seed: int
) -> None:
    what = (
        f"a protocol_error/connection_closed line for client port {result.client_port} "
        f"(seed {seed}, {result.case.kind} {result.case.detail}, "
        f"payload {result.case.payload.hex()})"
    )
    wait_for(lambda: closing_line(gateway, offset, result.client_port), 10, what)
