"""Running LiveKit's own asyncio code (its RemoteSession, SessionHost, AgentSession) from a
Trio test: in a worker thread with an event loop of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import numpy as np
import trio
import trio.testing

T = TypeVar("T")


async def run_asyncio(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn()`` in a thread on its own asyncio loop; the Trio side waits for it."""
    return await trio.to_thread.run_sync(lambda: asyncio.run(fn()))  # type: ignore[arg-type]


class Gate:
    """A flag the Trio side sets and an asyncio coroutine in another thread awaits."""

    def __init__(self) -> None:
        self._flag = threading.Event()

    def set(self) -> None:
        self._flag.set()

    async def wait(self) -> None:
        while not self._flag.is_set():
            await asyncio.sleep(0.01)


def lk_remote_session(port: int) -> Any:
    from livekit.agents.voice.remote_session import RemoteSession, TcpSessionTransport
    return RemoteSession(TcpSessionTransport("127.0.0.1", port))



# -- our LiveKit-protocol host, over memory streams --------------------------------------------

@asynccontextmanager
async def lk_hosted(session: Any = None, *, start: bool = True,
                    **options: Any) -> AsyncIterator[Any]:
    """A started agents_trio session behind a LiveKit-protocol host serving only the streams
    given to it (see :func:`lk_attach`)."""
    from agents_trio.remote import lk
    from remote_helpers import Weather, text_session
    session = session or text_session()
    async with session, lk.open_session_host(session, listeners=[], **options) as host:
        if start:
            await session.start(Weather())
        yield host


def lk_attach(host: Any, nursery: trio.Nursery) -> trio.abc.Stream:
    client, server = trio.testing.memory_stream_pair()
    nursery.start_soon(host.serve_stream, server)
    return client


def request(request_id: str, **kind: Any) -> Any:
    from agents_trio.remote.lk.codec import pb
    return pb.AgentSessionMessage(request=pb.SessionRequest(request_id=request_id, **kind))


def ping(request_id: str) -> Any:
    from agents_trio.remote.lk.codec import pb
    return request(request_id, ping=pb.SessionRequest.Ping())


def run_input(request_id: str, text: str) -> Any:
    from agents_trio.remote.lk.codec import pb
    return request(request_id, run_input=pb.SessionRequest.RunInput(text=text))


class LkRawClient:
    """Speaks LiveKit-protocol frames by hand, for the bad-input and fuzz tests."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        from agents_trio.remote.lk.codec import LkFrameReader
        self.stream = stream
        self.reader = LkFrameReader(stream, max_frame_size=1 << 24)

    async def send(self, message: Any) -> None:
        from agents_trio.remote.lk.codec import encode_message
        data = message if isinstance(message, (bytes, bytearray)) else encode_message(message)
        await self.stream.send_all(bytes(data))

    async def receive(self) -> Any:
        """The next message, or None once the host closed the connection."""
        try:
            return await self.reader.receive()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return None

    async def response(self) -> Any:
        """The next response (events skipped), or None once the connection closed."""
        while (message := await self.receive()) is not None:
            if message.WhichOneof("message") == "response":
                return message.response
        return None

    async def responses_until_closed(self) -> list[Any]:
        out = []
        while (resp := await self.response()) is not None:
            out.append(resp)
        return out


# -- rooms that carry byte streams to each other (asyncio side, on the bridge loop) ------------

class _FakeByteReader:
    """Yields a byte stream's data in chunks, as the SDK's ByteStreamReader does."""

    def __init__(self, data: bytes, chunk: int = 15_000) -> None:
        self._chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)] or [b""]

    def __aiter__(self) -> Any:
        return self._gen()

    async def _gen(self) -> Any:
        for c in self._chunks:
            await asyncio.sleep(0)
            yield c


class LinkedRoom:
    """A room with the byte-stream surface LiveKit's RoomSessionTransport uses; rooms linked
    with :func:`link_rooms` deliver each other's ``send_bytes`` to their handlers."""

    def __init__(self, identity: str) -> None:
        self.identity = identity
        self.peers: list[LinkedRoom] = []
        self.handlers: dict[str, Any] = {}
        self.local_participant = self
        self.sent: list[tuple[str, list[str] | None]] = []
        self.listeners: dict[str, list[Any]] = {}

    def on(self, event: str, callback: Any) -> None:
        self.listeners.setdefault(event, []).append(callback)

    def off(self, event: str, callback: Any) -> None:
        self.listeners.get(event, []).remove(callback)

    def leave(self) -> None:
        """This participant leaves: the others' rooms say so."""
        for peer in self.peers:
            for cb in list(peer.listeners.get("participant_disconnected", [])):
                cb(self)

    def isconnected(self) -> bool:
        return True

    def register_byte_stream_handler(self, topic: str, handler: Any) -> None:
        if topic in self.handlers:
            raise ValueError(f"a handler for {topic!r} is already registered")
        self.handlers[topic] = handler

    def unregister_byte_stream_handler(self, topic: str) -> None:
        self.handlers.pop(topic, None)

    async def send_bytes(self, data: bytes, *, name: str = "", topic: str = "",
                         destination_identities: list[str] | None = None,
                         **_: Any) -> None:
        self.sent.append((topic, destination_identities))
        for peer in self.peers:
            if destination_identities and peer.identity not in destination_identities:
                continue
            handler = peer.handlers.get(topic)
            if handler is not None:
                handler(_FakeByteReader(bytes(data)), self.identity)


def link_rooms(*rooms: LinkedRoom) -> None:
    for room in rooms:
        room.peers = [r for r in rooms if r is not room]


# -- a TCP console server, written from the protocol definition --------------------------------

def mic_frame(value: int = 0, samples: int = 480) -> Any:
    data = np.full(samples, value, dtype=np.int16).tobytes()
    pb = _pb()
    return pb.AgentSessionMessage(audio_input=pb.AgentSessionMessage.ConsoleIO.AudioFrame(
        data=data, sample_rate=48000, num_channels=1, samples_per_channel=samples))


class ConsoleServer:
    """The console's side: streams the microphone, plays the agent's audio on Trio's clock
    and confirms each flushed segment, sends requests, records everything."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        from agents_trio.remote.lk.codec import LkFrameReader
        self.stream = stream
        self.reader = LkFrameReader(stream)
        self.lock = trio.Lock()
        self.played = 0.0
        self.segments: list[float] = []
        self.rates: set[int] = set()
        self.flushes = 0
        self.clears = 0
        self.responses: dict[str, Any] = {}
        self.response_arrived = trio.Event()
        self.events: list[str] = []

    async def send(self, message: Any) -> None:
        async with self.lock:
            from agents_trio.remote.lk.codec import encode_message
            await self.stream.send_all(encode_message(message))

    async def microphone(self, seconds: float) -> None:
        for _ in range(int(seconds * 100)):
            await self.send(mic_frame())
            await trio.sleep(0.01)

    async def read(self) -> None:
        segment = 0.0
        while (message := await self.reader.receive()) is not None:
            kind = message.WhichOneof("message")
            if kind == "audio_output":
                frame = message.audio_output
                self.rates.add(frame.sample_rate)
                segment += frame.samples_per_channel / frame.sample_rate
            elif kind == "audio_playback_flush":
                self.flushes += 1
                if segment:
                    await trio.sleep(segment)  # play it
                    self.segments.append(segment)
                    self.played += segment
                    segment = 0.0
                    await self.send(_pb().AgentSessionMessage(
                        audio_playback_finished=(
                            _pb().AgentSessionMessage.ConsoleIO.AudioPlaybackFinished())))
            elif kind == "audio_playback_clear":
                self.clears += 1
                segment = 0.0
            elif kind == "response":
                self.responses[message.response.request_id] = message.response
                self.response_arrived.set()
                self.response_arrived = trio.Event()
            elif kind == "event":
                self.events.append(message.event.WhichOneof("event") or "")

    async def request(self, request_id: str, **kind: object) -> Any:
        await self.send(_pb().AgentSessionMessage(request=_pb().SessionRequest(
            request_id=request_id, **kind)))
        while request_id not in self.responses:
            await self.response_arrived.wait()
        return self.responses[request_id]




def _pb() -> Any:
    from livekit.protocol.agent_pb import agent_session
    return agent_session
