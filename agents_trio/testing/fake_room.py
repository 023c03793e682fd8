"""FakeRoom: a stand-in for ``rtc.Room`` with the surface RoomIO uses, for tests without a
LiveKit server.

It is asyncio-flavoured like the SDK (its coroutines run on the bridge loop, and none of them
waits: cancelling one cancels nothing it started) and records what
the agent did: attributes set (``local_participant.attribute_history``), text streams written
(``writers``, ``transcripts()``), tracks published. Tests drive the room from the asyncio side,
as the SDK does: ``bridge.call_soon(room.join, FakeRemoteParticipant("user"))``, then
``room.send_chat``, ``room.subscribe`` (a real ``LocalAudioTrack`` as the user's microphone:
audio still flows through ``AudioStream.from_track``), ``room.leave``, ``room.drop``.

Tests wait for what the agent did with :meth:`FakeRoom.wait_for`, a positive witness re-checked
whenever the room records something (no polling).

``open_fake_room`` has the signature of ``agents_trio.io.room.open_room``, so
``run_job(entrypoint, url=..., token=..., open_room_fn=open_fake_room)`` runs an entrypoint
against a fake room; ``open_fake_room.rooms`` lists the rooms it made.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import trio
from livekit import rtc

from ..io.bridge import AsyncioBridge

__all__ = ["FakeRemoteParticipant", "FakeRoom", "open_fake_room"]

_sids = itertools.count(1)


class FakeWriter:
    def __init__(self, room: FakeRoom, topic: str, attributes: dict[str, str],
                 sender_identity: str) -> None:
        self.topic = topic
        self.attributes = dict(attributes)
        self.sender_identity = sender_identity
        self.chunks: list[str] = []
        self.closed_with: dict[str, str] | None = None
        self._room = room
        room.writers.append(self)
        room.notify_changed()

    async def write(self, text: str) -> None:
        if self.closed_with is not None:
            raise RuntimeError("stream closed")
        self.chunks.append(text)
        self._room.notify_changed()

    async def aclose(self, *, reason: str = "", attributes: dict[str, str] | None = None
                     ) -> None:
        self.closed_with = dict(attributes or {})
        self._room.notify_changed()

    @property
    def text(self) -> str:
        return "".join(self.chunks)

    @property
    def final(self) -> bool:
        attrs = {**self.attributes, **(self.closed_with or {})}
        return attrs.get("lk.transcription_final") == "true"


class FakePublication:
    def __init__(self, track: rtc.Track, source: int) -> None:
        self.sid = f"TR_{next(_sids)}"
        self.track = track
        self.source = source
        self.subscribed = True
        self.kind = rtc.TrackKind.KIND_AUDIO

    async def wait_for_subscription(self) -> None:
        return None


class FakeLocalParticipant:
    def __init__(self, room: FakeRoom, identity: str) -> None:
        self._room = room
        self.identity = identity
        self.attributes: dict[str, str] = {}
        self.attribute_history: list[dict[str, str]] = []
        self.published: list[FakePublication] = []

    async def set_attributes(self, attributes: dict[str, str]) -> None:
        self.attributes.update(attributes)
        self.attribute_history.append(dict(attributes))
        self._room.notify_changed()

    async def publish_track(self, track: rtc.Track,
                            options: rtc.TrackPublishOptions | None = None) -> FakePublication:
        source = options.source if options is not None else rtc.TrackSource.SOURCE_UNKNOWN
        publication = FakePublication(track, source)
        self.published.append(publication)
        self._room.notify_changed()
        return publication

    async def unpublish_track(self, sid: str) -> None:
        self.published = [p for p in self.published if p.sid != sid]
        self._room.notify_changed()

    async def stream_text(self, *, topic: str = "", attributes: dict[str, str] | None = None,
                          sender_identity: str | None = None, **_: object) -> FakeWriter:
        return FakeWriter(self._room, topic, attributes or {}, sender_identity or self.identity)


class FakeRemoteParticipant:
    def __init__(self, identity: str, *, kind: int = rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD,
                 attributes: dict[str, str] | None = None) -> None:
        self.identity = identity
        self.kind = kind
        self.attributes = attributes or {}
        self.track_publications: dict[str, FakePublication] = {}
        self.disconnect_reason: int = rtc.DisconnectReason.UNKNOWN_REASON

    def add_microphone(self, track: rtc.Track) -> FakePublication:
        publication = FakePublication(track, rtc.TrackSource.SOURCE_MICROPHONE)
        self.track_publications[publication.sid] = publication
        return publication


class FakeTextReader:
    def __init__(self, text: str | None) -> None:
        self._text = text

    async def read_all(self) -> str | None:
        return self._text


class FakeRoom(rtc.EventEmitter[str]):
    """See the module docstring."""

    def __init__(self, *, name: str = "test-room", agent_identity: str = "agent") -> None:
        super().__init__()
        self.name = name
        self.local_participant = FakeLocalParticipant(self, agent_identity)
        self.remote_participants: dict[str, FakeRemoteParticipant] = {}
        self.text_handlers: dict[str, Callable[[FakeTextReader, str], object]] = {}
        self.writers: list[FakeWriter] = []
        self.connected = True
        self._changed = trio.Event()

    def notify_changed(self) -> None:
        """Wake :meth:`wait_for`: the room recorded something (the fake's own parts call it)."""
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for(self, predicate: Callable[[], object]) -> None:
        """Trio side: wait until ``predicate()`` is true, re-checked whenever the room records
        something (attributes set, a text stream opened, written or closed, a track published
        or unpublished).

        Cancellation: a checkpoint; nothing else happens.
        """
        await trio.lowlevel.checkpoint()
        while not predicate():
            await self._changed.wait()

    def isconnected(self) -> bool:
        return self.connected

    def register_text_stream_handler(self, topic: str,
                                     handler: Callable[[FakeTextReader, str], object]) -> None:
        if topic in self.text_handlers:
            raise ValueError(f"handler for {topic!r} already set")
        self.text_handlers[topic] = handler

    def unregister_text_stream_handler(self, topic: str) -> None:
        self.text_handlers.pop(topic, None)

    # -- driven by the test, on the asyncio side ------------------------------------------------
    def join(self, participant: FakeRemoteParticipant) -> None:
        self.remote_participants[participant.identity] = participant
        self.emit("participant_connected", participant)

    def leave(self, participant: FakeRemoteParticipant, reason: int) -> None:
        participant.disconnect_reason = reason
        self.remote_participants.pop(participant.identity, None)
        self.emit("participant_disconnected", participant)

    def subscribe(self, participant: FakeRemoteParticipant, publication: FakePublication
                  ) -> None:
        self.emit("track_subscribed", publication.track, publication, participant)

    def send_chat(self, identity: str, text: str | None) -> None:
        self.text_handlers["lk.chat"](FakeTextReader(text), identity)

    def drop(self) -> None:
        self.connected = False
        self.emit("disconnected", rtc.DisconnectReason.SIGNAL_CLOSE)

    def transcripts(self, sender: str | None = None) -> list[FakeWriter]:
        return [w for w in self.writers if w.topic == "lk.transcription"
                and (sender is None or w.sender_identity == sender)]


@asynccontextmanager
async def _open_fake_room(url: str, token: str) -> AsyncIterator[FakeRoom]:
    room = FakeRoom()
    open_fake_room.rooms.append(room)
    try:
        yield room
    finally:
        room.connected = False


class _FakeRoomOpener:
    """Callable like ``open_room``; remembers the rooms it opened."""

    def __init__(self) -> None:
        self.rooms: list[FakeRoom] = []

    def __call__(self, url: str, token: str, *, bridge: AsyncioBridge | None = None,
                 connect_timeout: float = 10.0, auto_subscribe: bool = True
                 ) -> AbstractAsyncContextManager[FakeRoom]:
        """Like ``open_room`` (the connection options are accepted and not needed)."""
        return _open_fake_room(url, token)


open_fake_room = _FakeRoomOpener()
