"""The connection core without sockets: every pause reason, the ordering rules and the flush,
driven as the client connection drives it (admit, forward, receive_response, flush) and
checked by what it answers (bytes to write, actions, bytes released)."""

from __future__ import annotations

import datetime
import struct

import pytest

from quotagate.gateway import Exchange
from quotagate.gateway.connection_core import (
    ARM_MUTE,
    CLOSE_REFUSED,
    CLOSE_SHUTDOWN,
    CONNECTING,
    HELD,
    INFLIGHT_FULL,
    MEMORY,
    MUTED,
    PAUSE_READING,
    PROCESS,
    REAUTHENTICATE,
    REAUTHENTICATING,
    RESUME_READING,
    SHUTDOWN,
    UPSTREAM_BUSY,
    ConnectionCore,
)
from quotagate.protocol import api_keys, api_table
from quotagate.protocol.headers import HeaderError
from quotagate.protocol.kio_nested import build, nested
from support.exchanges import exchange, request_body

FORWARDED_NS = 1  # any non-zero value: "the request was sent upstream"


def _request(correlation_id: int) -> Exchange:
    body = request_body(
        api_keys.API_VERSIONS,
        3,
        client_software_name="test",
        client_software_version="1",
    )
    return exchange(body, correlation_id=correlation_id)


def _produce(correlation_id: int, acks: int) -> Exchange:
    schema = api_table.request_schema(api_keys.PRODUCE, 9)
    body = request_body(
        api_keys.PRODUCE,
        9,
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=30),
        topic_data=(
            build(
                nested(schema, "TopicProduceData"),
                name="orders",
                partition_data=(
                    build(nested(schema, "PartitionProduceData"), index=0, records=b"r" * 10),
                ),
            ),
        ),
    )
    return exchange(body, correlation_id=correlation_id)


def _response(correlation_id: int, payload: bytes = b"") -> bytes:
    return struct.pack(">ii", 4 + len(payload), correlation_id) + payload


def _forward(core: ConnectionCore, ex: Exchange) -> None:
    """What the connection does for a request its stages let through."""
    assert core.admit(ex) == 0
    ex.forwarded_ns = FORWARDED_NS
    core.forward(ex)


def _answer_locally(core: ConnectionCore, ex: Exchange, frame: bytes) -> None:
    """What the connection does for a request a stage (or the authenticator) answered."""
    core.admit(ex)
    ex.response_frame = frame
    ex.done = True


def _receive(core: ConnectionCore, frame: bytes) -> Exchange:
    """An upstream response that the response stages let through."""
    ex = core.receive_response(frame)
    ex.done = True
    return ex


# -- ordering ------------------------------------------------------------------------------


def test_pipelined_requests_go_upstream_in_order_and_answers_come_back_in_order() -> None:
    core = ConnectionCore(max_inflight=100)
    requests = [_request(cid) for cid in (1, 2, 3)]
    for ex in requests:
        _forward(core, ex)
    assert core.to_upstream == [ex.request_frame for ex in requests]
    assert core.flush(0.0) == 0 and core.to_client == []

    for cid in (1, 2, 3):
        _receive(core, _response(cid))
    core.flush(0.0)
    assert core.to_client == [_response(1), _response(2), _response(3)]
    assert not core.inflight and not core.awaiting


def test_a_local_answer_waits_behind_an_earlier_forwarded_request() -> None:
    core = ConnectionCore(max_inflight=100)
    forwarded, local = _request(1), _request(2)
    _forward(core, forwarded)
    _answer_locally(core, local, _response(2, b"local"))
    core.flush(0.0)
    assert core.to_client == []  # the client sent 1 first: 2 may not overtake it

    _receive(core, _response(1))
    core.flush(0.0)
    assert core.to_client == [_response(1), _response(2, b"local")]


def test_an_answer_still_in_the_response_stages_holds_back_later_ones() -> None:
    core = ConnectionCore(max_inflight=100)
    first, second = _request(1), _request(2)
    _forward(core, first)
    _forward(core, second)
    core.receive_response(_response(1))  # received but not done (stages not finished)
    _receive(core, _response(2))
    core.flush(0.0)
    assert core.to_client == []
    first.done = True
    core.flush(0.0)
    assert core.to_client == [_response(1), _response(2)]


def test_an_upstream_answer_out_of_order_is_refused() -> None:
    core = ConnectionCore(max_inflight=100)
    _forward(core, _request(1))
    _forward(core, _request(2))
    with pytest.raises(HeaderError, match="correlation id 2, expected 1"):
        core.receive_response(_response(2))


def test_an_upstream_answer_nobody_asked_for_is_refused() -> None:
    core = ConnectionCore(max_inflight=100)
    _answer_locally(core, _request(1), _response(1))
    with pytest.raises(HeaderError, match="nobody asked for"):
        core.receive_response(_response(1))


def test_an_acks_zero_produce_expects_no_answer_and_its_bytes_wait_for_the_upstream() -> None:
    core = ConnectionCore(max_inflight=100)
    silent, next_one = _produce(1, acks=0), _request(2)
    _forward(core, silent)
    _forward(core, next_one)
    assert silent.done and list(core.awaiting) == [next_one]

    _receive(core, _response(2))
    core.flush(0.0)
    assert core.to_client == [_response(2)]
    # The produce's bytes may still sit in the upstream transport: held, not released.
    assert core.take_released() == len(next_one.request_frame)
    assert core.take_deferred() == len(silent.request_frame)
    assert core.take_deferred() == 0


def test_every_answered_request_gives_its_bytes_back_once() -> None:
    core = ConnectionCore(max_inflight=100)
    local, forwarded = _request(1), _request(2)
    _answer_locally(core, local, _response(1))
    _forward(core, forwarded)
    _receive(core, _response(2))
    core.flush(0.0)
    expected = len(local.request_frame) + len(forwarded.request_frame)
    assert core.take_released() == expected
    assert core.take_released() == 0


# -- close after response ------------------------------------------------------------------


def test_nothing_after_a_close_after_response_is_written_and_reading_stops() -> None:
    core = ConnectionCore(max_inflight=100)
    refused, later = _request(1), _request(2)
    _answer_locally(core, refused, _response(1, b"refused"))
    refused.close_after_response = True
    _answer_locally(core, later, _response(2))
    actions = core.flush(0.0)
    assert core.to_client == [_response(1, b"refused")]
    assert actions & CLOSE_REFUSED and actions & PAUSE_READING
    assert core.paused & SHUTDOWN and not core.may_process


def test_a_refusal_from_the_upstream_closes_after_its_answer_is_written() -> None:
    # SASL passthrough: the upstream's failed SaslAuthenticate goes to the client, then the close.
    core = ConnectionCore(max_inflight=100)
    _forward(core, _request(1))
    answered = _receive(core, _response(1, b"auth failed"))
    answered.close_after_response = True
    assert core.flush(0.0) & CLOSE_REFUSED
    assert core.to_client == [_response(1, b"auth failed")]


# -- pause reasons -------------------------------------------------------------------------


@pytest.mark.parametrize("reason", [MUTED, SHUTDOWN, UPSTREAM_BUSY, CONNECTING, MEMORY])
def test_reading_pauses_on_the_first_reason_and_resumes_when_the_last_one_clears(
    reason: int,
) -> None:
    core = ConnectionCore(max_inflight=100)
    other = INFLIGHT_FULL
    assert core.pause(reason) == PAUSE_READING
    assert core.pause(other) == 0  # already paused: nothing more to do
    assert not core.resume(reason) & RESUME_READING
    assert core.resume(other) & RESUME_READING
    assert core.resume(reason) == 0  # clearing a reason that is not set does nothing


@pytest.mark.parametrize(
    ("reason", "stops_processing"),
    [
        (MUTED, True),
        (SHUTDOWN, True),
        (HELD, True),
        (INFLIGHT_FULL, True),
        (REAUTHENTICATING, True),
        (MEMORY, False),
        (UPSTREAM_BUSY, False),
        (CONNECTING, False),
    ],
)
def test_which_reasons_also_stop_handling_frames_already_read(
    reason: int, stops_processing: bool
) -> None:
    core = ConnectionCore(max_inflight=100)
    core.pause(reason)
    assert core.may_process is not stops_processing


@pytest.mark.parametrize("reason", [MUTED, HELD, INFLIGHT_FULL, MEMORY])
def test_clearing_a_reason_that_held_frames_back_asks_to_handle_them(reason: int) -> None:
    core = ConnectionCore(max_inflight=100)
    core.pause(reason)
    assert core.resume(reason) == RESUME_READING | PROCESS


@pytest.mark.parametrize("reason", [UPSTREAM_BUSY, CONNECTING])
def test_clearing_a_transport_reason_only_reads_again(reason: int) -> None:
    # Frames already read were never held back by these: the read that follows handles them.
    core = ConnectionCore(max_inflight=100)
    core.pause(reason)
    assert core.resume(reason) == RESUME_READING


def test_frames_are_not_handled_while_another_stopping_reason_is_left() -> None:
    core = ConnectionCore(max_inflight=100)
    core.pause(MEMORY)
    core.pause(MUTED)
    assert core.resume(MEMORY) == 0


def test_queued_max_requests_pauses_until_fewer_than_half_are_in_flight() -> None:
    core = ConnectionCore(max_inflight=4)
    requests = [_request(cid) for cid in range(4)]
    for ex in requests[:3]:
        _forward(core, ex)
    assert core.admit(requests[3]) == PAUSE_READING
    requests[3].forwarded_ns = FORWARDED_NS
    core.forward(requests[3])
    assert core.paused == INFLIGHT_FULL and not core.may_process

    for cid in (0, 1):
        _receive(core, _response(cid))
        assert core.flush(0.0) == 0  # 3, then 2 in flight: not below half of 4 yet
    _receive(core, _response(2))
    assert core.flush(0.0) == RESUME_READING | PROCESS
    assert core.paused == 0


def test_a_held_request_stops_reading_until_it_is_written() -> None:
    core = ConnectionCore(max_inflight=100)
    throttled = _request(1)
    _forward(core, throttled)
    throttled.hold = True
    assert core.hold() == PAUSE_READING
    assert not core.may_process
    _receive(core, _response(1))
    assert core.flush(0.0) == RESUME_READING | PROCESS
    assert core.held == 0 and core.paused == 0


def test_two_held_requests_keep_reading_stopped_until_both_are_written() -> None:
    core = ConnectionCore(max_inflight=100)
    first, second = _request(1), _request(2)
    for ex in (first, second):
        _forward(core, ex)
        ex.hold = True
        core.hold()
    _receive(core, _response(1))
    assert core.flush(0.0) == 0 and core.paused == HELD
    _receive(core, _response(2))
    assert core.flush(0.0) & RESUME_READING


# -- mute ----------------------------------------------------------------------------------


def test_a_throttled_answer_mutes_the_connection_once_it_is_written() -> None:
    core = ConnectionCore(max_inflight=100)
    throttled = _request(1)
    _forward(core, throttled)
    throttled.mute_ms = 500
    assert core.paused == 0  # not before the response goes out (KIP-219)
    _receive(core, _response(1))
    actions = core.flush(10.0)
    assert actions == PAUSE_READING | ARM_MUTE
    assert core.mute_until == 10.5 and core.paused == MUTED
    assert core.unmute() == RESUME_READING | PROCESS


def test_mute_while_requests_are_in_flight_still_writes_their_answers_in_order() -> None:
    core = ConnectionCore(max_inflight=100)
    throttled, pipelined = _request(1), _request(2)
    _forward(core, throttled)
    _forward(core, pipelined)  # read before the mute: already on its way upstream
    throttled.mute_ms = 1000
    _receive(core, _response(1))
    core.flush(0.0)
    assert core.paused == MUTED and not core.may_process

    _receive(core, _response(2))
    assert core.flush(0.1) == 0  # answered while muted: written, no new mute
    assert core.to_client == [_response(1), _response(2)]
    assert core.paused == MUTED


def test_a_throttle_runs_from_its_decision_not_from_the_written_response() -> None:
    # Kafka starts a throttled channel's clock when it records (ThrottledChannel: end = the
    # recording time + the throttle): the upstream's time to answer is part of the throttle.
    core = ConnectionCore(max_inflight=100)
    throttled = _request(1)
    _forward(core, throttled)
    throttled.mute(500, since=10.0)  # decided as the request was read, at 10.0
    _receive(core, _response(1))
    assert core.flush(10.2) == PAUSE_READING | ARM_MUTE  # answered 200 ms later
    assert core.mute_until == 10.5 and core.paused == MUTED


def test_a_throttle_that_ran_out_before_the_answer_mutes_nothing() -> None:
    core = ConnectionCore(max_inflight=100)
    throttled = _request(1)
    _forward(core, throttled)
    throttled.hold = True
    core.hold()
    throttled.mute(100, since=10.0)
    _receive(core, _response(1))
    assert core.flush(10.3) == RESUME_READING | PROCESS  # held until now, then free
    assert core.paused == 0 and core.mute_until == 0.0


def test_a_stage_mute_without_a_start_runs_from_the_written_response() -> None:
    ex = _request(1)
    ex.mute(300)
    ex.mute(200, since=5.0)  # shorter: the first stays
    assert (ex.mute_ms, ex.mute_since) == (300, 0.0)


def test_a_shorter_mute_inside_a_longer_one_does_not_move_the_timer() -> None:
    core = ConnectionCore(max_inflight=100)
    assert core.mute(0.0, 1000) == PAUSE_READING | ARM_MUTE
    assert core.mute(0.5, 100) == 0
    assert core.mute_until == 1.0
    assert core.mute(0.5, 1000) == ARM_MUTE
    assert core.mute_until == 1.5


def test_the_held_request_ends_its_hold_and_starts_its_mute_in_one_flush() -> None:
    # A throttled produce: held while in flight, muted once answered; reading stays off.
    core = ConnectionCore(max_inflight=100)
    throttled = _request(1)
    _forward(core, throttled)
    throttled.hold = True
    throttled.mute_ms = 200
    core.hold()
    _receive(core, _response(1))
    actions = core.flush(0.0)
    assert actions == ARM_MUTE
    assert core.paused == MUTED and core.held == 0


# -- shutdown ------------------------------------------------------------------------------


def test_a_drain_with_nothing_in_flight_closes_at_once() -> None:
    core = ConnectionCore(max_inflight=100)
    assert core.begin_drain() == PAUSE_READING | CLOSE_SHUTDOWN


def test_a_drain_closes_once_the_last_request_in_flight_is_written() -> None:
    core = ConnectionCore(max_inflight=100)
    _forward(core, _request(1))
    assert core.begin_drain() == PAUSE_READING
    assert not core.may_process
    _receive(core, _response(1))
    assert core.flush(0.0) == CLOSE_SHUTDOWN
    assert core.to_client == [_response(1)]


# -- upstream re-authentication (KIP-368) --------------------------------------------------


def test_reauthentication_with_nothing_in_flight_starts_at_once() -> None:
    core = ConnectionCore(max_inflight=100)
    assert core.begin_reauthentication() == PAUSE_READING | REAUTHENTICATE
    assert not core.may_process
    assert core.end_reauthentication() == RESUME_READING | PROCESS


def test_reauthentication_waits_for_every_forwarded_request_then_resumes_in_order() -> None:
    core = ConnectionCore(max_inflight=100)
    first, second = _request(1), _request(2)
    _forward(core, first)
    _forward(core, second)
    core.to_upstream.clear()
    assert core.begin_reauthentication() == PAUSE_READING  # two answers are still due
    assert not core.may_process

    _receive(core, _response(1))
    assert not core.flush(0.0) & REAUTHENTICATE
    _receive(core, _response(2))
    assert core.flush(0.0) == REAUTHENTICATE  # once, with the last answer
    assert core.to_client == [_response(1), _response(2)]
    assert core.flush(0.0) == 0
    assert core.to_upstream == []  # nothing went upstream meanwhile

    assert core.end_reauthentication() == RESUME_READING | PROCESS
    third = _request(3)
    _forward(core, third)
    assert core.to_upstream == [third.request_frame]


def test_a_local_answer_does_not_delay_the_reauthentication() -> None:
    core = ConnectionCore(max_inflight=100)
    _forward(core, _request(1))
    _answer_locally(core, _request(2), _response(2))
    core.begin_reauthentication()
    _receive(core, _response(1))
    assert core.flush(0.0) == REAUTHENTICATE


def test_an_acks_zero_produce_does_not_hold_the_reauthentication() -> None:
    # It gets no answer: its bytes are on the wire before the SASL exchange, in order.
    core = ConnectionCore(max_inflight=100)
    _forward(core, _produce(1, acks=0))
    assert core.begin_reauthentication() & REAUTHENTICATE


def test_reading_stays_paused_after_reauthentication_while_another_reason_holds() -> None:
    core = ConnectionCore(max_inflight=100)
    core.pause(MUTED)
    assert core.begin_reauthentication() == REAUTHENTICATE  # already paused
    assert core.end_reauthentication() == 0
    assert core.unmute() == RESUME_READING | PROCESS
