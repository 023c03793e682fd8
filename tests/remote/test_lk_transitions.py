"""The LiveKit-protocol host and its room transport in transitional windows: a room peer
whose messages the room stops taking (a stalled participant), a participant that leaves with
a request in flight, and the host closing under both.

The room runs on a Trio stand-in for the asyncio bridge, so the autojump clock drives it.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import trio

pytest.importorskip("livekit.protocol")

from agents_trio.remote.lk.codec import HEADER_SIZE, encode_message  # noqa: E402
from agents_trio.remote.lk.room import serve_room  # noqa: E402
from lk_helpers import LkRawClient, lk_attach, lk_hosted, ping, run_input  # noqa: E402


class TrioBridge:
    """What ``RoomLink`` uses of an ``AsyncioBridge``, run in Trio."""

    def callback_channel(self, convert: Callable[..., object] | None = None
                         ) -> tuple[Callable[..., None], trio.MemoryReceiveChannel[Any]]:
        send, receive = trio.open_memory_channel[Any](math.inf)

        def callback(*args: object) -> None:
            if convert is not None:
                send.send_nowait(convert(*args))
            else:
                send.send_nowait(args if len(args) != 1 else args[0])
        return callback, receive

    async def run_sync(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    async def run(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        return await fn(*args, **kwargs)


class StalledRoom:
    """A room whose ``send_bytes`` to the participant never completes (it stopped taking
    data), and which delivers the messages a test hands it."""

    def __init__(self) -> None:
        self.handler: Callable[..., None] | None = None
        self.local_participant = self
        self.sends_started = 0
        self.bytes_offered = 0

    def register_byte_stream_handler(self, topic: str, handler: Callable[..., None]) -> None:
        self.handler = handler

    def unregister_byte_stream_handler(self, topic: str) -> None:
        self.handler = None

    async def send_bytes(self, data: bytes, **_: Any) -> None:
        self.sends_started += 1
        await trio.sleep_forever()

    def deliver(self, message: Any, identity: str) -> None:
        payload = encode_message(message)[HEADER_SIZE:]

        async def reader() -> AsyncIterator[bytes]:
            yield payload
        assert self.handler is not None
        self.handler(reader(), identity)


async def test_a_stalled_room_peer_is_bounded_by_the_hosts_outbox(autojump_clock) -> None:
    """The room link used to put an unbounded memory stream between the host's connection and
    the room: a participant the room stopped delivering to piled every event up there (the
    host's bounded outbox drained into it at once), without limit. Now what the room does not
    take waits in the host's outbox, where it is bounded: events are dropped and counted, and
    the session and its other clients go on."""
    room = StalledRoom()
    async with lk_hosted(max_outbox=8) as host, trio.open_nursery() as nursery:
        link = await nursery.start(serve_room, host, room, TrioBridge())
        room.deliver(ping("p1"), "stalled")
        await trio.testing.wait_all_tasks_blocked()
        assert room.sends_started == 1 and link.messages_in == 1
        other = LkRawClient(lk_attach(host, nursery))
        start = trio.current_time()
        for i in range(20):
            await other.send(run_input(f"r{i}", "hello"))
            response = await other.response()
            assert response.request_id == f"r{i}" and not response.error
        assert trio.current_time() - start < 10  # 0.3 s a turn: the stalled peer holds nobody up
        stats = host.statistics()
        assert stats.events_dropped > 0, stats
        assert stats.connections == 2
        nursery.cancel_scope.cancel()


async def test_the_host_closes_within_its_grace_under_a_stalled_room_peer(autojump_clock) -> None:
    """A peer the room no longer delivers to, with a turn in flight, does not hold the host's
    close: its answer and goodbye wait at most ``close_grace``, then the connection is cut."""
    room = StalledRoom()
    async with lk_hosted(max_outbox=8, close_grace=1.0) as host, \
            trio.open_nursery() as nursery:
        await nursery.start(serve_room, host, room, TrioBridge())
        room.deliver(run_input("r1", "slow"), "stalled")
        await trio.sleep(1)
        assert host.statistics().pending_requests == 1
        start = trio.current_time()
        await host.aclose()
        assert trio.current_time() - start <= 2.0
        stats = host.statistics()
        assert (stats.connections, stats.pending_requests) == (0, 0)
        nursery.cancel_scope.cancel()
