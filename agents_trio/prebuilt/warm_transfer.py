"""WarmTransferTask: hand the caller to a human over SIP (LiveKit's
``beta.workflows.WarmTransferTask``).

Awaited from a tool of the caller's agent, in a job whose room holds the caller::

    result = await WarmTransferTask("+15105550123", chat_ctx=self.chat_ctx)

What happens, as in LiveKit:

1. The caller is put on hold: hold music plays in the caller's room and the caller session's
   audio input, audio output and transcription output are switched off (those it has),
   to be switched back to how they were when the task completes.
2. A consultation room ``<caller room>-human-agent`` is joined with the agent's identity, a
   second :class:`~agents_trio.AgentSession` (the caller session's models) runs there with a
   copy of the task as its agent, and the human is dialed into it with the server API
   (``CreateSIPParticipant``, waiting until answered) as ``human-agent-sip``.
3. The agent briefs the human with the caller conversation (``chat_ctx``), which is part of
   the instructions. The human decides: ``connect_to_caller`` moves them into the caller's
   room (``MoveParticipant``) and completes the task with a :class:`WarmTransferResult`;
   ``decline_transfer`` and ``voicemail_detected`` fail it with a ``ToolError``.
4. Whatever the outcome, the consultation session closes and its room is deleted; the hold
   ends. Failing to dial (or the human hanging up, or the consultation room closing) fails
   the task with a ``ToolError`` and the caller's conversation resumes.
5. After a transfer, when the caller or the human leaves the caller's room, the room is
   deleted (it would otherwise keep the other one waiting).

Who owns what: the consultation leg (the hold player, the consultation room, its session,
the server API client) is one service of the caller's session, started by ``on_enter``.
It ends when the task completes or the caller's session closes; leaving it closes all of
them in reverse order.

Configuration comes from the job: its room is the caller's, its bridge runs the SDK, its URL
is the server's (``LIVEKIT_URL`` when the job does not know it); the API key and secret are
``LIVEKIT_API_KEY``/``LIVEKIT_API_SECRET``, as for LiveKit's job.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio
from livekit import rtc

from .._errors import ToolError
from ..agent import NOT_GIVEN, Agent, NotGiven
from ..agent_task import AgentTask
from ..background_audio import (AudioConfig, AudioSource, BackgroundAudioPlayer,
                                BuiltinAudioClip, PlayHandle)
from ..chat import ChatContext, ChatMessage
from ..events import CloseEvent
from ..instructions import Instructions
from ..io.bridge import AsyncioBridge
from ..io.room import mint_token, open_room, open_room_io
from ..io.room_options import RoomOptions
from ..io.server_api import ServerAPI, open_server_api
from ..job import JobContext, RoomOpener, get_job_context
from ..models import LLM, STT, TTS, VAD
from ..options import check_non_negative
from ..realtime import RealtimeModel
from ..session import AgentSession
from ..speech_args import check_str
from ..tools import FunctionTool, ToolFlag, function_tool

__all__ = ["HUMAN_AGENT_IDENTITY", "WarmTransferResult", "WarmTransferTask"]

logger = logging.getLogger("agents_trio")

#: the identity the dialed human has in the consultation room (and after the move)
HUMAN_AGENT_IDENTITY = "human-agent-sip"

#: LiveKit's default participant kinds: a standard or SIP participant leaving the caller's
#: room after a transfer ends the call for the other one
_CALL_PARTICIPANT_KINDS = (rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD,
                           rtc.ParticipantKind.PARTICIPANT_KIND_SIP)

_CLEANUP_GRACE = 5.0

PERSONA = """\
# Role

You called a human colleague to take over a call. Before you, you had a conversation with \
a caller; its transcript follows.

# Aim

Tell the human colleague why the caller called and what was said, so that they can help \
the caller themselves."""

TEMPLATE = """\
{persona}

# Who is who

Here "user" is the human colleague you are talking to now. The caller is the person in the \
transcript; they cannot hear you.

## Transcript of the call
{history}
## End of the transcript

Start with a short summary of the call and answer the colleague's questions. When they \
agree to take the call, call the tool `connect_to_caller`.

{extra}
"""


@dataclass
class WarmTransferResult:
    """The transfer succeeded: the human is in the caller's room under this identity."""

    human_agent_identity: str


def conversation_transcript(chat_ctx: ChatContext | None) -> str:
    """The caller conversation as the briefing shows it: one ``Caller:`` or ``Assistant:``
    line per user or assistant message with text."""
    if not chat_ctx:
        return ""
    lines = []
    for item in chat_ctx.items:
        if not isinstance(item, ChatMessage) or item.role not in ("user", "assistant"):
            continue
        text = item.text_content
        if text:
            lines.append(f"{'Caller' if item.role == 'user' else 'Assistant'}: {text}\n")
    return "".join(lines)


class WarmTransferTask(AgentTask[WarmTransferResult]):
    """Put the caller on hold, brief a human reached over SIP, and move them into the caller's
    room; completes with a :class:`WarmTransferResult` or fails with a ``ToolError``.

    Tools the model sees (in the consultation): ``connect_to_caller()``,
    ``decline_transfer(reason)``, ``voicemail_detected()``.

    Args:
        sip_call_to: The number or SIP URI to dial (required; ``target_phone_number`` is its
            deprecated name).
        sip_trunk_id: The outbound SIP trunk; default ``LIVEKIT_SIP_OUTBOUND_TRUNK`` unless
            ``sip_connection`` is given.
        sip_connection: A ``livekit.api.SIPOutboundConfig`` to dial without a saved trunk.
        sip_number: The number to call from; default ``LIVEKIT_SIP_NUMBER``.
        sip_headers: SIP headers for the call.
        dtmf: Digits to send once answered (``w`` waits half a second).
        ringing_timeout: Seconds to let it ring (the server's default when not given).
        hold_audio: What the caller hears meanwhile (default: the built-in hold music at 0.8;
            ``None``: silence).
        instructions: Replace the briefing instructions (then ``extra_instructions`` is
            ignored, with a warning). ``WorkflowInstructions`` objects are not available.
        chat_ctx: The caller conversation to brief with (it goes into the instructions; the
            task's own context starts empty, as in LiveKit).
        extra_instructions: Appended to the default instructions.
        turn_handling, turn_detection, tools, stt, vad, llm, tts, allow_interruptions: As for
            ``AgentTask``; they apply to the consultation.

    Raises:
        ValueError: No number to dial, no trunk or connection, or a negative
            ``ringing_timeout``.

    Cancellation: the caller's session closing (at any moment) fails the awaiter with a
    ``ToolError`` and ends the consultation leg: its session closes, its room is left and
    deleted, the hold music stops. A dial or a move in flight has its HTTP request cancelled;
    the server may still complete it. The tools complete the task at once; cancelling
    ``connect_to_caller`` during the move leaves the task running.
    """

    #: how the consultation room is joined (``open_room``'s signature); tests give a fake
    open_consultation_room: RoomOpener = staticmethod(open_room)

    def __init__(self, sip_call_to: str | NotGiven = NOT_GIVEN, *,
                 sip_trunk_id: str | None | NotGiven = NOT_GIVEN,
                 sip_connection: Any = NOT_GIVEN,  # noqa: ANN401 - api.SIPOutboundConfig
                 sip_number: str | NotGiven = NOT_GIVEN,
                 sip_headers: dict[str, str] | NotGiven = NOT_GIVEN,
                 dtmf: str | None | NotGiven = NOT_GIVEN,
                 ringing_timeout: float | None | NotGiven = NOT_GIVEN,
                 hold_audio: AudioSource | AudioConfig | list[AudioConfig] | None
                 | NotGiven = NOT_GIVEN,
                 instructions: str | Instructions | NotGiven = NOT_GIVEN,
                 chat_ctx: ChatContext | NotGiven = NOT_GIVEN,
                 turn_handling: dict[str, Any] | NotGiven = NOT_GIVEN,
                 turn_detection: Any = NOT_GIVEN,  # noqa: ANN401 - a mode or a detector
                 tools: list[FunctionTool] | NotGiven = NOT_GIVEN,
                 stt: STT | None | NotGiven = NOT_GIVEN, vad: VAD | None | NotGiven = NOT_GIVEN,
                 llm: LLM | RealtimeModel | None | NotGiven = NOT_GIVEN,
                 tts: TTS | None | NotGiven = NOT_GIVEN,
                 allow_interruptions: bool | NotGiven = NOT_GIVEN,
                 extra_instructions: str = "",
                 target_phone_number: str | NotGiven = NOT_GIVEN) -> None:
        # checked here: a wrong one would fail the dial, with the caller already on hold
        for name, value, allow_none in (
                ("sip_call_to", sip_call_to, False), ("sip_trunk_id", sip_trunk_id, True),
                ("sip_number", sip_number, False), ("dtmf", dtmf, True),
                ("extra_instructions", extra_instructions, False),
                ("target_phone_number", target_phone_number, False)):
            if not isinstance(value, NotGiven):
                check_str(name, value, allow_none=allow_none)
        if not isinstance(ringing_timeout, NotGiven):
            check_non_negative("ringing_timeout", ringing_timeout, allow_none=True)
        if isinstance(instructions, NotGiven):
            history = conversation_transcript(
                None if isinstance(chat_ctx, NotGiven) else chat_ctx)
            instructions = TEMPLATE.format(persona=PERSONA, history=history,
                                           extra=extra_instructions)
        elif extra_instructions:
            logger.warning("extra_instructions is ignored when instructions is given")
        handling = None if isinstance(turn_handling, NotGiven) else dict(turn_handling)
        if not isinstance(turn_detection, NotGiven):
            handling = {**(handling or {}), "turn_detection": turn_detection}
        super().__init__(
            instructions=instructions, chat_ctx=None,  # the history is in the instructions
            tools=[] if isinstance(tools, NotGiven) else tools, stt=stt, vad=vad, llm=llm,
            tts=tts, turn_handling=handling,
            allow_interruptions=(None if isinstance(allow_interruptions, NotGiven)
                                 else allow_interruptions))
        if not isinstance(target_phone_number, NotGiven) and target_phone_number:
            logger.warning("target_phone_number is deprecated: use sip_call_to")
            if isinstance(sip_call_to, NotGiven) or not sip_call_to:
                sip_call_to = target_phone_number
        if isinstance(sip_call_to, NotGiven) or not sip_call_to:
            raise ValueError("WarmTransferTask: sip_call_to (the number or SIP URI to dial) "
                             "must be set")
        self.sip_call_to: str = sip_call_to
        self.sip_connection: Any = None if isinstance(sip_connection, NotGiven) else sip_connection
        if not isinstance(sip_trunk_id, NotGiven):
            self.sip_trunk_id: str | None = sip_trunk_id
        elif self.sip_connection is not None:
            self.sip_trunk_id = None  # an explicit connection is not overridden by the env
        else:
            self.sip_trunk_id = os.getenv("LIVEKIT_SIP_OUTBOUND_TRUNK")
        if self.sip_trunk_id is None and self.sip_connection is None:
            raise ValueError("WarmTransferTask: give sip_trunk_id or sip_connection, or set "
                             "LIVEKIT_SIP_OUTBOUND_TRUNK")
        self.sip_number: str = (os.getenv("LIVEKIT_SIP_NUMBER", "")
                                if isinstance(sip_number, NotGiven) else sip_number)
        self.sip_headers: dict[str, str] = ({} if isinstance(sip_headers, NotGiven)
                                            else dict(sip_headers))
        self.dtmf: str | None = None if isinstance(dtmf, NotGiven) else dtmf
        self.ringing_timeout: float | None = (None if isinstance(ringing_timeout, NotGiven)
                                              else ringing_timeout)  # checked above
        self.hold_audio: AudioSource | AudioConfig | list[AudioConfig] | None = (
            AudioConfig(BuiltinAudioClip.HOLD_MUSIC, volume=0.8)
            if isinstance(hold_audio, NotGiven) else hold_audio)
        self._caller_session: AgentSession | None = None
        self._io_before_hold: dict[str, bool] = {}
        self._hold_handle: PlayHandle | None = None
        self._ended = trio.Event()  # the task completed: the consultation leg winds down
        self._transferred = trio.Event()
        self._caller_room: Any = None
        self._consultation_room: Any = None
        self._server: ServerAPI | None = None
        self._caller_closed = trio.Event()

    # -- the caller side ------------------------------------------------------------------------
    async def on_enter(self) -> None:
        """Put the caller on hold and start the consultation leg (dialing runs on). Outside
        a job (the caller's room comes from the job) the task fails at once with a
        ``ToolError``.

        Cancellation: cancelled before the leg started, nothing is left running.
        """
        try:
            ctx = get_job_context()
            session = self.session
            if not isinstance(session, AgentSession):
                raise RuntimeError("WarmTransferTask runs in an AgentSession")
            self._caller_room = ctx.room
            self._caller_session = session
            await session.start_service(self._consultation_leg, ctx, session)
        except Exception:
            # e.g. not in a job: the awaiter gets LiveKit's error instead of waiting for ever
            logger.exception("could not dial human agent")
            self._finish(ToolError("could not dial human agent"))

    def _set_io_enabled(self, enabled: bool) -> None:
        """Switch the caller session's I/O off (hold) or back to how it was before."""
        if self._caller_session is None:
            return
        inp, out = self._caller_session.input, self._caller_session.output
        if not self._io_before_hold:
            self._io_before_hold = {"audio_input": inp.audio_enabled,
                                    "audio_output": out.audio_enabled,
                                    "transcription_output": out.transcription_enabled}
        before = self._io_before_hold
        if inp.audio is not None:
            inp.set_audio_enabled(enabled and before["audio_input"])
        if out.audio is not None:
            out.set_audio_enabled(enabled and before["audio_output"])
        if out.transcription is not None:
            out.set_transcription_enabled(enabled and before["transcription_output"])

    def complete(self, result: WarmTransferResult | BaseException) -> None:
        """Complete the task (see ``AgentTask.complete``); the hold ends and the
        consultation leg winds down, whatever completed it (a tool, a close, a handoff)."""
        super().complete(result)
        if self._hold_handle is not None:
            self._hold_handle.stop()
            self._hold_handle = None
        self._set_io_enabled(True)
        self._ended.set()

    def _finish(self, result: WarmTransferResult | Exception) -> None:
        if not self.done():
            self.complete(result)

    # -- the consultation ---------------------------------------------------------------------
    async def _consultation_leg(self, ctx: JobContext, caller: AgentSession, *,
                                task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                                ) -> None:
        with trio.CancelScope() as scope:
            def on_caller_close(_: CloseEvent) -> None:
                self._caller_closed.set()
                if not self._transferred.is_set():
                    scope.cancel()  # before a transfer, the leg has nobody left to serve

            caller.on("close", on_caller_close)
            try:
                async with AsyncExitStack() as stack:
                    await self._start_hold(stack, ctx)
                    task_status.started()
                    try:
                        await self._consult(ctx)
                    except Exception:
                        logger.exception("could not dial human agent")
                        self._finish(ToolError("could not dial human agent"))
                        return
                if self._transferred.is_set():
                    await self._end_call_when_someone_leaves(ctx)
            finally:
                caller.off("close", on_caller_close)

    async def _start_hold(self, stack: AsyncExitStack, ctx: JobContext) -> None:
        if self.hold_audio is not None:
            player = await stack.enter_async_context(BackgroundAudioPlayer())
            await player.start(room=ctx.room, bridge=ctx.bridge)
            self._hold_handle = player.play(self.hold_audio, loop=True)
        self._set_io_enabled(False)

    async def _consult(self, ctx: JobContext) -> None:
        """Join the consultation room, start its session, dial the human, and stay until the
        task completed; raises when dialing fails."""
        url = _server_url(ctx)
        room_name = f"{self._caller_room.name}-human-agent"
        token = mint_token(os.getenv("LIVEKIT_API_KEY", ""), os.getenv("LIVEKIT_API_SECRET", ""),
                           room=room_name, kind="agent",
                           identity=self._caller_room.local_participant.identity)
        session = self.session
        assert isinstance(session, AgentSession)  # checked by on_enter
        human_session, human_agent = self._consultation_session(session)
        async with open_server_api(url, bridge=ctx.bridge) as server, \
                self._in_consultation_room(url, token, ctx.bridge, server, room_name) as room, \
                open_room_io(room, human_session, bridge=ctx.bridge, options=RoomOptions(
                    close_on_disconnect=True, participant_identity=HUMAN_AGENT_IDENTITY)), \
                human_session:
            self._server = server
            human_session.on("close", self._on_consultation_closed)
            try:
                await human_session.start(human_agent)
                await server.create_sip_participant(
                    sip_trunk_id=self.sip_trunk_id, sip_call_to=self.sip_call_to,
                    room_name=room_name, participant_identity=HUMAN_AGENT_IDENTITY,
                    wait_until_answered=True, sip_number=self.sip_number or None,
                    headers=self.sip_headers, dtmf=self.dtmf or "",
                    ringing_timeout=self.ringing_timeout, trunk=self.sip_connection)
                # the human speaks first; the consultation runs until the task completes
                await self._ended.wait()
            finally:
                human_session.off("close", self._on_consultation_closed)

    @asynccontextmanager
    async def _in_consultation_room(self, url: str, token: str, bridge: AsyncioBridge,
                                    server: ServerAPI, room_name: str) -> AsyncIterator[Any]:
        """The consultation room for the block; as LiveKit's ``delete_room_on_close``, it is
        deleted when the block ends (the human, moved or not, is no longer wanted there)."""
        async with self.open_consultation_room(url, token, bridge=bridge) as room:
            self._consultation_room = room
            room.on("disconnected", self._on_consultation_room_gone)
            try:
                yield room
            finally:
                room.off("disconnected", self._on_consultation_room_gone)
                with trio.move_on_after(_CLEANUP_GRACE, shield=True):
                    try:
                        await server.delete_room(room_name)
                    except Exception:
                        logger.warning("deleting the consultation room failed", exc_info=True)

    def _consultation_session(self, caller: AgentSession) -> tuple[AgentSession, Agent]:
        """The consultation's session (the caller session's models) and its agent (a copy of
        this task: same instructions, tools and models)."""
        agent_handling = dict(self.turn_handling)
        session_handling = dict(agent_handling)
        if "turn_detection" not in session_handling and caller.turn_detection is not None:
            session_handling["turn_detection"] = caller.turn_detection
        session = AgentSession(vad=caller.vad, llm=caller.llm, stt=caller.stt, tts=caller.tts,
                               turn_handling=session_handling or None)
        agent = Agent(instructions=self.instructions, turn_handling=agent_handling or None,
                      stt=self.stt, llm=self.llm, tts=self.tts, tools=self.tools,
                      chat_ctx=self.chat_ctx.copy())
        return session, agent

    def _on_consultation_room_gone(
            self, reason: rtc.DisconnectReason.ValueType = rtc.DisconnectReason.UNKNOWN_REASON
    ) -> None:
        """The consultation room disconnected: the caller's conversation resumes."""
        self._finish(ToolError(f"room closed: {rtc.DisconnectReason.Name(reason)}"))

    def _on_consultation_closed(self, event: CloseEvent) -> None:
        """The consultation session closed before a result (the human hung up): in LiveKit
        that deletes the consultation room, which fails the task as below."""
        self._finish(ToolError(f"room closed: "
                               f"{rtc.DisconnectReason.Name(rtc.DisconnectReason.ROOM_DELETED)}"))

    async def _end_call_when_someone_leaves(self, ctx: JobContext) -> None:
        """After a transfer: when the caller or the human leaves the caller's room, delete it
        (the other one would wait alone). Returns without deleting when the caller's session
        closed first for another reason."""
        room = self._caller_room
        left = trio.Event()

        def on_left(participant: Any) -> None:  # noqa: ANN401 - an rtc.RemoteParticipant
            if participant.kind in _CALL_PARTICIPANT_KINDS:
                left.set()

        room.on("participant_disconnected", on_left)
        try:
            async with trio.open_nursery() as nursery:
                async def stop_on(event: trio.Event) -> None:
                    await event.wait()
                    nursery.cancel_scope.cancel()
                nursery.start_soon(stop_on, left)
                nursery.start_soon(stop_on, self._caller_closed)
        finally:
            room.off("participant_disconnected", on_left)
        if not left.is_set():
            return
        logger.info("a participant left the caller's room %s: deleting it", room.name)
        with trio.move_on_after(_CLEANUP_GRACE, shield=True):
            try:
                async with open_server_api(_server_url(ctx), bridge=ctx.bridge) as server:
                    await server.delete_room(room.name)
            except Exception:
                logger.warning("deleting the caller's room failed", exc_info=True)

    # -- the consultation's tools ---------------------------------------------------------------
    @function_tool(flags=ToolFlag.IGNORE_ON_ENTER)
    async def connect_to_caller(self) -> None:
        """Use when the human agent agrees to take the call: connects them to the caller."""
        if self._server is None or self._consultation_room is None:
            raise ToolError("there is no human agent to connect")
        logger.debug("moving %s to the caller's room %s", HUMAN_AGENT_IDENTITY,
                     self._caller_room.name)
        self._consultation_room.off("disconnected", self._on_consultation_room_gone)
        await self._server.move_participant(room=self._consultation_room.name,
                                            identity=HUMAN_AGENT_IDENTITY,
                                            destination_room=self._caller_room.name)
        self._transferred.set()
        self._finish(WarmTransferResult(human_agent_identity=HUMAN_AGENT_IDENTITY))

    @function_tool(flags=ToolFlag.IGNORE_ON_ENTER)
    async def decline_transfer(self, reason: str) -> None:
        """Use when the human agent says they will not take the call.

        Args:
            reason: Why the human agent declined, in a few words

        Cancellation: not a checkpoint (the task completes at once).
        """
        self._finish(ToolError(f"human agent declined to connect: {reason}"))

    @function_tool(flags=ToolFlag.IGNORE_ON_ENTER)
    async def voicemail_detected(self) -> None:
        """Use once you have heard a voicemail greeting instead of a person."""
        self._finish(ToolError("voicemail detected"))


def _server_url(ctx: JobContext) -> str:
    url = ctx.url or os.getenv("LIVEKIT_URL")
    if not url:
        raise RuntimeError("WarmTransferTask needs the LiveKit server URL: set LIVEKIT_URL")
    return str(url)
