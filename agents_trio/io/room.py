"""A LiveKit room as the I/O of an ``AgentSession``.

    async with open_bridge() as bridge, open_room(url, token) as room:
        session = AgentSession(...)
        async with open_room_io(room, session) as room_io, session:
            await session.start(MyAgent())
            await room_io.wait_session_closed()

:func:`open_room` connects (and disconnects on exit). :func:`open_room_io` links the first
participant that joins (or ``RoomOptions.participant_identity``): their microphone becomes
``session.input.audio``, the agent's voice is published as a track from
``session.output.audio``, the agent's and the user's transcriptions go to the
``lk.transcription`` text stream, the agent state to the ``lk.agent.state`` attribute, and
text on the ``lk.chat`` topic interrupts the agent and is answered. When the linked
participant leaves (closing their client, the room deleted, rejected), the session closes with
reason ``participant_disconnected``; when the agent's own connection drops, with
``job_shutdown`` (what LiveKit Agents does when the room disconnects its job).

Who speaks for the user: the linked participant only (or the identity
``RoomOptions.participant_identity`` names). Chat from anyone else is ignored, also before
anyone is linked. A linked participant who drops in a way they may come back from (a network
failure, not leaving or being rejected) keeps the link: nobody else is linked meanwhile, and
they are linked again when they rejoin. Chat is read in order by one reader and a burst becomes
one input, with a bound (see :mod:`agents_trio.io.room_chat`).

The room's end: linking a room that is not connected raises :class:`RoomDisconnectedError`;
when the room disconnects later, :meth:`RoomIO.wait_for_participant` raises it and the session
closes with ``job_shutdown`` (at once, or as soon as its start begins: the close cancels
the start).

This module uses the session through its public API only (``on``/``off``, ``events``,
``state``, ``input``, ``output``, ``shutdown``, ``interrupt``, ``generate_reply``), so ``io``
does not import the session.
"""

from __future__ import annotations

import datetime
import logging
import math
import uuid
from types import TracebackType
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, cast
from urllib.parse import urlparse

import trio
from livekit import rtc
from livekit.rtc.room import EventTypes

from .._errors import AgentsTrioError
from ..nurseries import LatestSlot, open_unwrapping_nursery
from .audio import TextOutput
from ..events import AgentStateChangedEvent, CloseEvent, CloseReason, UserInputTranscribedEvent
from .bridge import AsyncioBridge, BridgeReceiveChannel, current_bridge
from .room_audio import RoomAudioInput, RoomAudioOutput, open_room_audio_output
from .session_port import RoomSession, wait_session_running, wait_session_started
from .room_chat import ChatInbox, TextInputEvent, TextInputStatistics
from .room_options import DEFAULT_TRACK_NAME, RoomOptions

__all__ = ["RoomConnectError", "RoomDisconnectedError", "RoomIO", "RoomOptions",
           "RoomTranscriptionOutput", "TextInputEvent", "TextInputStatistics", "mint_token",
           "open_room", "open_room_io"]

logger = logging.getLogger("agents_trio.room")

TOPIC_CHAT = "lk.chat"
TOPIC_TRANSCRIPTION = "lk.transcription"
ATTRIBUTE_AGENT_STATE = "lk.agent.state"
ATTRIBUTE_TRANSCRIPTION_FINAL = "lk.transcription_final"
ATTRIBUTE_TRANSCRIPTION_SEGMENT_ID = "lk.segment_id"
ATTRIBUTE_TRANSCRIPTION_TRACK_ID = "lk.transcribed_track_id"
ATTRIBUTE_PUBLISH_ON_BEHALF = "lk.publish_on_behalf"

# a participant leaving for these reasons is gone for good; others may reconnect
CLOSE_ON_DISCONNECT_REASONS = (
    rtc.DisconnectReason.CLIENT_INITIATED,
    rtc.DisconnectReason.ROOM_DELETED,
    rtc.DisconnectReason.USER_REJECTED,
)

_GRACE = 2.0


class RoomConnectError(AgentsTrioError):
    """Connecting to a room failed: bad URL, rejected token, unreachable server, timeout."""


class RoomDisconnectedError(AgentsTrioError):
    """The agent's room connection is gone (dropped, or closed before it was used)."""


# -- connecting -------------------------------------------------------------------------------
def mint_token(api_key: str, api_secret: str, *, room: str, identity: str,
               name: str | None = None, kind: str = "agent",
               ttl: datetime.timedelta = datetime.timedelta(hours=6)) -> str:
    """An access token joining ``room`` as ``identity``, signed with the API key and secret.

    Needs ``livekit-api`` (the ``livekit-plugins`` extra). The agent may publish, subscribe,
    send data and update its own attributes (``lk.agent.state``).
    """
    try:
        from livekit import api
    except ImportError as e:  # pragma: no cover - depends on the install
        raise RoomConnectError("minting a token needs livekit-api: "
                               "pip install 'agents-trio[livekit-plugins]'") from e
    if not api_key or not api_secret:
        raise RoomConnectError("an API key and secret are needed to mint a token "
                               "(LIVEKIT_API_KEY, LIVEKIT_API_SECRET)")
    grants = api.VideoGrants(room_join=True, room=room, can_publish=True, can_subscribe=True,
                             can_publish_data=True, can_update_own_metadata=True)
    token = (api.AccessToken(api_key, api_secret).with_identity(identity).with_grants(grants)
             .with_ttl(ttl).with_kind(kind))  # type: ignore[arg-type]
    if name:
        token = token.with_name(name)
    return token.to_jwt()


def _check_url(url: str) -> None:
    parsed = urlparse(url or "")
    if parsed.scheme not in ("ws", "wss", "http", "https") or not parsed.netloc:
        raise RoomConnectError(f"invalid LiveKit URL {url!r}: expected ws[s]://host[:port] "
                               "(e.g. wss://my-project.livekit.cloud)")


def _explain(url: str, message: str) -> str:
    if "401" in message or "nauthorized" in message or "invalid token" in message:
        hint = "the server rejected the token (wrong API key/secret, expired or for another room)"
    elif "refused" in message or "resolve" in message or "dns" in message.lower():
        hint = "the server is unreachable"
    else:
        hint = "the connection failed"
    return f"could not connect to {url}: {hint}: {message}"


@asynccontextmanager
async def open_room(url: str, token: str, *, bridge: AsyncioBridge | None = None,
                    connect_timeout: float = 10.0, auto_subscribe: bool = True
                    ) -> AsyncIterator[rtc.Room]:
    """Connect to a LiveKit room; leaving the block disconnects.

    Args:
        url: The server URL (``wss://…``).
        token: An access token (see :func:`mint_token`).
        bridge: The bridge the room lives on (default: the current one).
        connect_timeout: Seconds before giving up.
        auto_subscribe: Subscribe to every published track (RoomIO needs the microphone).

    Raises:
        RoomConnectError: The URL is malformed, the token was rejected, the server is
            unreachable, or the connection timed out.

    Cancellation:
        Cancelling a connect in progress cancels it. Leaving the block disconnects
        (shielded, bounded); the room's asyncio tasks end with it.
    """
    _check_url(url)
    if not token:
        raise RoomConnectError("no access token: pass one, or an API key and secret to mint it")
    bridge = bridge or current_bridge()
    room = await bridge.run_sync(rtc.Room)
    try:
        with trio.fail_after(connect_timeout):
            await bridge.run(room.connect, url, token,
                             rtc.RoomOptions(auto_subscribe=auto_subscribe))
    except trio.TooSlowError:
        await _disconnect(bridge, room)
        raise RoomConnectError(f"timed out after {connect_timeout:g} s connecting to {url}"
                               ) from None
    except rtc.ConnectError as e:
        raise RoomConnectError(_explain(url, e.message)) from e
    try:
        yield room
    finally:
        await _disconnect(bridge, room)


async def _disconnect(bridge: AsyncioBridge, room: rtc.Room) -> None:
    with trio.move_on_after(_GRACE, shield=True):
        if not bridge.closed:
            try:
                await bridge.run(room.disconnect)
            except Exception:
                logger.warning("disconnecting from the room failed", exc_info=True)


# -- room I/O ----------------------------------------------------------------------------------
class RoomTranscriptionOutput(TextOutput):
    """The agent's transcription on the ``lk.transcription`` text stream (one stream per
    segment: written as the text plays, closed with ``lk.transcription_final`` on flush);
    ``next_in_chain`` (``TextOutputOptions.next_in_chain``) receives the same text after."""

    def __init__(self, send: trio.MemorySendChannel[tuple[Any, ...]], *,
                 next_in_chain: TextOutput | None = None) -> None:
        self._send = send
        self.next_in_chain = next_in_chain

    async def capture_text(self, text: str) -> None:
        """Queue ``text`` for the room (sent in order by the room I/O's publisher), then hand
        it to ``next_in_chain``.

        Cancellation: the text is queued for the room at once; cancelling the wait on
        ``next_in_chain`` drops it there only.
        """
        if text:
            self._put(("agent_text", text))
        if self.next_in_chain is not None:
            await self.next_in_chain.capture_text(text)

    def flush(self) -> None:
        self._put(("agent_flush",))
        if self.next_in_chain is not None:
            self.next_in_chain.flush()

    def _put(self, op: tuple[Any, ...]) -> None:
        try:
            self._send.send_nowait(op)
        except trio.ClosedResourceError:
            logger.debug("transcription after the room I/O closed dropped: %r", op)


class RoomIO:
    """The link between a room and a session (create it with :func:`open_room_io`).

    An async context manager that owns its setup and teardown: ``open_room_io`` enters it,
    and the link lasts for the block.

    Attributes:
        room: The ``rtc.Room``.
        audio_input, audio_output, transcription_output: The session's I/O (or None).
    """

    def __init__(self, room: rtc.Room, session: RoomSession, bridge: AsyncioBridge,
                 options: RoomOptions) -> None:
        self.room = room
        self.session = session
        self._bridge = bridge
        self._options = options
        self.audio_input: RoomAudioInput | None = None
        self.audio_output: RoomAudioOutput | None = None
        self.transcription_output: RoomTranscriptionOutput | None = None
        self._publication: rtc.LocalTrackPublication | None = None
        self._linked: rtc.RemoteParticipant | None = None
        # the identity the link belongs to; kept while its participant may reconnect
        self._held_identity: str | None = None
        self._changed = trio.Event()   # a link, an unlink, or the room gone
        self._room_gone = trio.Event()
        self._session_closed = trio.Event()
        self.close_reason: str | None = None
        self._track_slot: LatestSlot | None = None
        # the track served as the user's audio, while it is (see _stop_input_track)
        self._input_track_sid: str | None = None
        self._texts_send, self._texts_recv = trio.open_memory_channel[tuple[Any, ...]](math.inf)
        self._texts_published = trio.Event()
        self._states_send, self._states_recv = trio.open_memory_channel[str](math.inf)
        self._chat = ChatInbox(max_messages=options.text_input_max_messages,
                               max_chars=options.text_input_max_chars)
        self._chat_send, self._chat_recv = trio.open_memory_channel[
            tuple[rtc.TextStreamReader, str]](math.inf)
        self._lifetime: AbstractAsyncContextManager[RoomIO] | None = None

    # -- public -------------------------------------------------------------------------------
    @property
    def linked_participant(self) -> rtc.RemoteParticipant | None:
        return self._linked

    async def wait_for_participant(self) -> rtc.RemoteParticipant:
        """Wait until a participant is linked and return it.

        Raises:
            RoomDisconnectedError: The room disconnected (before or while waiting).

        Cancellation: a checkpoint; nothing else happens.
        """
        while True:
            if self._room_gone.is_set():
                raise RoomDisconnectedError("the room disconnected while waiting for a "
                                            "participant")
            if self._linked is not None:
                await trio.lowlevel.checkpoint()
                return self._linked
            await self._changed.wait()

    async def wait_session_closed(self) -> str | None:
        """Wait until the session emitted ``close``; returns its reason.

        Cancellation: a checkpoint; nothing else happens.
        """
        await self._session_closed.wait()
        return self.close_reason

    def text_input_statistics(self) -> TextInputStatistics:
        """Counters of the chat input (received, refused, delivered, ignored)."""
        return self._chat.statistics()

    # -- lifetime (the block of open_room_io) ---------------------------------------------------
    async def __aenter__(self) -> RoomIO:
        """Link the room and the session; see :func:`open_room_io` (which enters this).

        Cancellation: cancelling it unlinks what was linked so far (shielded, bounded).
        """
        self._lifetime = self._linked_for_the_block()
        return await self._lifetime.__aenter__()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        """Unlink; see :func:`open_room_io` for what leaving the block does.

        Cancellation: the queued transcriptions are still sent and the track unpublished
        (shielded, bounded); the room I/O's tasks are cancelled.
        """
        assert self._lifetime is not None, "RoomIO exited without being entered"
        return await self._lifetime.__aexit__(exc_type, exc, tb)

    @asynccontextmanager
    async def _linked_for_the_block(self) -> AsyncIterator[RoomIO]:
        """Set up the link, yield, tear it down (see :func:`open_room_io`)."""
        room, session, bridge, options = self.room, self.session, self._bridge, self._options
        push, events = bridge.callback_channel(convert=lambda name, *args: (name, args))
        handlers = {name: (lambda *a, _n=name: push(_n, *a)) for name in _ROOM_EVENTS}
        chat_registered = False
        session_hooks: list[tuple[str, Callable[[Any], None]]] = [
            ("agent_state_changed", self._on_agent_state),
            ("user_input_transcribed", self._on_user_transcribed),
            ("close", self._on_session_close)]
        try:
            async with open_unwrapping_nursery() as nursery, \
                    _maybe_output(bridge, options) as output:
                self._track_slot = LatestSlot(nursery)
                for name, handler in handlers.items():
                    room.on(name, handler)
                # watched from here on: a disconnect before this line shows here, one after it
                # arrives as an event
                if not room.isconnected():
                    raise RoomDisconnectedError("the room is not connected (it disconnected "
                                                "before the session was linked to it)")
                if options.get_text_input_options() is not None:
                    try:
                        room.register_text_stream_handler(
                            TOPIC_CHAT, lambda reader, identity: push("chat", reader, identity))
                        chat_registered = True
                    except ValueError:
                        logger.warning("a %r text stream handler is already registered; text "
                                       "input is off", TOPIC_CHAT)
                nursery.start_soon(self._serve_room_events, events)
                nursery.start_soon(self._close_session_when_room_gone)
                if chat_registered:
                    nursery.start_soon(self._read_chat)
                    nursery.start_soon(self._deliver_chat)
                audio_in = options.get_audio_input_options()
                if audio_in is not None:
                    self.audio_input = RoomAudioInput(
                        bridge, sample_rate=audio_in.sample_rate,
                        num_channels=audio_in.num_channels,
                        frame_size_ms=audio_in.frame_size_ms)
                    session.input.audio = self.audio_input
                if output is not None:
                    self.audio_output = output
                    output.on_failure = self._on_output_failure
                    audio_out = options.get_audio_output_options()
                    assert audio_out is not None  # the output is opened from them
                    track = await output.create_track(audio_out.track_name or DEFAULT_TRACK_NAME)
                    publish = audio_out.track_publish_options
                    self._publication = await bridge.run(room.local_participant.publish_track,
                                                         track, publish)
                    nursery.start_soon(self._open_audio_gate, self._publication)
                    session.output.audio = output
                text_out = options.get_text_output_options()
                if text_out is not None:
                    self.transcription_output = RoomTranscriptionOutput(
                        self._texts_send, next_in_chain=text_out.next_in_chain)
                    self.transcription_output.synchronized = \
                        text_out.sync_transcription is not False
                    session.output.transcription = self.transcription_output
                    nursery.start_soon(self._publish_texts)
                else:
                    self._texts_published.set()
                if options.agent_state:
                    nursery.start_soon(self._publish_states)
                for event_name, hook in session_hooks:
                    session.on(event_name, hook)
                for participant in list(room.remote_participants.values()):
                    self._link(participant)
                try:
                    yield self
                finally:
                    await self._drain_texts()
                    nursery.cancel_scope.cancel()
                    if self.audio_input is not None:
                        self.audio_input.close()
                    await _unpublish(bridge, room, self._publication)
        finally:
            for event_name, hook in session_hooks:
                session.off(event_name, hook)
            for name, handler in handlers.items():
                room.off(name, handler)
            if chat_registered:
                room.unregister_text_stream_handler(TOPIC_CHAT)
            events.close()

    # -- session hooks (called by the session's event fan-out) ----------------------------------
    def _on_agent_state(self, ev: AgentStateChangedEvent) -> None:
        self._states_send.send_nowait(ev.new_state)

    def _on_user_transcribed(self, ev: UserInputTranscribedEvent) -> None:
        try:
            self._texts_send.send_nowait(("user_text", ev.transcript, ev.is_final))
        except trio.ClosedResourceError:
            pass  # the room I/O is closing: its last transcriptions are being sent

    def _on_session_close(self, ev: CloseEvent) -> None:
        self.close_reason = getattr(ev, "reason", None)
        self._session_closed.set()

    # -- participants -------------------------------------------------------------------------
    @property
    def _speaker_identity(self) -> str | None:
        """Who speaks for the user: the named identity, or the one the link belongs to."""
        return self._options.participant_identity or self._held_identity

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _acceptable(self, participant: rtc.RemoteParticipant) -> bool:
        identity = self._speaker_identity
        if identity is not None:
            return participant.identity == identity
        on_behalf = participant.attributes.get(ATTRIBUTE_PUBLISH_ON_BEHALF)
        if on_behalf and on_behalf == self.room.local_participant.identity:
            return False
        return participant.kind in self._options.participant_kinds

    def _link(self, participant: rtc.RemoteParticipant) -> None:
        if self._linked is not None or not self._acceptable(participant):
            return
        self._linked = participant
        self._held_identity = participant.identity
        self._wake()
        logger.info("room I/O linked to participant %s", participant.identity)
        for publication in list(participant.track_publications.values()):
            if publication.track is not None and publication.subscribed:
                self._on_track_subscribed(publication.track, publication, participant)

    def _on_track_subscribed(self, track: rtc.Track, publication: rtc.RemoteTrackPublication,
                             participant: rtc.RemoteParticipant) -> None:
        if (self._linked is None or participant.identity != self._linked.identity
                or self.audio_input is None or self._track_slot is None):
            return
        if track.kind != rtc.TrackKind.KIND_AUDIO or (
                publication.source != rtc.TrackSource.SOURCE_MICROPHONE):
            return
        self._input_track_sid = publication.sid
        self._track_slot.replace(self.audio_input.serve_track, track)

    def _stop_input_track(self) -> None:
        """The input track is no longer served: its serving is cancelled and its id (which
        the user's transcriptions name) goes with it."""
        self._input_track_sid = None
        if self._track_slot is not None:
            self._track_slot.cancel()

    def _on_track_unsubscribed(self, track: rtc.Track, publication: rtc.RemoteTrackPublication,
                               participant: rtc.RemoteParticipant) -> None:
        if publication.sid == self._input_track_sid:
            self._stop_input_track()

    def _on_participant_disconnected(self, participant: rtc.RemoteParticipant) -> None:
        if self._linked is None or participant.identity != self._linked.identity:
            return
        self._linked = None
        self._wake()
        self._stop_input_track()
        # set by the SDK before it emits participant_disconnected
        reason = cast("rtc.DisconnectReason.ValueType", participant.disconnect_reason)
        if reason not in CLOSE_ON_DISCONNECT_REASONS:
            logger.info("participant %s dropped (%s); the link waits for them to rejoin",
                        participant.identity, rtc.DisconnectReason.Name(reason))
            return
        self._held_identity = None   # gone for good: the next participant may be linked
        if self._options.close_on_disconnect:
            logger.info("closing the session: participant %s left (%s)", participant.identity,
                        rtc.DisconnectReason.Name(reason))
            self.session.shutdown(drain=False, reason=CloseReason.PARTICIPANT_DISCONNECTED)

    def _on_output_failure(self, error: BaseException) -> None:
        logger.error("closing the session: the agent's audio output failed (%r)", error)
        self.session.shutdown(drain=False, reason=CloseReason.ERROR)

    def _on_room_disconnected(self, reason: object = None) -> None:
        if self._room_gone.is_set():
            return
        logger.warning("the agent's room connection dropped (%s); closing the session", reason)
        self._room_gone.set()
        self._wake()

    def _on_chat(self, reader: rtc.TextStreamReader, identity: str) -> None:
        speaker = self._speaker_identity
        if speaker is None or identity != speaker:
            self._chat.ignore(identity, "not the participant linked as the user"
                              if speaker else "no participant is linked yet")
        elif self._chat.reserve(identity):
            self._chat_send.send_nowait((reader, identity))

    # -- tasks ----------------------------------------------------------------------------------
    async def _close_session_when_room_gone(self) -> None:
        """The room's end closes the session: at once, or as soon as its start begins (a
        close then cancels the start: the agent does not enter a room that is gone)."""
        await self._room_gone.wait()
        await wait_session_started(self.session)
        self.session.shutdown(drain=False, reason=CloseReason.JOB_SHUTDOWN)

    async def _serve_room_events(
            self, events: BridgeReceiveChannel[tuple[str, tuple[Any, ...]]]) -> None:
        handlers: dict[str, Callable[..., None]] = {
            "participant_connected": self._link,
            "participant_disconnected": self._on_participant_disconnected,
            "track_subscribed": self._on_track_subscribed,
            "track_unsubscribed": self._on_track_unsubscribed,
            "disconnected": self._on_room_disconnected,
            "chat": self._on_chat,
        }
        while True:
            try:
                batch = await events.receive_batch()
            except trio.EndOfChannel:
                return
            # a whole batch without a checkpoint: a burst of chat is judged against one state
            for name, args in batch:
                try:
                    handlers[name](*args)
                except Exception:
                    logger.exception("room I/O failed to handle %r", name)

    async def _read_chat(self) -> None:
        """The one chat reader: reads what arrived, in order, into the inbox."""
        while True:
            try:
                batch = [await self._chat_recv.receive()]
            except trio.EndOfChannel:
                return
            while True:
                try:
                    batch.append(self._chat_recv.receive_nowait())
                except trio.WouldBlock:
                    break
            texts = await self._bridge.run(_read_texts, [reader for reader, _ in batch])
            for (reader, identity), text in zip(batch, texts):
                self._chat.fill(identity, text, info=getattr(reader, "info", None),
                                participant=self.room.remote_participants.get(identity))

    async def _deliver_chat(self) -> None:
        """The one chat deliverer: the inbox to ``text_input_cb``, one input at a time, from
        the moment the session runs (what the user typed before waits for the agent; a
        session that closes without running answers nothing)."""
        text_options = self._options.get_text_input_options()
        assert text_options is not None  # the deliverer runs when text input is on
        text_input_cb = text_options.text_input_cb
        if not await wait_session_running(self.session):
            return
        while True:
            ev = await self._chat.take()
            try:
                await text_input_cb(self.session, ev)
            except Exception:
                logger.warning("failed to handle text input from %s", ev.participant_identity,
                               exc_info=True)

    async def _publish_states(self) -> None:
        async for state in self._states_recv:
            while True:  # latest wins
                try:
                    state = self._states_recv.receive_nowait()
                except trio.WouldBlock:
                    break
            if not self.room.isconnected():
                continue
            try:
                await self._bridge.run(self.room.local_participant.set_attributes,
                                       {ATTRIBUTE_AGENT_STATE: state})
            except Exception as e:
                logger.warning("failed to publish the agent state: %s", e)

    async def _publish_texts(self) -> None:
        """Transcriptions to the room, in order, until the channel closes (on exit: what is
        queued, such as the final text of a speech cut by the close, is still sent)."""
        try:
            await self._publish_text_ops()
        finally:
            self._texts_published.set()

    async def _drain_texts(self) -> None:
        """Let the queued transcriptions go out (shielded, bounded)."""
        self._texts_send.close()
        with trio.move_on_after(_GRACE, shield=True):
            await self._texts_published.wait()

    async def _publish_text_ops(self) -> None:
        writer: rtc.TextStreamWriter | None = None
        segment_id = _segment_id()
        user_segment_id = _segment_id()
        async for op in self._texts_recv:
            try:
                if op[0] == "agent_text":
                    if writer is None:
                        writer = await self._open_writer(
                            {ATTRIBUTE_TRANSCRIPTION_FINAL: "false",
                             ATTRIBUTE_TRANSCRIPTION_SEGMENT_ID: segment_id}, self._agent_track)
                    if writer is not None:
                        await self._bridge.run(writer.write, op[1])
                elif op[0] == "agent_flush":
                    if writer is not None:
                        closing, writer = writer, None
                        attrs = {ATTRIBUTE_TRANSCRIPTION_FINAL: "true",
                                 ATTRIBUTE_TRANSCRIPTION_SEGMENT_ID: segment_id}
                        await self._bridge.run(closing.aclose, attributes=attrs)
                    segment_id = _segment_id()
                elif op[0] == "user_text" and self._linked is not None:
                    _, text, final = op
                    user = await self._open_writer(
                        {ATTRIBUTE_TRANSCRIPTION_FINAL: "true" if final else "false",
                         ATTRIBUTE_TRANSCRIPTION_SEGMENT_ID: user_segment_id},
                        self._input_track_sid, sender=self._linked.identity)
                    if user is not None:
                        await self._bridge.run(user.write, text)
                        await self._bridge.run(user.aclose)
                    if final:
                        user_segment_id = _segment_id()
            except Exception as e:
                writer = None
                logger.warning("failed to publish a transcription to the room: %s", e)

    @property
    def _agent_track(self) -> str | None:
        return self._publication.sid if self._publication is not None else None

    async def _open_writer(self, attributes: dict[str, str], track_sid: str | None, *,
                           sender: str | None = None) -> rtc.TextStreamWriter | None:
        if not self.room.isconnected():
            return None
        if track_sid:
            attributes[ATTRIBUTE_TRANSCRIPTION_TRACK_ID] = track_sid
        local = self.room.local_participant
        writer: rtc.TextStreamWriter = await self._bridge.run(
            local.stream_text, topic=TOPIC_TRANSCRIPTION, attributes=attributes,
            sender_identity=sender or local.identity)
        return writer

    async def _open_audio_gate(self, publication: rtc.LocalTrackPublication) -> None:
        """Hold the agent's audio until someone subscribed to it (or the room is gone), so a
        greeting is not played to an empty room."""
        assert self.audio_output is not None
        gate = self.audio_output.hold()
        try:
            await self._bridge.run(publication.wait_for_subscription)
        finally:
            gate.set()


def _segment_id() -> str:
    return f"SG_{uuid.uuid4().hex[:12]}"


_ROOM_EVENTS: tuple[EventTypes, ...] = ("participant_connected", "participant_disconnected",
                                        "track_subscribed", "track_unsubscribed", "disconnected")


@asynccontextmanager
async def open_room_io(room: rtc.Room, session: RoomSession, *,
                       options: RoomOptions | None = None,
                       bridge: AsyncioBridge | None = None) -> AsyncIterator[RoomIO]:
    """Use ``room`` as the I/O of ``session`` until the block exits (see the module docstring).

    Enter it before the session starts (it sets ``session.input.audio``,
    ``session.output.audio`` and ``session.output.transcription``) and leave it after the
    session closed, e.g. ``async with open_room_io(room, session) as rio, session:``.

    Raises:
        RoomDisconnectedError: The room is not connected (checked once its events are
            watched, so a disconnect is either seen here or closes the session later).
        Whatever the body raises (unwrapped; the RoomIO's own tasks log their errors).

    Cancellation:
        Owns the tasks serving the room (events, the input track, chat, text and state
        publishing). Leaving the block sends the transcriptions still queued, then cancels
        them, unpublishes the agent's track and unregisters every handler (shielded,
        bounded).
    """
    async with RoomIO(room, session, bridge or current_bridge(), options or RoomOptions()
                      ) as rio:
        yield rio


async def _read_texts(readers: list[rtc.TextStreamReader]) -> list[str | None]:
    """asyncio-flavoured: the text of each chat stream, in order (None where reading failed)."""
    texts: list[str | None] = []
    for reader in readers:
        try:
            texts.append(await reader.read_all())
        except Exception as e:
            logger.warning("failed to read a chat message: %r", e)
            texts.append(None)
    return texts


@asynccontextmanager
async def _maybe_output(bridge: AsyncioBridge, options: RoomOptions
                        ) -> AsyncIterator[RoomAudioOutput | None]:
    audio_out = options.get_audio_output_options()
    if audio_out is None:
        yield None
        return
    async with open_room_audio_output(bridge, sample_rate=audio_out.sample_rate,
                                      num_channels=audio_out.num_channels,
                                      queue_size_ms=options.output_queue_ms) as output:
        yield output


async def _unpublish(bridge: AsyncioBridge, room: rtc.Room,
                     publication: rtc.LocalTrackPublication | None) -> None:
    if publication is None or bridge.closed or not room.isconnected():
        return
    with trio.move_on_after(_GRACE, shield=True):
        try:
            await bridge.run(room.local_participant.unpublish_track, publication.sid)
        except Exception as e:
            logger.debug("unpublishing the agent's track failed: %s", e)
