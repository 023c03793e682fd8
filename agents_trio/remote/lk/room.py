"""LiveKit's room transport for remote sessions: ``AgentSessionMessage``s as byte streams on
the room, topic ``lk.agent.session``, one stream per message (LiveKit's
``RoomSessionTransport``).

The room is SDK (asyncio) code, reached through the bridge. Each remote participant that
speaks on the topic becomes a *peer*: a connected Trio stream carrying the same length-prefixed
frames as TCP, so the host serves it with all its hardening (:meth:`SessionHost.serve_stream`:
frame limit, pending-request limit, connection slots, deadlines) and our client reads it like a
socket; a participant that leaves the room ends its peer. Incoming streams are read one at a
time, in arrival order, and at most
``max_message_size`` bytes of one are kept: a longer one is passed on as an oversized frame,
which the host refuses and closes that peer on (a later message starts a new one).

- :func:`serve_room` serves a host to every participant (or one ``remote_identity``).
- :func:`host_session_on_room` does both for a session, as LiveKit's ``AgentSession`` hosts
  itself in a room.
- :func:`open_room_remote_session` opens our client to the agent participant
  ``agent_identity`` (LiveKit's ``RemoteSession.from_room``).
"""

from __future__ import annotations

import itertools
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol

import trio
import trio.testing

from .codec import HEADER_SIZE, LIVEKIT_MAX_FRAME_SIZE, FrameDecoder, FrameTooLargeError

if TYPE_CHECKING:
    from ...io.bridge import AsyncioBridge
    from ...session import AgentSession
    from .client import RemoteSession
    from .host import SessionHost

logger = logging.getLogger("agents_trio.remote")

TOPIC_SESSION_MESSAGES = "lk.agent.session"

PeerHandler = Callable[[str, trio.abc.Stream], Awaitable[None]]


class ByteStreamRoom(Protocol):
    """What the transport needs of an ``rtc.Room``."""

    def register_byte_stream_handler(self, topic: str,
                                     handler: Callable[..., None]) -> None: ...

    def unregister_byte_stream_handler(self, topic: str) -> None: ...

    @property
    def local_participant(self) -> Any: ...  # noqa: ANN401 - the SDK's LocalParticipant


def _absent(*_: object) -> None:
    """Stands for an emitter method the room does not have."""


_names = itertools.count(1)
_prefix = secrets.token_hex(3)


async def _read_bounded(reader: AsyncIterator[bytes], limit: int) -> tuple[bytes, bool]:
    """The stream's bytes (asyncio side), and whether it stayed within ``limit``."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in reader:
        size += len(chunk)
        if size > limit:
            return b"", False
        chunks.append(bytes(chunk))
    return b"".join(chunks), True


class _Peer:
    """One participant's connection: ``local`` is the host's (or our client's) end,
    ``remote`` the link's.

    What the local side writes waits until the link has handed it to the room (a lockstep
    stream), so a participant the room stops delivering to holds nothing here: the writer's
    own bounded queue (the host's outbox) takes the backlog, and drops events or closes the
    connection by its rules. What the room delivers is buffered for the local side's reader.
    """

    def __init__(self, identity: str) -> None:
        self.identity = identity
        out_send, out_receive = trio.testing.lockstep_stream_one_way_pair()
        in_send, in_receive = trio.testing.memory_stream_one_way_pair()
        self.local = trio.StapledStream(out_send, in_receive)
        self.remote = trio.StapledStream(in_send, out_receive)
        self.done = False


class RoomLink:
    """Carries session messages between the room and one Trio stream per peer.

    Args:
        room: The SDK room (asyncio side).
        bridge: The bridge the room's loop runs on.
        on_peer: ``await on_peer(identity, stream)`` serves a new peer's stream.
        remote_identity: Only this participant is heard (and answered); None: everyone.
        max_message_size: The largest message taken from the room.
    """

    def __init__(self, room: ByteStreamRoom, bridge: AsyncioBridge, on_peer: PeerHandler, *,
                 remote_identity: str | None = None,
                 max_message_size: int = LIVEKIT_MAX_FRAME_SIZE) -> None:
        self._room = room
        self._bridge = bridge
        self._on_peer = on_peer
        self._remote_identity = remote_identity
        self._max = max_message_size
        self._peers: dict[str, _Peer] = {}
        self._nursery: trio.Nursery | None = None
        self.messages_in = 0
        self.messages_out = 0
        self.messages_refused = 0

    async def run(self, *, task_status: trio.TaskStatus[RoomLink] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Listen on the room until cancelled; for ``nursery.start``.

        Cancellation: the way to stop it: every peer's stream closes and the handler is
        unregistered from the room.
        """
        callback, incoming = self._bridge.callback_channel()
        left, departures = self._bridge.callback_channel(
            lambda participant: str(getattr(participant, "identity", participant)))
        room_on: Callable[..., object] = getattr(self._room, "on", _absent)
        room_off: Callable[..., object] = getattr(self._room, "off", _absent)
        watch_departures = room_on is not _absent and room_off is not _absent
        await self._bridge.run_sync(self._room.register_byte_stream_handler,
                                    TOPIC_SESSION_MESSAGES, callback)
        if watch_departures:
            await self._bridge.run_sync(room_on, "participant_disconnected", left)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._drop_departed, departures)
                task_status.started(self)
                async for reader, identity in incoming:
                    if self._remote_identity is not None and identity != self._remote_identity:
                        continue
                    await self._take(reader, str(identity))
        finally:
            self._nursery = None
            if watch_departures:
                with trio.CancelScope(shield=True):
                    try:
                        await self._bridge.run_sync(room_off, "participant_disconnected", left)
                    except Exception:  # noqa: BLE001 - the room or the bridge is gone already
                        pass
            with trio.CancelScope(shield=True):
                try:
                    await self._bridge.run_sync(self._room.unregister_byte_stream_handler,
                                                TOPIC_SESSION_MESSAGES)
                except Exception:  # noqa: BLE001 - the room or the bridge is gone already
                    pass

    async def _drop_departed(self, departures: AsyncIterator[str]) -> None:
        """A participant that left ends its peer: the host connection sees the end of its
        stream (pending requests are abandoned, the slot is freed)."""
        async for identity in departures:
            peer = self._peers.get(identity)
            if peer is not None and not peer.done:
                peer.done = True
                await trio.aclose_forcefully(peer.remote)

    def peer(self, identity: str) -> trio.abc.Stream:
        """The local stream of ``identity``, opening it (and its pump) if needed."""
        peer = self._peers.get(identity)
        if peer is None or peer.done:
            assert self._nursery is not None, "the link is not running"
            peer = _Peer(identity)
            self._peers[identity] = peer
            self._nursery.start_soon(self._pump_out, peer)
        return peer.local

    async def _take(self, reader: AsyncIterator[bytes], identity: str) -> None:
        try:
            data, fits = await self._bridge.run(_read_bounded, reader, self._max)
        except Exception:  # noqa: BLE001 - one broken stream is that message lost
            logger.warning("failed to read a session message from %s", identity, exc_info=True)
            return
        new = identity not in self._peers or self._peers[identity].done
        local = self.peer(identity)
        peer = self._peers[identity]
        if new:
            assert self._nursery is not None
            self._nursery.start_soon(self._serve_peer, peer, local)
        if fits:
            self.messages_in += 1
            frame = len(data).to_bytes(HEADER_SIZE, "big") + data
        else:
            self.messages_refused += 1
            frame = (self._max + 1).to_bytes(HEADER_SIZE, "big")  # refused as too large
        try:
            await peer.remote.send_all(frame)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            peer.done = True

    async def _serve_peer(self, peer: _Peer, local: trio.abc.Stream) -> None:
        try:
            await self._on_peer(peer.identity, local)
        finally:
            peer.done = True
            await trio.aclose_forcefully(peer.remote)

    async def _pump_out(self, peer: _Peer) -> None:
        """Frames written on the local side go to the room, one byte stream each."""
        decoder = FrameDecoder(1 << 31)
        local_participant = self._room.local_participant
        try:
            while True:
                try:
                    payload = decoder.next_frame()
                except FrameTooLargeError:  # pragma: no cover - our own side wrote it
                    return
                if payload is None:
                    data = await peer.remote.receive_some(65536)
                    if not data:
                        return
                    decoder.feed(bytes(data))
                    continue
                await self._bridge.run(local_participant.send_bytes, payload,
                                       name=f"AS_{_prefix}{next(_names)}",
                                       topic=TOPIC_SESSION_MESSAGES,
                                       destination_identities=[peer.identity])
                self.messages_out += 1
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        except Exception:  # noqa: BLE001 - the room refused: this peer is done
            logger.warning("failed to send a session message to %s", peer.identity,
                           exc_info=True)
        finally:
            peer.done = True
            await trio.aclose_forcefully(peer.remote)


async def serve_room(host: SessionHost, room: ByteStreamRoom, bridge: AsyncioBridge, *,
                     remote_identity: str | None = None,
                     task_status: trio.TaskStatus[RoomLink] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``host`` (already serving, e.g. with ``listeners=[]``) on ``room``'s
    ``lk.agent.session`` byte streams until cancelled; for ``nursery.start``.

    Cancellation: as :meth:`RoomLink.run`: the room's peers are cut, the host goes on.
    """

    async def on_peer(identity: str, stream: trio.abc.Stream) -> None:
        await host.serve_stream(stream)

    link = RoomLink(room, bridge, on_peer, remote_identity=remote_identity,
                    max_message_size=host.limits.max_frame_size)
    await link.run(task_status=task_status)


@asynccontextmanager
async def open_room_remote_session(room: ByteStreamRoom, agent_identity: str,
                                   bridge: AsyncioBridge,
                                   **options: Any,  # noqa: ANN401 - RemoteSession's keywords
                                   ) -> AsyncIterator[RemoteSession]:
    """Our client to the agent participant ``agent_identity`` over the room.

    Cancellation: cancelling the block closes the client and unregisters the room handler.
    """
    from .client import open_remote_session

    async def on_peer(identity: str, stream: trio.abc.Stream) -> None:
        await trio.sleep_forever()  # the client below owns the stream

    link = RoomLink(room, bridge, on_peer, remote_identity=agent_identity)
    async with trio.open_nursery() as nursery:
        await nursery.start(link.run)
        stream = link.peer(agent_identity)
        try:
            async with open_remote_session(stream, **options) as remote:
                yield remote
        finally:
            nursery.cancel_scope.cancel()


async def host_session_on_room(session: AgentSession, room: ByteStreamRoom,
                               bridge: AsyncioBridge, *,
                               task_status: trio.TaskStatus[SessionHost] = (
                                   trio.TASK_STATUS_IGNORED),
                               **options: Any,  # noqa: ANN401 - SessionHost's keywords
                               ) -> None:
    """What LiveKit's ``AgentSession`` does in a room: serve ``session`` on the room's
    ``lk.agent.session`` byte streams (for LiveKit's simulation tooling and remote clients),
    until the session closes or this is cancelled; for ``nursery.start`` (it passes the host).

    Cancellation: cancelling it closes the host's connections; the session goes on.
    """
    from .host import SessionHost

    host = SessionHost(session, listeners=[], **options)
    async with trio.open_nursery() as nursery:
        await nursery.start(host.serve)
        await nursery.start(serve_room, host, room, bridge)
        task_status.started(host)
        await host.wait_stopped()
        nursery.cancel_scope.cancel()
