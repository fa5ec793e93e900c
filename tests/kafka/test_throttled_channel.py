"""Kafka's ``ThrottledChannelTest`` (server, ``org.apache.kafka.server.quota``) as vectors."""

from __future__ import annotations

from quotagate.quota import ThrottledChannels

T0 = 1_700_000_000_000


def test_throttled_channel_delay() -> None:
    """ThrottledChannelTest.testThrottledChannelDelay: the remaining delay falls with time and
    goes negative once due."""
    channels: ThrottledChannels[str] = ThrottledChannels()
    channels.add("channel1", 10, T0)
    channels.add("channel2", 20, T0)
    channels.add("channel3", 20, T0)
    for i in range(3):
        assert channels.delays(T0 + 10 * i) == [10 - 10 * i, 20 - 10 * i, 20 - 10 * i]
