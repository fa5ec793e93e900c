"""What the gateway writes into a usage event."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from quotagate.enforcement.runtime import QuotaRuntime
from quotagate.enforcement.settings import QuotaSettings
from quotagate.gateway import ConnectionInfo, Exchange
from quotagate.protocol import api_keys, api_table, codec
from quotagate.protocol.headers import parse_request_header
from quotagate.protocol.kio_nested import build
from quotagate.usage.writer import UsageWriter, UsageWriterSettings


@pytest.mark.parametrize(
    ("host", "port", "address"),
    [("127.0.0.1", 53116, "127.0.0.1:53116"), ("::1", 9, "[::1]:9")],
)
def test_usage_event_client_host_is_the_peer_address(
    host: str, port: int, address: str, tmp_path: Path
) -> None:
    # pipeline replay treats (principal, client_id, client_host) as one connection, and broker
    # request logs name the peer as ip:port: the IP alone would merge a machine's connections.
    runtime = QuotaRuntime(QuotaSettings())
    runtime.usage = UsageWriter(UsageWriterSettings(tmp_path, "g"))
    frame = codec.encode_request_frame(
        build(
            api_table.request_schema(api_keys.METADATA, 12),
            topics=None,
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        7,
        "c",
    )
    info = ConnectionInfo(1, "PLAINTEXT", "PLAINTEXT", host, port, "User:ANONYMOUS")
    exchange = Exchange(
        info, parse_request_header(frame), frame, 1_700_000_000_000, time.monotonic_ns()
    )
    exchange.response_frame = b"\x00\x00\x00\x04\x00\x00\x00\x07"
    runtime.response_throttle.finish(exchange, runtime.ticket(exchange))
    runtime.usage.close()
    table = ds.dataset(tmp_path, format="parquet", partitioning="hive").to_table()
    assert table.column("client_host").to_pylist() == [address]
