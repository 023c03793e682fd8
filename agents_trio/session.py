"""AgentSession: the nursery that owns recognition, the activities, and the event fan-out.

    async with AgentSession(stt=..., vad=..., llm=..., tts=...) as session:
        await session.start(MyAgent())
        ...

Leaving the block closes the session: the agents' speeches are interrupted and each
``on_exit`` with a matching ``on_enter`` runs once, innermost first, while its agent can still
say goodbye (within ``close_grace``); then the work tree is cancelled from the leaves up, and
``close`` is the last event.
"""

from __future__ import annotations

import contextvars
import enum
import logging
from collections.abc import (AsyncIterable, Awaitable, Callable, Generator, Iterator, Mapping,
                             Sequence)
from contextlib import AbstractAsyncContextManager, contextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol

import trio
from typing_extensions import TypeVar
from livekit import rtc

from .instructions import InputModality, Instructions
from .mcp import MCPServer, check_mcp_servers
from ._errors import SessionClosedError
from .activity import Activity, ActivityState, current_inline
from .agent import Agent
from .chat import AgentHandoff, ChatContext, ChatMessage
from .conversation import Conversation
from .floor import Floor
from .events import (AgentMetrics, AgentState, CloseEvent, CloseOverrun, CloseReason,
                     PlaybackFinishedEvent, PlaybackStartedEvent, UserState)
from .in_flight import InlineTaskStack, RunningTools
from .io.audio import AudioInput, AudioOutput, TextOutput
from .io.bridge_on_demand import BridgeOnDemand
from .model_resolution import resolve_models
from .model_resolution import resolve_turn_handling as adapt_turn_handling
from .models import LLM, STT, TTS, VAD, ModelSettings, ToolChoice
from .nurseries import Flag, LatestSlot, SerialWorker, Subscription
from .audio_turn import check_vad_silence
from .deprecated_turn_options import turn_handling_from_deprecated
from .options import (check_non_negative, check_turn_handling, merged_turn_handling,
                      resolve_turn_handling, session_options_update)
from .realtime import RealtimeModel, is_realtime_model
from .recognition import AudioRecognition, EndOfTurnInfo, SttNode
from .recognition_router import RecognitionRouter, SessionErrorRules
from .recognition_streams import RestartPolicy
from .run_result import RunHold, RunResult
from .speech_args import check_event_callback, check_flag
from .speech_handle import SpeechHandle
from .text_transforms import DEFAULT as DEFAULT_TRANSFORMS
from .text_transforms import TextTransform
from .text_transforms import resolve as resolve_transforms
from .usage import AgentSessionUsage, SessionUsage
from .manual_turns import ManualTurns, PendingTranscript
from .session_scope import host_session_scopes
from .tool_handling import (ToolHandlingOptions, check_tool_handling,
                            resolve_async_tool_options)
from .toolsets import aclose_toolsets, flatten_tools
from .keyterm_detection import STTContext
from .stt_context import KeytermsOptions, STTContextOptions, resolve_stt_context

if TYPE_CHECKING:
    from .io.room_options import RoomInputOptions, RoomOptions, RoomOutputOptions

logger = logging.getLogger("agents_trio")

_NOT_GIVEN: Any = object()


class SessionState(enum.Enum):
    CREATED = "created"
    ENTERED = "entered"      # inside ``async with``, not started
    STARTING = "starting"    # start() is starting the agent (a close now cancels the start)
    RUNNING = "running"
    CLOSING = "closing"
    CLOSED = "closed"


def _close_reason(reason: object) -> CloseReason:
    """``shutdown``'s reason: a :class:`CloseReason` or its value."""
    try:
        return CloseReason(reason)
    except ValueError:
        raise ValueError(f"reason must be a CloseReason, got {reason!r}") from None


class SessionInput:
    """``session.input`` (LiveKit's ``AgentInput``): where the user's audio comes from, and
    whether it is listened to (``set_audio_enabled``; push-to-talk turns it off between turns:
    the frames that arrive meanwhile are dropped, and a user speaking stops speaking)."""

    def __init__(self, on_audio_enabled: Callable[[bool], None] | None = None) -> None:
        self.audio: AudioInput | None = None
        self.video: None = None  # no video input in this runtime
        self._audio_enabled = True
        self._on_audio_enabled = on_audio_enabled

    @property
    def audio_enabled(self) -> bool:
        return self._audio_enabled

    @property
    def video_enabled(self) -> bool:
        return False

    def set_audio_enabled(self, enable: bool) -> None:
        check_flag("enable", enable)
        if enable and self.audio is None:
            logger.warning("Cannot enable audio input when it's not set")
        if enable == self._audio_enabled:
            return
        self._audio_enabled = enable
        if self._on_audio_enabled is not None:
            self._on_audio_enabled(enable)

    def set_video_enabled(self, enable: bool) -> None:
        if enable:
            logger.warning("Cannot enable video input: agents_trio has no video input")


class SessionOutput:
    """``session.output`` (LiveKit's ``AgentOutput``): where the agent's voice and
    transcription go. A disabled output (``set_audio_enabled(False)``,
    ``set_transcription_enabled(False)``) is left out from the next speech on: replies are
    then text only, or untranscribed."""

    def __init__(self) -> None:
        self.audio: AudioOutput | None = None
        self.transcription: TextOutput | None = None
        self.video: None = None  # no video output in this runtime
        self._audio_enabled = True
        self._transcription_enabled = True

    @property
    def audio_enabled(self) -> bool:
        return self._audio_enabled

    @property
    def transcription_enabled(self) -> bool:
        return self._transcription_enabled

    @property
    def video_enabled(self) -> bool:
        return False

    @property
    def active_audio(self) -> AudioOutput | None:
        """The audio output the next speech plays to: None when unset or disabled."""
        return self.audio if self._audio_enabled else None

    @property
    def active_transcription(self) -> TextOutput | None:
        """The transcription output: None when unset or disabled."""
        return self.transcription if self._transcription_enabled else None

    def set_audio_enabled(self, enabled: bool) -> None:
        check_flag("enabled", enabled)
        if enabled and self.audio is None:
            logger.warning("Cannot enable audio output when it's not set")
        self._audio_enabled = enabled

    def set_transcription_enabled(self, enabled: bool) -> None:
        check_flag("enabled", enabled)
        if enabled and self.transcription is None:
            logger.warning("Cannot enable transcription output when it's not set")
        self._transcription_enabled = enabled

    def set_video_enabled(self, enabled: bool) -> None:
        if enabled:
            logger.warning("Cannot enable video output: agents_trio has no video output")


#: the type of ``userdata`` (``AgentSession[MyData]``); unparametrised, ``Any``
Userdata_T = TypeVar("Userdata_T", default=Any)

#: the names ``session.on`` accepts: LiveKit's session events (some are not emitted yet, see
#: docs/livekit-names.md) and this runtime's playback events
SESSION_EVENTS = frozenset({
    "user_state_changed", "agent_state_changed", "user_input_transcribed",
    "user_transcription_timeout", "conversation_item_added", "agent_false_interruption",
    "overlapping_speech", "function_tools_executed", "metrics_collected",
    "session_usage_updated", "speech_created", "tool_execution_updated", "error", "close",
    "debug_message", "playback_started", "playback_finished"})


class AgentSession(Generic[Userdata_T]):
    """A voice session: one user, one current agent, the models, and the events.

    Args:
        stt, vad, llm, tts: Trio-native models (see ``agents_trio.models``), LiveKit plugin
            models (``openai.LLM()``, ``deepgram.STT()``, ``silero.VAD.load()``, a realtime
            model: adapted here), or LiveKit inference model strings for ``llm``, ``stt`` and
            ``tts`` (``"openai/gpt-4.1-mini"``; see ``agents_trio.model_resolution``).
        turn_handling: Turn detection, endpointing, interruption and preemptive generation
            options; every key is optional and defaults as in LiveKit Agents.
        stt_context_options: Static ``keyterms`` for the STT, background
            ``keyterm_detection`` with an LLM, and ``forward_chat_context`` (see
            ``agents_trio.stt_context``).
        keyterms_options: LiveKit's deprecated older form of ``stt_context_options``
            (DeprecationWarning; ignored when ``stt_context_options`` is given).
        tools: Session-wide tools, added to every agent's tools.
        mcp_servers: MCP servers whose tools every agent gets (unless the agent gives its
            own ``mcp_servers``); each agent connects when it starts and disconnects when it
            ends (see ``agents_trio.mcp``).
        max_tool_steps: Tool rounds per user turn before the reply is forced to be text.
        tool_handling: ``{"async_options": {...}}``: the templates written around background
            tools (``agents_trio.tool_handling``); an agent's own replace them.
        max_unrecoverable_errors: Errors of one model kind tolerated before the session closes;
            also the failures in a row after which a VAD or STT stream is no longer reopened
            (the session then closes with reason ``error``). A realtime model's first
            unrecoverable error closes the session, as in LiveKit.
        userdata: Any object, available to tools as ``ctx.userdata``.
        tts_text_transforms: Transforms applied to text before the TTS (None disables).
        min_consecutive_speech_delay: Minimum gap between two speeches.
        use_tts_aligned_transcript: Let the word timestamps a TTS gives pace the transcript
            (an agent's own setting wins); off unless True, as in LiveKit.
        user_away_timeout: Seconds of mutual silence before the user is ``away`` (None
            disables).
        aec_warmup_duration: After the agent first speaks, voice interruptions are ignored
            for this long while echo cancellation warms up (None disables).
        close_grace: Seconds that shielded cleanup (``on_exit``, clearing audio) may take.
        session_close_transcript_timeout: At close, while the user's last words are still
            being transcribed, how long to wait for their final transcript (they are then
            recorded as a user message, not answered).
        audio_write_timeout: Deadline of each ``capture_frame`` on the audio output (None
            disables it; waiting for the output to be ready, e.g. for someone to subscribe to
            the agent's track, is not counted). A write that misses it is an ``error`` event
            (``AudioOutputStalled``) and ends the speech as interrupted; when the next speech
            stalls too, the session closes with reason ``error``.
        preemptive_generation, min_endpointing_delay, max_endpointing_delay,
        false_interruption_timeout, turn_detection, discard_audio_if_uninterruptible,
        min_interruption_duration, min_interruption_words, allow_interruptions,
        resume_false_interruption, agent_false_interruption_timeout: LiveKit's older turn
            keywords:
            folded into ``turn_handling`` with a DeprecationWarning and ignored when
            ``turn_handling`` is given, as in LiveKit (``deprecated_turn_options``).

    Raises:
        ValueError, TypeError: a model that is none of the above (the error names the
            parameter), a bad ``turn_handling`` (an unknown key, a value of the wrong
            type or out of range, an unknown ``turn_detection``) or a negative option.
    """

    def __init__(self, *, stt: STT | str | None = None, vad: VAD | None = None,
                 llm: LLM | RealtimeModel | str | None = None, tts: TTS | str | None = None,
                 turn_handling: dict[str, Any] | None = None,
                 stt_context_options: STTContextOptions | None = None,
                 tools: Sequence[Any] = (), mcp_servers: Sequence[MCPServer] | None = None,
                 max_tool_steps: int = 3,
                 tool_handling: ToolHandlingOptions | None = None,
                 max_unrecoverable_errors: int = 3,
                 userdata: Userdata_T = _NOT_GIVEN,
                 tts_text_transforms: Sequence[str | TextTransform] | None = DEFAULT_TRANSFORMS,
                 min_consecutive_speech_delay: float = 0.0,
                 use_tts_aligned_transcript: bool | None = None,
                 user_away_timeout: float | None = 15.0,
                 aec_warmup_duration: float | None = 3.0,
                 close_grace: float = 5.0,
                 session_close_transcript_timeout: float = 2.0,
                 transcription_timeout: float | None = None,
                 audio_write_timeout: float | None = 5.0,
                 preemptive_generation: bool | Mapping[str, Any] = _NOT_GIVEN,
                 min_endpointing_delay: float = _NOT_GIVEN,
                 max_endpointing_delay: float = _NOT_GIVEN,
                 false_interruption_timeout: float | None = _NOT_GIVEN,
                 turn_detection: object = _NOT_GIVEN,
                 discard_audio_if_uninterruptible: bool = _NOT_GIVEN,
                 min_interruption_duration: float = _NOT_GIVEN,
                 min_interruption_words: int = _NOT_GIVEN,
                 allow_interruptions: bool = _NOT_GIVEN,
                 resume_false_interruption: bool = _NOT_GIVEN,
                 agent_false_interruption_timeout: float | None = _NOT_GIVEN,
                 keyterms_options: KeytermsOptions | None = None) -> None:
        deprecated: dict[str, object] = {
            "preemptive_generation": preemptive_generation,
            "min_endpointing_delay": min_endpointing_delay,
            "max_endpointing_delay": max_endpointing_delay,
            "false_interruption_timeout": false_interruption_timeout,
            "turn_detection": turn_detection,
            "discard_audio_if_uninterruptible": discard_audio_if_uninterruptible,
            "min_interruption_duration": min_interruption_duration,
            "min_interruption_words": min_interruption_words,
            "allow_interruptions": allow_interruptions,
            "resume_false_interruption": resume_false_interruption,
            "agent_false_interruption_timeout": agent_false_interruption_timeout}
        migrated = turn_handling_from_deprecated("AgentSession", {
            name: value for name, value in deprecated.items() if value is not _NOT_GIVEN})
        if turn_handling is None:
            turn_handling = migrated or None
        models = resolve_models("AgentSession", stt=stt, vad=vad, llm=llm, tts=tts,
                                turn_handling=turn_handling)
        turn_handling = models.turn_handling
        check_turn_handling(turn_handling)
        check_vad_silence((turn_handling or {}).get("turn_detection"), models.vad)
        for name, value, allow_none in (
                ("max_tool_steps", max_tool_steps, False),
                ("max_unrecoverable_errors", max_unrecoverable_errors, False),
                ("min_consecutive_speech_delay", min_consecutive_speech_delay, False),
                ("user_away_timeout", user_away_timeout, True),
                ("transcription_timeout", transcription_timeout, True),
                ("aec_warmup_duration", aec_warmup_duration, True),
                ("close_grace", close_grace, False),
                ("session_close_transcript_timeout", session_close_transcript_timeout, False)):
            check_non_negative(name, value, allow_none=allow_none)
        check_non_negative("audio_write_timeout", audio_write_timeout, allow_none=True,
                           positive=True)
        check_flag("use_tts_aligned_transcript", use_tts_aligned_transcript, allow_none=True)
        self.stt: STT | None = models.stt or None
        self.vad: VAD | None = models.vad or None
        self.llm: LLM | RealtimeModel | None = models.llm or None
        self.tts: TTS | None = models.tts or None
        self.turn_handling_overrides = dict(turn_handling or {})
        self.tools = list(tools)
        flatten_tools(self.tools)  # bad tools and duplicate names fail here, as an agent's do
        self.mcp_servers = check_mcp_servers("AgentSession", mcp_servers)
        self.max_tool_steps = max_tool_steps
        #: the background-tool templates of agents that set none (``tool_handling``)
        self.async_tool_options = resolve_async_tool_options(
            check_tool_handling("AgentSession", tool_handling))
        self.max_unrecoverable_errors = max_unrecoverable_errors
        self._userdata = userdata
        # session.on's wrappers of callbacks called without the event, for off()
        self._event_wrappers: dict[tuple[str, Callable[..., object]],
                                   Callable[[Any], object]] = {}
        self.tts_text_transforms = resolve_transforms(tts_text_transforms)
        self.close_grace = close_grace
        self.min_consecutive_speech_delay = min_consecutive_speech_delay
        self.use_tts_aligned_transcript = use_tts_aligned_transcript
        self.user_away_timeout = user_away_timeout
        self.transcription_timeout = transcription_timeout
        self.aec_warmup_duration = aec_warmup_duration
        self.session_close_transcript_timeout = session_close_transcript_timeout
        self.audio_write_timeout = audio_write_timeout
        self._aec_warmup_ends: float | None = None  # set when the agent first speaks
        self._away_slot: LatestSlot | None = None
        self.input = SessionInput(self._on_audio_input_enabled)
        self.output = SessionOutput()
        #: what every activity of the session shares: history, events, states, the active run
        self.conversation = Conversation(
            errors=SessionErrorRules(self, give_up=self._close_for_error),
            on_agent_speaking=self._on_agent_speaking, on_state_changed=self._refresh_away)
        self._metrics = SessionUsage(self.conversation.events)
        #: the STT's keyterms (static and detected) and the turns forwarded to it
        self.stt_context = STTContext(
            resolve_stt_context(stt_context_options, keyterms_options),
            history=lambda: self.conversation.history, emit_metrics=self.emit_metrics)
        self.conversation.events.on("conversation_item_added", self.stt_context.on_item_added)
        #: held by tool code around what must not race the agent's speech (foreground())
        self.floor = Floor(on_release=self.conversation.progressed)
        self._manual_turns_made: ManualTurns | None = None  # on the first commit or clear
        self._state = SessionState.CREATED
        self._agent: Agent | None = None
        self._activity: Activity | None = None
        # user turns that ended while the floor changed hands, for the next activity
        self._held_turns: list[EndOfTurnInfo] = []
        self._recognition: AudioRecognition | None = None
        self._close_reason: CloseReason = CloseReason.USER_INITIATED
        self._close_error: Any = None
        self._close_overrun: CloseOverrun | None = None
        #: the tool calls executing now (read by the close's overrun report)
        self.running_tools = RunningTools()
        #: the AgentTasks awaited inline and not yet returned (the close unwinds them)
        self.inline_tasks = InlineTaskStack()
        self._nursery_manager: AbstractAsyncContextManager[trio.Nursery] | None = None
        self._nursery: trio.Nursery | None = None
        # the session's work (agents, recognition, handoffs), from start() on: cancelled by
        # the close (a close during the start cancels the start), while the session nursery
        # still delivers the transcription
        self._work_scope = trio.CancelScope()
        # the nursery of that work, while it is open (None before start() and once the work
        # ended): what the session runs on a request (a handoff, a manual commit) runs there
        self._work_nursery: trio.Nursery | None = None
        self._closed = Flag()
        # handoffs, served one at a time in the work nursery (a task only while one is being
        # served) from the moment the first agent entered: one asked for during the start
        # waits for it
        self._switches: SerialWorker[_SwitchRequest] = SerialWorker(
            self._switch, name="agents_trio.session.AgentSession.switch")
        # the scope of the handoff being served: cancelled when the close begins, so a
        # handoff the close meets is not completed (no agent starts in a closing session, as
        # in LiveKit)
        self._switch_scope: trio.CancelScope | None = None
        # the input of the session.run() call not sent yet: it is sent once the conversation
        # waits for the user, or to the agent it waits for if that one hands off first. One
        # run at a time, as in LiveKit: a run is the session's run from its call on (waiting
        # here, then the conversation's active run)
        self._waiting_input: _WaitingInput | None = None

    # -- context manager ----------------------------------------------------------------------
    async def __aenter__(self) -> AgentSession[Userdata_T]:
        """Open the session's nursery; ``start`` then runs the agent in it.

        Cancellation: not a blocking call; cancelling the enclosing scope later cancels the
        whole session (see ``__aexit__``).

        Raises:
            RuntimeError: the session was entered before.
        """
        if self._state is not SessionState.CREATED:
            raise RuntimeError("an AgentSession can be entered once")
        self._nursery_manager = trio.open_nursery()
        self._nursery = await self._nursery_manager.__aenter__()
        # adapted LiveKit plugins find no bridge outside a job: the session opens one then
        self._bridge_on_demand = BridgeOnDemand(self._nursery)
        self._bridge_token = self._bridge_on_demand.install()
        self._state = SessionState.ENTERED
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> bool | None:
        """Close the session (``aclose``), then wait for every task it owns.

        Cancellation: cancelling the block cancels the session's whole tree (a goodbye
        too); the close still runs its shielded cleanup (``on_exit``, clearing audio, the
        transcription owed) within ``close_grace``.
        """
        assert self._nursery_manager is not None
        try:
            await self.aclose()
        finally:
            self._bridge_on_demand.close()
            self._bridge_on_demand.uninstall(self._bridge_token)
            suppress = await self._nursery_manager.__aexit__(exc_type, exc, tb)
        return suppress

    # -- properties ---------------------------------------------------------------------------
    @property
    def history(self) -> ChatContext:
        return self.conversation.history

    @property
    def keyterms(self) -> list[str]:
        """The keyterms applied to the STT now: the static ones, then those detected."""
        return self.stt_context.keyterms

    @property
    def current_agent(self) -> Agent:
        if self._agent is None:
            raise RuntimeError("the session has not started")
        return self._agent

    @property
    def current_speech(self) -> SpeechHandle | None:
        return self._activity.current_speech if self._activity else None

    @property
    def activity(self) -> Activity | None:
        """The running activity of the current agent (None before the session runs)."""
        return self._activity

    @property
    def agent_state(self) -> AgentState:
        return self.conversation.agent_state

    @property
    def user_state(self) -> UserState:
        return self.conversation.user_state

    @property
    def userdata(self) -> Userdata_T:
        if self._userdata is _NOT_GIVEN:
            raise ValueError("VoiceAgent userdata is not set")
        return self._userdata

    @userdata.setter
    def userdata(self, value: Userdata_T) -> None:
        self._userdata = value

    @property
    def turn_detection(self) -> str | None:
        """The turn detection mode in force (None before the session runs with audio)."""
        return self._recognition.turn_detection if self._recognition else None

    @property
    def recognition(self) -> AudioRecognition | None:
        """The recognition of the user's audio (None before the session runs with audio)."""
        return self._recognition

    @property
    def state(self) -> SessionState:
        """Where the session is in its life (created, entered, starting, running, closing,
        closed)."""
        return self._state

    @property
    def closing(self) -> bool:
        """The session is closing or closed: nothing new may start."""
        return self._state in (SessionState.CLOSING, SessionState.CLOSED)

    # -- events -------------------------------------------------------------------------------
    def on(self, name: str, callback: Callable[[Any], object] | None = None
           ) -> Callable[..., object]:
        """Register a plain function for an event; usable as a decorator. An unknown event
        name raises ``ValueError`` (as in LiveKit); so does an async function, and a
        callback that is not callable or needs more than the event raises ``TypeError``. As
        LiveKit's emitter, a callback taking no argument is called without the event."""
        _check_event_name(name)
        if callback is None:
            def register(cb: Callable[[Any], object]) -> Callable[[Any], object]:
                self.on(name, cb)
                return cb
            return register
        registered = check_event_callback(callback)
        if registered is not callback:
            # one wrapper per callback and event: registered once, as the callback itself is
            registered = self._event_wrappers.setdefault((name, callback), registered)
        self.conversation.events.on(name, registered)
        return callback

    def once(self, name: str, callback: Callable[[Any], object] | None = None
             ) -> Callable[..., object]:
        """Like ``on``, but the callback is called for the next event only; usable as a
        decorator."""
        _check_event_name(name)
        events = self.conversation.events

        def register(cb: Callable[[Any], object]) -> Callable[[Any], object]:
            call = check_event_callback(cb)

            def fire(event: object) -> None:
                events.off(name, fire)
                call(event)
            events.on(name, fire)
            return cb
        return register(callback) if callback is not None else register

    def off(self, name: str, callback: Callable[[Any], Any]) -> None:
        registered = self._event_wrappers.pop((name, callback), callback)
        self.conversation.events.off(name, registered)

    def events(self) -> _EventIterator:
        """``async for ev in session.events():`` yields every event until the session closes."""
        return _EventIterator(self.conversation.events.subscribe())

    def commit_user_turn(self, *, transcript_timeout: float = 2.0,
                         stt_flush_duration: float = 2.0,
                         skip_reply: bool = False) -> PendingTranscript:
        """End the user's turn now (manual turn detection) and reply to it, unless
        ``skip_reply`` (the words are then only recorded). Without a recent final transcript
        it waits up to ``transcript_timeout`` for one (flushing the STT with
        ``stt_flush_duration`` of silence when the audio input has ended). Returns the
        turn's transcript, to ``await`` or ignore. With a realtime model its input audio is
        committed and it is asked to reply. RuntimeError when the session isn't running.
        """
        check_non_negative("transcript_timeout", transcript_timeout)
        check_non_negative("stt_flush_duration", stt_flush_duration, finite=True)
        check_flag("skip_reply", skip_reply)
        return self._manual_turns().commit(transcript_timeout=transcript_timeout,
                                           stt_flush_duration=stt_flush_duration,
                                           skip_reply=skip_reply)

    def update_options(self, *, endpointing_opts: dict[str, Any] | None = None,
                       turn_detection: object = _NOT_GIVEN,
                       min_endpointing_delay: float | None = None,
                       max_endpointing_delay: float | None = None,
                       keyterms: list[str] | None = None) -> None:
        """Change the endpointing delays and the turn detection, for the running agent too
        (its endpointing becomes the session's, as in LiveKit). ``turn_detection=None``
        goes back to the automatic choice. ``min_endpointing_delay`` and
        ``max_endpointing_delay`` are LiveKit's deprecated spellings of
        ``endpointing_opts``'s keys. ``keyterms`` replaces the static keyterms (detected
        ones stay) and applies them to the STT at once. Bad values raise as at
        construction."""
        if keyterms is not None and (isinstance(keyterms, str)
                                     or not isinstance(keyterms, (list, tuple))
                                     or not all(isinstance(t, str) for t in keyterms)):
            raise TypeError(f"keyterms must be a list of strings, got {keyterms!r}")
        if turn_detection is not _NOT_GIVEN and turn_detection is not None:
            # a LiveKit end-of-turn model is adapted as at construction
            adapted = adapt_turn_handling("AgentSession.update_options",
                                          {"turn_detection": turn_detection})
            turn_detection = adapted["turn_detection"]  # type: ignore[index]
        layer = session_options_update(
            endpointing_opts=endpointing_opts, min_endpointing_delay=min_endpointing_delay,
            max_endpointing_delay=max_endpointing_delay,
            turn_detection=None if turn_detection is _NOT_GIVEN else turn_detection,
            set_turn_detection=turn_detection is not _NOT_GIVEN)
        if keyterms is not None:  # the other options are valid: nothing half applied
            self.stt_context.set_static_keyterms(keyterms)
        self.turn_handling_overrides = merged_turn_handling(self.turn_handling_overrides,
                                                            layer)
        if self._activity is not None:
            self._activity.options = resolve_turn_handling(
                self.turn_handling_overrides, self._activity.agent.turn_handling,
                {key: self.turn_handling_overrides[key] for key in layer})
        if self._recognition is not None:
            self._recognition.refresh_turn_detector()

    def reset_away_timer(self) -> None:
        """External user activity (a DTMF key, a click): an ``away`` user is ``listening``
        again, and while both sides listen the ``user_away_timeout`` countdown starts over.
        Does nothing before the start, while closing, or without an away timeout."""
        if (self._state is not SessionState.RUNNING or self.closing
                or self.user_away_timeout is None):
            return
        if self.user_state == "away":
            self.conversation.set_user_state("listening", trio.current_time())
        else:
            self._refresh_away()

    async def wait_for_idle(self) -> Activity:
        """Wait until nothing is in flight: the user is not speaking and no end of turn is
        being decided or handled, and the agent has nothing queued, generating, playing or
        running (its ``on_enter`` included). Follows a handoff to the new agent; returns its
        activity.

        Cancellation: a checkpoint only.

        Raises:
            SessionClosedError: the session is closing.
            RuntimeError: no agent has been started.
        """
        while True:
            if self.closing:
                raise SessionClosedError("session is closing")
            activity = self._activity
            if activity is None:
                raise RuntimeError("AgentSession has no running agent")
            recognition = self._recognition
            if recognition is not None:
                await recognition.wait_user_idle()
            await activity.wait_turns_handled()
            await self.conversation.wait_until(
                lambda: self.closing or self._activity is not activity or activity.settled)
            # idle only if nothing started again while waiting for the other side
            if (self._activity is activity and not self.closing and activity.settled
                    and not activity.turns.handling
                    and (recognition is None or not (recognition.user_speaking
                                                     or recognition.end_of_turn_pending))):
                return activity

    def clear_user_turn(self) -> None:
        """Drop what the user said in the open turn (transcripts and the STT's buffer; a
        realtime model's input buffer). RuntimeError when the session isn't running."""
        self._manual_turns().clear()

    def emit_metrics(self, metrics: AgentMetrics) -> None:
        self._metrics.report(metrics)

    @property
    def usage(self) -> AgentSessionUsage:
        """The models' usage so far, one entry per provider and model (LiveKit's)."""
        return self._metrics.usage

    def _on_agent_speaking(self) -> None:
        self._start_aec_warmup()
        if self._recognition is not None:
            self._recognition.on_agent_speech_started()  # the turn limit counts afresh

    def _start_aec_warmup(self) -> None:
        """The agent speaks: the first time, voice interruptions wait for the echo
        cancellation to warm up."""
        if self._aec_warmup_ends is None and self.aec_warmup_duration is not None \
                and self.output.audio is not None:
            self._aec_warmup_ends = trio.current_time() + self.aec_warmup_duration

    @property
    def aec_warmup_active(self) -> bool:
        """Voice interruptions are ignored while echo cancellation warms up (§4.7)."""
        return self._aec_warmup_ends is not None and trio.current_time() < self._aec_warmup_ends

    def _refresh_away(self) -> None:
        """Arm the away timer while both sides listen and no tool runs (background tools
        included, as in LiveKit); cancel it otherwise."""
        slot = self._away_slot
        if slot is None or self.user_away_timeout is None:
            return
        activity = self._activity
        if (self.agent_state == "listening" and self.user_state == "listening"
                and not (activity is not None and (activity.tools_running
                                                   or activity.background_running))):
            slot.replace(self._away_after, self.user_away_timeout)
        else:
            slot.cancel()

    async def _away_after(self, timeout: float) -> None:
        await trio.sleep(timeout)
        self.conversation.set_user_state("away", trio.current_time())

    # -- lifecycle ----------------------------------------------------------------------------
    async def start(self, agent: Agent, *, capture_run: bool = False,
                    room: rtc.Room | None = None,
                    room_options: RoomOptions | None = None,
                    room_input_options: RoomInputOptions | None = None,
                    room_output_options: RoomOutputOptions | None = None
                    ) -> RunResult[Any] | None:
        """Start the session with ``agent``; returns once its activity runs.

        ``on_enter`` is launched, not awaited. Idempotent while started. With
        ``capture_run``, returns the run of the start (``await`` it: it ends when what
        ``on_enter`` said and did has settled), else None; so does a start the job owns
        (None when the job is already shutting down and the session is not started).

        Inside ``async with session:`` the block owns the session. Outside one (LiveKit's
        way), the job whose entrypoint this runs in owns it (:class:`SessionOwner`): the
        session runs in the job's nursery until it closes or the job shuts down, and the job
        waits for it. ``room`` links the job's room as the session's I/O (in console mode, the
        console's I/O stands in for it); ``room_options`` says how (LiveKit's deprecated
        ``room_input_options``/``room_output_options`` make one when it is not given).

        Raises:
            RuntimeError: Neither inside ``async with session:`` nor in a job, or ``room``
                given outside a job.
            TypeError, ValueError: ``agent`` is not an :class:`Agent`; the room options are
                of the wrong type, or set an option the room I/O cannot honour
                (``UnsupportedRoomOptionError`` names it).

        A close that comes while the agent is starting (``shutdown()`` or ``aclose()`` from
        another task, e.g. the job shutting down during a slow toolset set-up) cancels the
        start: the agent does not enter, and ``start`` returns to the closed session.

        Cancellation: cancelling ``start`` before it returns closes the session.
        """
        if not isinstance(agent, Agent):
            raise TypeError(f"start() takes an Agent instance, got {agent!r}")
        if self._state is SessionState.RUNNING:
            return None
        if self._state is SessionState.STARTING:
            raise RuntimeError("the session is already starting (start() is running)")
        if (room_options is not None or room_input_options is not None
                or room_output_options is not None):
            from .io.room_options import resolve_room_options
            room_options = resolve_room_options(room_options,
                                                room_input_options=room_input_options,
                                                room_output_options=room_output_options)
        if room is not None or self._state is SessionState.CREATED:
            owner = _session_owner.get(None)
            if owner is None and room is not None:
                raise RuntimeError(
                    "session.start(room=...) links the room of a job: call it in an entrypoint "
                    "(`cli.run_app(server)`, `python -m agents_trio connect`); elsewhere, "
                    "`async with open_room_io(room, session), session:` then "
                    "`await session.start(agent)`")
            if owner is None:
                raise RuntimeError(
                    "session.start() outside `async with session:` needs a job to own the "
                    "session: run it in an entrypoint (`cli.run_app(server)`, `python -m "
                    "agents_trio connect`), or write `async with AgentSession(...) as session: "
                    "await session.start(agent)`")
            return await owner.start_session(self, agent, room=room, room_options=room_options,
                                             capture_run=capture_run)
        if self._state is not SessionState.ENTERED or self._nursery is None:
            raise RuntimeError("start() must be called inside `async with session:`")
        run: RunResult[Any] | None = None
        if capture_run:
            if self.conversation.active_run is not None:
                raise RuntimeError("nested runs are not supported")
            run = RunResult()
            self.conversation.begin_run(run)
        self._state = SessionState.STARTING
        await self._nursery.start(self._main, agent)
        return run

    async def _main(self, agent: Agent, *, task_status: trio.TaskStatus[None]) -> None:
        # the transcription is delivered by tasks of the session nursery, which outlives the
        # work nursery: what the user heard before a close (the played part of a cut reply)
        # still reaches the output, within the grace
        assert self._nursery is not None
        # start()'s, until the session runs (not kept after: it holds start()'s temporary
        # nursery)
        starting: trio.TaskStatus[None] | None = task_status
        del task_status
        self.conversation.open_transcription(self._nursery,
                                             lambda: self.output.active_transcription)
        try:
            with self._work_scope:
                async with trio.open_nursery() as nursery:
                    self._work_nursery = nursery
                    if self.output.audio is not None:
                        self.output.audio.on("playback_started", self._on_playback_started)
                        self.output.audio.on("playback_finished", self._on_playback_finished)
                    self._agent = agent
                    self.conversation.commit(AgentHandoff(new_agent_id=agent.id))
                    if self.stt_context.options.detection.enabled:
                        await nursery.start(self.stt_context.run)
                    with host_session_scopes(self, nursery):
                        # the calls of the session's AsyncToolsets run in this nursery too
                        await self._start_activities(nursery, agent)
                        if self.input.audio is not None:
                            self._recognition = AudioRecognition(
                                RecognitionRouter(self, refresh_away=self._refresh_away,
                                                  close_for_error=self._close_for_error),
                                vad=self.vad, stt=self.stt,
                                stt_node=_overridden_stt_node(agent),
                                transcription_timeout=self.transcription_timeout,
                                restart_policy=RestartPolicy(
                                    max_failures=self.max_unrecoverable_errors))
                            self._recognition.set_input_enabled(self.input.audio_enabled)
                            if is_realtime_model(self.llm):
                                self._recognition.audio_sink = self._push_realtime_audio
                            await self._recognition.start(nursery, self.input.audio)
                        # a close during the start cancelled it: unwind here, not run
                        await trio.lowlevel.checkpoint_if_cancelled()
                        self._state = SessionState.RUNNING
                        self._away_slot = LatestSlot(nursery)
                        self.conversation.set_agent_state("listening")
                        assert self._activity is not None
                        self._activity.enter()
                        # after the enter: a handoff's on_exit follows the on_enter
                        self._switches.bind(nursery)
                        assert starting is not None
                        starting.started()
                        starting = None
                        await trio.sleep_forever()
            if starting is not None:  # closed while starting: start() returns to the closed
                starting.started()    # session
        finally:
            self._work_nursery = None  # closed: nothing more runs there
            self.conversation.close_transcription()
            with trio.move_on_after(self.close_grace, shield=True):
                await self.conversation.wait_transcription_delivered()
            self.conversation.cancel_transcription()
            with trio.move_on_after(self.close_grace, shield=True):
                await aclose_toolsets(self.tools)  # the session's own; agents close theirs
            self._finish_close()

    def _manual_turns(self) -> ManualTurns:
        """The turns committed and cleared by hand, made on first use (most sessions never
        do: a session holds nothing for them until then)."""
        if self._manual_turns_made is None:
            self._manual_turns_made = ManualTurns(
                nursery=lambda: self._work_nursery, recognition=lambda: self._recognition,
                activity=lambda: self._activity, generate_reply=self.generate_reply)
        return self._manual_turns_made

    def _finish_close(self) -> None:
        self._state = SessionState.CLOSED
        self.conversation.fail_run(SessionClosedError("session closed"))
        overrun = self._close_overrun
        if overrun is not None:
            overrun.seconds = trio.current_time() - overrun.grace_ended_at
        self.conversation.emit("close", CloseEvent(
            reason=self._close_reason, error=self._close_error, overrun=overrun))
        self.conversation.reset_agent_state()
        self.conversation.events.close()
        self._closed.set()

    async def _start_activities(self, nursery: trio.Nursery, agent: Agent) -> None:
        """Start ``agent``'s activity in ``nursery`` (the work nursery, where the activity of
        each agent a handoff starts runs too: :meth:`_switch`)."""
        activity = Activity(self, agent)
        await nursery.start(activity.run)
        self._activity = activity
        self.stt_context.bind(activity.stt)

    def _end_handoffs(self) -> None:
        """The close begins: the handoff in progress is cancelled (its new agent does not
        start) and none is taken any more (those queued are dropped)."""
        self._switches.close()
        if self._switch_scope is not None:
            self._switch_scope.cancel()

    async def _switch(self, request: _SwitchRequest) -> None:
        """Hand over to ``request.agent``; switches run one at a time, in order.

        A handoff is requested from inside the old activity (a tool returned an Agent), so the
        old activity cannot switch itself: it would wait for its own nursery. The session's
        switch worker does it: drain the one holding the floor (queued speech and tool
        replies play, ``on_exit`` runs; an AgentTask there is replaced, and the agents that
        awaited it drain in turn: :meth:`_leave_floor`), record the handoff, start the new
        one, and only then take the next request.

        Cancellation: the close begins (or the session's work ends): the switch stops where
        it is, the new agent does not start; its run hold is released.
        """
        try:
            if self._switches.closed:
                return  # queued when the close began: dropped
            with trio.CancelScope() as self._switch_scope:
                nursery = self._work_nursery
                assert nursery is not None  # served once it entered
                old = await self._settled_floor()
                # the agent the handoff leaves is no longer named: an AgentTask that took the
                # floor after update_agent() named the next agent ends as replaced, not
                # completed (LiveKit's update names the next agent first too); a later
                # update_agent() stays named
                if self._agent is old.agent:
                    self._agent = request.agent
                old = await self._leave_floor(old)
                handoff = AgentHandoff(old_agent_id=old.agent.id,
                                       new_agent_id=request.agent.id)
                activity = Activity(self, request.agent)
                await nursery.start(activity.run)
                self.switch_current(activity, handoff, old_agent=old.agent)
                activity.enter()
        finally:
            self._switch_scope = None
            request.run_hold.release()

    async def _settled_floor(self) -> Activity:
        """The activity a handoff leaves: the one holding the floor once its ``on_enter``
        settled. An ``on_enter`` that hands the floor to an AgentTask makes the task's
        activity that one (the handoff replaces the task, then the agent that awaited it
        leaves), as LiveKit's update leaves whatever activity is current when it runs.

        Cancellation: a checkpoint; nothing is changed.
        """
        while True:
            activity = self._activity
            assert activity is not None  # a handoff is served once the first agent entered
            await activity.wait_enter_settled()
            if self._activity is activity:
                return activity

    async def _leave_floor(self, floor: Activity) -> Activity:
        """Drain ``floor`` for a handoff. When it is an AgentTask's, the task is replaced:
        once its awaiter has taken it off the inline stack, the floor goes back to the
        activity that awaited it (a recorded handoff, as a task's return), which drains in
        turn (its scheduler, paused for the task, opens for its goodbye), and so on down to
        the agent under the tasks. Each one's ``on_exit`` plays before the next one's, and
        all of them before the new agent enters. Returns the last one left.

        Cancellation: the close (it cancels the switch): the drain stops where it is; the
        close unwinds the tasks still on the stack and finishes the agent under them.
        """
        # who awaited whom, taken now: a task told it was replaced may complete itself and
        # leave the stack before its own drain is over (a TaskGroup whose step was replaced)
        below: list[Activity] = []
        awaiter = self.inline_tasks.awaiter_of(floor.agent)
        while isinstance(awaiter, Activity):
            below.append(awaiter)
            awaiter = self.inline_tasks.awaiter_of(awaiter.agent)
        activity = floor
        for awaiter in below:
            await activity.drain()
            await self.inline_tasks.wait_left(activity.agent)
            # the floor goes back to the awaiter for its goodbye (recorded, as a task's
            # return is); the agent named next stays named
            self._point_at(awaiter)
            self.conversation.commit(
                AgentHandoff(old_agent_id=activity.agent.id, new_agent_id=awaiter.agent.id),
                old_agent=activity.agent, new_agent=awaiter.agent)
            awaiter.reopen_to_leave()
            activity = awaiter
        await activity.drain()
        return activity

    def switch_current(self, activity: Activity, handoff: AgentHandoff | None = None, *,
                       old_agent: object = None) -> None:
        """Point the session at ``activity`` (an AgentTask starting or returning), and
        record ``handoff`` if given."""
        self._point_at(activity)
        self._agent = activity.agent
        if handoff is not None:
            self.conversation.commit(handoff, old_agent=old_agent, new_agent=activity.agent)

    def _point_at(self, activity: Activity) -> None:
        """Make ``activity`` the one user turns, speeches and the STT context go to; it
        answers the user turns held while the floor changed hands (it holds them again if
        it is leaving too; once the close began, the close records them)."""
        self._activity = activity
        self.stt_context.bind(activity.stt)
        if self._recognition is not None:
            self._recognition.refresh_turn_detector()
        self.conversation.progressed()
        if self.closing:
            return  # the held turns are recorded unanswered by the close
        held, self._held_turns = self._held_turns, []
        for info in held:
            if not activity.on_end_of_turn(info):  # too short to interrupt it: kept
                self._held_turns.append(info)

    def hold_user_turn(self, info: EndOfTurnInfo) -> None:
        """Keep a user turn that ended while the floor changes hands (the agent holding it
        leaves): the next activity the session points at answers it; the close records it
        unanswered."""
        self._held_turns.append(info)

    def update_agent(self, agent: Agent) -> None:
        """Hand off to ``agent``: the current agent finishes its queued speech, runs
        ``on_exit``, and the new agent starts (its ``on_enter`` is launched, not awaited).

        Asked for while ``start()`` runs, the handoff follows the start: the first agent
        enters, then hands off. Before the start, it only names the agent; so it does once the
        close began (``shutdown()`` included: the new agent never starts, as in LiveKit).

        Raises:
            TypeError: ``agent`` is not an :class:`Agent` (checked here: the handoff itself
                runs later, in the session).
        """
        if not isinstance(agent, Agent):
            raise TypeError(f"update_agent() takes an Agent instance, got {agent!r}")
        self._agent = agent
        if self._state not in (SessionState.STARTING, SessionState.RUNNING) \
                or self._switches.closed:
            return  # not started, or the close began
        if self._activity is not None:
            self._activity.block_new_turns()
            self._send_waiting_input_before_handoff(self._activity)
            self._activity.end_realtime()
        # the active run stays open until the new agent runs (taken now: the old speech may
        # finish before the host picks the request up)
        self._switches.submit(_SwitchRequest(agent, self.conversation.hold_run()))

    def _send_waiting_input_before_handoff(self, activity: Activity) -> None:
        """A handoff leaves ``activity``, the agent the waiting ``session.run()`` input waits
        for: that agent answers it, before it drains (its queued speeches play before the
        handoff completes), and the run, begun now, watches the handoff.

        This is LiveKit's order: there ``run()`` gives its input at once to the current
        agent, whose queue the drain plays out. Waiting instead for the agent the handoff
        leads to could be forever: agents whose greetings hand off again never wait for the
        user. A realtime agent takes nothing more once a handoff is asked for (its session
        ends now): the input then waits for the next agent.
        """
        waiting = self._waiting_input
        if (waiting is None or activity.state is not ActivityState.RUNNING
                or activity.realtime is not None):
            return
        self._waiting_input = None
        # the user's turn, not a reply of the tool or hook that asked for the handoff
        token = current_inline.set(None)
        try:
            self._send_input(waiting)
        except Exception as e:  # as generate_reply() would have raised it to the caller
            waiting.run.fail(e)
        finally:
            current_inline.reset(token)

    async def drain(self) -> None:
        """Let the current agent finish its speeches and run ``on_exit``.

        Cancellation: cancelling the wait leaves the agent draining (it accepts no new user
        turn); the session goes on until it is closed.

        Raises:
            RuntimeError: the session is not running.
        """
        if self._state is not SessionState.RUNNING or self._activity is None:
            raise RuntimeError("the session is not running")
        await self._activity.drain()

    async def aclose(self) -> None:
        """Close the session: interrupt the agents, let each ``on_exit`` say goodbye, cancel
        everything from the leaves up, then emit ``close``.

        The AgentTasks awaited inline go first, innermost first: each one's speeches stop,
        its ``on_exit`` runs and what it says plays, then it is cancelled (its awaiter gets a
        ``ToolError``). Then the current agent's speeches are interrupted (with ``force``)
        and its ``on_exit`` plays what it says. Each goodbye gets ``close_grace``; what does
        not fit is cut, and the close cancels the rest (running tools are answered).

        Cancellation: idempotent; the close runs in the session's nursery, not in the caller,
        and a later ``aclose()`` waits for its end. Called from inside the session (a tool),
        the caller is cancelled with the rest of the tree, and the close goes on. Cancelling
        the caller does not stop the close (leaving ``async with`` waits for it).
        """
        if self._state in (SessionState.CREATED, SessionState.ENTERED):
            if self._state is SessionState.ENTERED:
                self._state = SessionState.CLOSED
                self.conversation.events.close()
                self._closed.set()  # a second aclose() (e.g. leaving the block) must not wait
            return
        if self._state in (SessionState.STARTING, SessionState.RUNNING):
            was_running = self._state is SessionState.RUNNING
            self._state = SessionState.CLOSING
            self._end_handoffs()
            # before the cancellation completes the watched speeches, so the run can't pass
            self.conversation.fail_run(self._close_error or SessionClosedError("session closed"))
            assert self._nursery is not None  # started, hence entered
            # outside the work the close cancels: a close asked for by a tool (of an
            # AgentTask, too) goes on once that tool is cancelled
            self._nursery.start_soon(self._close, was_running)
        await self._closed.wait()

    async def _close(self, was_running: bool) -> None:
        """The close itself, in the session's nursery (LiveKit's teardown): the inline
        AgentTasks are unwound (each says its goodbye, then is cancelled), the current
        agent's speeches are interrupted and its ``on_exit`` plays its goodbye, the trailing
        user turn is committed; then the session's work is cancelled. A close during the
        start only cancels the start: nothing ran yet.

        Cancellation: the session's nursery is cancelled (the ``async with`` block was):
        the goodbyes stop there, and the work is cancelled all the same.
        """
        try:
            if was_running:
                await self.inline_tasks.unwind(self.close_grace, self.running_tools,
                                               self._report_overrun)
                if self._activity is not None:
                    with trio.move_on_after(self.close_grace):
                        await self._activity.finish_for_close()
                if self._recognition is not None and self._close_reason != "error":
                    await self._recognition.finish_user_turn(
                        self.session_close_transcript_timeout)
        finally:
            # even when the close is cancelled: a close half done would leave every
            # aclose() (leaving `async with`) waiting forever
            self._commit_trailing_user_turn()
            self._work_scope.cancel()
        with trio.move_on_after(self.close_grace):
            await self._closed.wait()
        if not self._closed.is_set():
            self._report_overrun()

    def _report_overrun(self) -> None:
        """The close outlived its grace: only work shielded from cancellation can hold it up
        (Trio cannot break a shield, so the close waits for it). Say what is still running
        (once: the unwinding of the AgentTasks may have said it already)."""
        if self._close_overrun is not None:
            return
        tools = self.running_tools.names()
        self._close_overrun = CloseOverrun(grace_ended_at=trio.current_time(), tools=tools)
        if tools:
            logger.warning("closing the session takes longer than its %.1f s grace: waiting "
                           "for tool(s) %s, shielded from cancellation",
                           self.close_grace, ", ".join(tools))
        else:
            logger.warning("closing the session takes longer than its %.1f s grace: waiting "
                           "for work shielded from cancellation", self.close_grace)

    def _commit_trailing_user_turn(self) -> None:
        """Reference §8 step 7: what the user said before close is kept, not dropped (the
        turns held for a next agent first)."""
        recognition, activity = self._recognition, self._activity
        held, self._held_turns = self._held_turns, []
        if activity is not None:
            for info in held:
                activity.turns.commit_unanswered(info)
        if recognition is None or activity is None or not recognition.transcript:
            return
        message = ChatMessage(role="user", content=[recognition.transcript])
        recognition.clear_user_turn()
        activity.commit_item(message)

    async def start_service(self, async_fn: Callable[..., Awaitable[object]],
                            *args: object) -> object:
        """Start a long-running service in the session's nursery, like ``nursery.start``.

        The session owns the service, so it must return once the session closes (when
        ``session.events()`` ends); ``SessionHost.serve`` does. Returns the value the service
        passes to ``task_status.started()``.

        Cancellation: as ``nursery.start``: cancelling the caller before the service called
        ``task_status.started()`` cancels the service; after, it keeps running until the
        session closes.

        Raises:
            RuntimeError: outside ``async with session:``, or the session is closing.
        """
        if self._nursery is None or self._state not in (
                SessionState.ENTERED, SessionState.STARTING, SessionState.RUNNING):
            raise RuntimeError("start_service() needs an open session (inside `async with`)")
        return await self._nursery.start(async_fn, *args)

    def shutdown(self, *, drain: bool = True, reason: CloseReason = CloseReason.USER_INITIATED) -> None:
        """Schedule a close without waiting for it (usable from tools and callbacks); during
        ``start()``, the close cancels the start."""
        check_flag("drain", drain)
        reason = _close_reason(reason)
        if self._nursery is None or self._state not in (SessionState.STARTING,
                                                        SessionState.RUNNING):
            return
        self._close_reason = reason
        # the close begins: the drain lets the current agent finish, not hand off
        self._end_handoffs()
        self._nursery.start_soon(self._shutdown, drain)

    async def _shutdown(self, drain: bool) -> None:
        # still starting: the close cancels the start (an agent not yet entered has nothing
        # to drain)
        if drain and self._state is SessionState.RUNNING and self._activity is not None:
            with trio.move_on_after(self.close_grace * 6):
                await self._activity.drain()
        await self.aclose()

    # -- speech -------------------------------------------------------------------------------
    def _activity_for_speech(self) -> Activity:
        activity = self._activity
        # a close lets the agent speak until it drained: what on_exit says plays
        if activity is None or not (self._state is SessionState.RUNNING or (
                self._state is SessionState.CLOSING
                and activity.state is ActivityState.RUNNING)):
            raise RuntimeError("the session is not running")
        return activity

    def say(self, text: str | AsyncIterable[str], *,
            audio: AsyncIterable[rtc.AudioFrame] | None = None,
            allow_interruptions: bool | None = None, add_to_chat_ctx: bool = True
            ) -> SpeechHandle:
        """Speak ``text`` (a string or an async iterable of strings) through the TTS, or play
        ``audio`` (its frames, e.g. a recording of the text) instead: the text is then only
        what the transcription and the chat context get.

        Returns at once with the speech's handle: the speech runs in the agent's activity,
        not in the caller. Cancellation: nothing to cancel here; ``handle.interrupt()`` stops
        the speech (the played part is committed as interrupted), and closing the session
        cancels it.
        """
        return self._activity_for_speech().say(text, allow_interruptions=allow_interruptions,
                                               add_to_chat_ctx=add_to_chat_ctx, audio=audio)

    def generate_reply(self, *, user_input: str | None = None,
                       instructions: str | Instructions | None = None,
                       tool_choice: ToolChoice | None = None,
                       allow_interruptions: bool | None = None,
                       chat_ctx: ChatContext | None = None,
                       input_modality: InputModality = "text") -> SpeechHandle:
        """Generate a reply with the LLM; ``user_input`` becomes a user message.

        Returns at once with the reply's handle: the reply runs in the agent's activity, not in
        the caller. Cancellation: nothing to cancel here; ``handle.interrupt()`` stops the
        reply (its running tools are not cancelled, and they get their outputs), and closing
        the session cancels it.

        Raises:
            ValueError: ``user_input`` is empty or blank (omit it for a reply without one).
            RuntimeError: the session is not running.
        """
        _check_user_input(user_input)
        message = ChatMessage(role="user", content=[user_input]) if user_input else None
        return self._activity_for_speech().generate_reply(
            user_message=message, instructions=instructions, tool_choice=tool_choice,
            allow_interruptions=allow_interruptions, chat_ctx=chat_ctx,
            input_modality=input_modality)

    def interrupt(self, *, force: bool = False) -> _Interruption:
        """Interrupt the current speech and the queue; ``await`` the result to wait for them.

        Raises:
            RuntimeError: the session is not running, or the playing speech does not allow
                interruptions and ``force`` is False.
        """
        check_flag("force", force)
        if self._activity is None or self._state is not SessionState.RUNNING:
            raise RuntimeError("the session is not running")
        return _Interruption(self._activity.interrupt(force=force))

    async def run(self, *, user_input: str,
                  input_modality: InputModality = "text") -> RunResult[Any]:
        """Send ``user_input`` as text and wait until the turn it starts has settled.

        The input is sent once the conversation waits for the user: the innermost agent
        (an AgentTask at any depth, or the agent itself) has finished its ``on_enter``, its
        queued and playing speeches and its running tools. It goes to that agent, and the run
        ends when the conversation waits for the user again.

        If the agent the input waits for hands off first, that agent takes the input when
        the handoff is asked for, and answers it before the handoff completes (as in
        LiveKit, where the input is queued at once on the current agent); the run then
        follows the handoff, until the conversation waits for the user again.

        Returns:
            The run's events (assistant messages, tool calls and outputs, handoffs).

        Raises:
            ValueError: ``user_input`` is empty or blank.
            RuntimeError: a previous run is still active or still waits for its turn (as in
                LiveKit, where a run is the session's run from its call), or the session
                closed.
            Exception: the error of a failed model call of the turn.

        Cancellation: cancelling the wait before the input is sent sends nothing; after, the
        turn goes on and the run is left to finish on its own (the next ``run()`` raises
        until it has).
        """
        _check_user_input(user_input)
        # a run waiting for its turn is the session's run already (LiveKit's run() is, from
        # its call): a second one is refused whether the first was sent or not
        if self.conversation.active_run is not None or self._waiting_input is not None:
            raise RuntimeError("nested runs are not supported")
        if self._state is not SessionState.RUNNING:
            if self.closing:
                raise SessionClosedError("session closed")
            raise RuntimeError("the session is not running")
        waiting = _WaitingInput(RunResult(user_input=user_input), user_input, input_modality)
        self._waiting_input = waiting
        try:
            # the bootstrap chain (Agent → TaskGroup → first task) is not part of the run;
            # the input stops waiting once sent (by a handoff, see update_agent)
            await self.conversation.wait_until(
                lambda: self._waiting_input is not waiting or self._waits_for_user())
        except BaseException:
            if self._waiting_input is waiting:
                self._waiting_input = None
            raise
        if self._waiting_input is waiting:  # the conversation waits for the user
            self._waiting_input = None
            if self.closing:
                raise SessionClosedError("session closed")
            self._send_input(waiting)
        await waiting.run
        return waiting.run

    def _waits_for_user(self) -> bool:
        """Whether the conversation waits for the user: the current (innermost) agent's
        on_enter returned or handed the floor to an AgentTask, and it has nothing queued,
        generating or running — whatever depth of AgentTasks is open. A waiting input then
        goes to the agent that asked for it (Agent → TaskGroup → task → nested task)."""
        return self.closing or self._activity is None or self._activity.settled

    def _send_input(self, waiting: _WaitingInput) -> None:
        """Begin ``waiting``'s run and give its input to the current agent (raises as
        ``generate_reply`` does); it no longer waits."""
        self.conversation.begin_run(waiting.run)
        try:
            self.generate_reply(user_input=waiting.user_input,
                                input_modality=waiting.input_modality)
        finally:
            self.conversation.progressed()  # the waiting run() calls look again

    def _close_for_error(self, error: BaseException) -> None:
        """Close the session for ``error`` (reason ``error``, the error on ``close``), unless
        a close already began: that close stays as it was asked for (in LiveKit the error's
        close finds the session closed; the ``error`` event was emitted all the same)."""
        if self.closing or self._switches.closed:
            return
        self._close_error = error
        self.shutdown(drain=False, reason=CloseReason.ERROR)

    # -- output -------------------------------------------------------------------------------
    def _on_audio_input_enabled(self, enabled: bool) -> None:
        if self._recognition is not None:
            self._recognition.set_input_enabled(enabled)

    def _on_playback_started(self, _ev: PlaybackStartedEvent) -> None:
        if self._activity is not None:
            self._activity.on_playback_started()

    def _on_playback_finished(self, ev: PlaybackFinishedEvent) -> None:
        if not ev.interrupted:
            self.conversation.forgive("audio_output")  # the output plays again

    def _push_realtime_audio(self, frame: rtc.AudioFrame) -> None:
        if self._activity is not None:
            self._activity.push_realtime_audio(frame)


def _overridden_stt_node(agent: Agent) -> SttNode | None:
    """The starting agent's ``stt_node`` if it overrides the default, else None (the session
    then pushes frames straight into the STT stream, with no channel hop)."""
    if type(agent).stt_node is Agent.stt_node:
        return None
    return lambda audio: agent.stt_node(audio, ModelSettings())


def _check_event_name(name: str) -> None:
    if name not in SESSION_EVENTS:
        raise ValueError(f"unknown session event {name!r}; the events are "
                         f"{', '.join(sorted(SESSION_EVENTS))}")


def _check_user_input(user_input: str | None) -> None:
    if user_input is not None and not isinstance(user_input, str):
        raise TypeError(f"user_input must be a str, got {type(user_input).__name__}")
    if user_input is not None and not user_input.strip():
        raise ValueError("user_input is empty: give the user's text, or leave user_input out "
                         "for a reply without user input")


class SessionOwner(Protocol):
    """What owns the sessions started without ``async with`` (a job: ``JobContext``)."""

    async def start_session(self, session: AgentSession[Any], agent: Agent, *,
                            room: rtc.Room | None, room_options: RoomOptions | None,
                            capture_run: bool = False) -> RunResult[Any] | None:
        """Run ``session`` (entered or not) with ``agent`` until it closes; return once it
        started (with ``capture_run``, the run of the start, as ``session.start``).

        Cancellation: cancelling it before the session started closes the session."""


_session_owner: contextvars.ContextVar[SessionOwner] = contextvars.ContextVar(
    "agents_trio_session_owner")


@contextmanager
def owning_sessions(owner: SessionOwner) -> Iterator[None]:
    """Within the block (and the tasks it starts), ``session.start()`` outside ``async
    with`` hands the session to ``owner``."""
    token = _session_owner.set(owner)
    try:
        yield
    finally:
        _session_owner.reset(token)


class _WaitingInput:
    """The input of a ``session.run()`` call, waiting to be sent to an agent."""

    def __init__(self, run: RunResult[Any], user_input: str,
                 input_modality: InputModality) -> None:
        self.run = run
        self.user_input = user_input
        self.input_modality: InputModality = input_modality


class _SwitchRequest:
    """A handoff request; holds the run that was active when it was made."""

    def __init__(self, agent: Agent, run_hold: RunHold) -> None:
        self.agent = agent
        self.run_hold = run_hold


class _Interruption:
    """What ``session.interrupt()`` returns: awaiting it waits for the interrupted speeches."""

    def __init__(self, handles: list[SpeechHandle]) -> None:
        self.handles = handles

    def __await__(self) -> Generator[Any, None, None]:
        async def _wait() -> None:
            for h in self.handles:
                await h.wait_for_playout()

        return _wait().__await__()


class _EventIterator:
    def __init__(self, subscription: Subscription) -> None:
        self._sub = subscription

    def __aiter__(self) -> _EventIterator:
        return self

    async def __anext__(self) -> object:
        item = await self._sub.__anext__()
        return item.event

    async def aclose(self) -> None:
        await self._sub.aclose()
