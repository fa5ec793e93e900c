"""Kafka's ``ThrottledChannelExpirationTest`` (core, ``kafka.server``) as vectors.

Kafka's reaper takes one expired channel per poll of its delay queue and polls again at once;
the engine's ``due(now)`` hands back every channel due at ``now`` in one call, so the vector
asserts which channels have ended by each instant rather than per poll.
"""

from __future__ import annotations

from quotagate.quota import ThrottledChannels

T0 = 1_700_000_000_000


def test_callback_invocation_after_expiration() -> None:
    """ThrottledChannelExpirationTest.testCallbackInvocationAfterExpiration: four channels
    added out of order, two with the same end time."""
    channels: ThrottledChannels[str] = ThrottledChannels()
    for name, throttle_ms in [("channel1", 10), ("channel2", 30), ("channel3", 30),
                              ("channel4", 20)]:  # fmt: skip
        channels.add(name, throttle_ms, T0)
    assert channels.queue_size == 4  # every channel started throttling
    ended: list[str] = []
    for elapsed, expected in [(10, 1), (20, 2), (30, 4)]:
        ended += channels.due(T0 + elapsed)
        assert len(ended) == expected
    assert ended[:2] == ["channel1", "channel4"]
    assert sorted(ended[2:]) == ["channel2", "channel3"]
    assert len(channels) == 0 and channels.queue_size == 0
    assert channels.due(T0 + 30) == []
