"""An instance's hub (fleet/local_hub) and its workers' links, over a real Unix socket."""

from __future__ import annotations

import asyncio
import struct

from quotagate.fleet.hub_link import HubLink
from quotagate.fleet.local_hub import MAX_FRAME, LocalHub


async def _until(condition: object, timeout_s: float = 10.0) -> None:
    async def wait() -> None:
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)

    await asyncio.wait_for(wait(), timeout_s)


async def test_reports_reach_every_other_worker_and_a_liar_is_cut_off_alone() -> None:
    hub = LocalHub()
    hub.start()
    heard: dict[str, list[bytes]] = {"a": [], "b": [], "c": []}
    links = {name: HubLink(str(hub.path), heard[name].append) for name in heard}
    try:
        for link in links.values():
            link.start()
        await _until(lambda: all(link.connected for link in links.values()))
        links["a"].send(b'{"from":"a"}')
        await _until(lambda: heard["b"] and heard["c"])
        assert heard == {"a": [], "b": [b'{"from":"a"}'], "c": [b'{"from":"a"}']}

        # A link that declares a frame larger than allowed is closed; nobody else notices.
        reader, writer = await asyncio.open_unix_connection(str(hub.path))
        writer.write(struct.pack(">I", MAX_FRAME + 1) + b"x" * 10)
        assert await asyncio.wait_for(reader.read(), 10) == b""  # the hub hung up
        writer.close()
        links["b"].send(b'{"from":"b"}')
        await _until(lambda: len(heard["c"]) == 2)
        assert heard["a"] == [b'{"from":"b"}'] and heard["c"][-1] == b'{"from":"b"}'
        assert hub.relayed == 4
    finally:
        for link in links.values():
            await link.close()
        hub.stop()
    assert not hub.path.exists()


async def test_a_link_reconnects_when_the_hub_comes_up_late() -> None:
    hub = LocalHub()
    heard: list[bytes] = []
    early, late = HubLink(str(hub.path), heard.append), HubLink(str(hub.path), lambda _: None)
    early.start()
    await asyncio.sleep(0)  # its first attempt fails: there is no socket yet
    assert not early.connected
    hub.start()
    late.start()
    try:
        await _until(lambda: early.connected and late.connected)
        late.send(b"{}")
        await _until(lambda: heard == [b"{}"])
    finally:
        await early.close()
        await late.close()
        hub.stop()
