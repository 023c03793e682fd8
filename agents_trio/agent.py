"""Agent: instructions, tools, hooks and the overridable pipeline nodes."""

from __future__ import annotations

import re
from collections.abc import (AsyncGenerator, AsyncIterable, AsyncIterator, Awaitable, Callable,
                             Iterator)
from contextlib import contextmanager
from typing import Any, Protocol, TypeVar, Union

import trio
from livekit import rtc

from .chat import ChatContext, ChatMessage, ReadOnlyChatContext
from .deprecated_turn_options import turn_handling_from_deprecated
from .events import CloseReason, UserTurnExceededEvent
from .instructions import InputModality, Instructions
from .speech_args import check_chat_ctx, check_flag, check_instructions, check_str
from .mcp import MCPServer, check_mcp_servers
from .realtime import RealtimeModel, is_realtime_model
from .model_resolution import resolve_models
from .models import (LLM, STT, TTS, VAD, ChatChunk, FlushSentinel, ModelSettings, SpeechEvent,
                     ToolChoice)
from .options import check_non_negative, check_turn_handling
from .speech_handle import SpeechHandle
from .tool_handling import AsyncToolOptions, ToolHandlingOptions, check_tool_handling
from .tools import FunctionTool, find_function_tools
from .toolsets import flatten_tools, function_tool_names

class NotGiven:
    """An agent model that was not given: the session's is used (None disables it)."""

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = NotGiven()

_T = TypeVar("_T")
#: a parameter that may be left out (LiveKit's ``NotGivenOr[T]``): ``T`` or ``NOT_GIVEN``
NotGivenOr = Union[_T, NotGiven]


class SessionView(Protocol):
    """The session as an agent and its tools see it (``agent.session``, ``ctx.session``);
    ``AgentSession`` satisfies it."""

    @property
    def history(self) -> ChatContext: ...

    @property
    def current_agent(self) -> Agent: ...

    @property
    def current_speech(self) -> SpeechHandle | None: ...

    @property
    def agent_state(self) -> str: ...

    @property
    def user_state(self) -> str: ...

    @property
    def userdata(self) -> Any: ...  # noqa: ANN401 - whatever object the user gave

    @property
    def stt(self) -> STT | None: ...

    @property
    def llm(self) -> LLM | RealtimeModel | None: ...

    @property
    def tts(self) -> TTS | None: ...

    @property
    def tools(self) -> list[FunctionTool]: ...

    @property
    def mcp_servers(self) -> list[MCPServer] | None: ...

    def say(self, text: str | AsyncIterable[str], *, allow_interruptions: bool | None = None,
            add_to_chat_ctx: bool = True) -> SpeechHandle: ...

    def generate_reply(self, *, user_input: str | None = None,
                       instructions: str | Instructions | None = None,
                       tool_choice: ToolChoice | None = None,
                       allow_interruptions: bool | None = None,
                       chat_ctx: ChatContext | None = None,
                       input_modality: InputModality = "text") -> SpeechHandle: ...

    def interrupt(self, *, force: bool = False) -> Awaitable[None]: ...

    def update_agent(self, agent: Agent) -> None: ...

    def shutdown(self, *, drain: bool = True, reason: CloseReason = CloseReason.USER_INITIATED) -> None: ...

    def on(self, name: str, callback: Callable[[Any], object] | None = None) -> object: ...

    def off(self, name: str, callback: Callable[[Any], Any]) -> None: ...


class AgentActivity(Protocol):
    """What a running agent needs from the activity that runs it."""

    @property
    def session(self) -> SessionView: ...

    @property
    def llm(self) -> LLM | RealtimeModel | None: ...

    @property
    def tts(self) -> TTS | None: ...

    def on_instructions_updated(self) -> None: ...

    def on_tools_updated(self, old_names: set[str]) -> None: ...

    def on_chat_ctx_replaced(self) -> None: ...

    def on_models_updated(self, *, llm: LLM | RealtimeModel | None | NotGiven,
                          tts: TTS | None | NotGiven, stt: STT | None | NotGiven) -> None: ...

    def interrupt(self, *, force: bool = False) -> list[SpeechHandle]: ...

    async def finish_for_close(self) -> None:
        """The session closes: interrupt every speech, then run ``on_exit`` while the agent
        can still speak (what it says plays). Cancellation: the caller bounds it."""

    def start_soon(self, async_fn: Callable[[], Awaitable[object]]) -> None:
        """Run ``async_fn`` in the activity's nursery (cancelled when the activity ends)."""


def _snake_case(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@trio.as_safe_channel
async def _stt_events(stt: STT, audio: AsyncIterable[rtc.AudioFrame]
                      ) -> AsyncGenerator[SpeechEvent, None]:
    """Push ``audio`` into an STT stream while yielding its events (a safe channel: the
    pushing task lives in the channel's own nursery)."""
    async with stt.stream() as stream, trio.open_nursery() as nursery:
        async def push() -> None:
            async for frame in audio:
                stream.push_frame(frame)
            stream.end_input()

        nursery.start_soon(push)
        async for ev in stream:
            yield ev
        nursery.cancel_scope.cancel()


#: what ``Agent.on_user_turn_exceeded`` tells the LLM by default
CUT_IN_INSTRUCTIONS = ("The user has talked for a long time without leaving room for a reply. "
                       "Cut in politely with a brief reply or remark; keep it short, as the "
                       "user cannot interrupt it.")


class Agent:
    """An agent: what the LLM is told, which tools it has, and how it reacts.

    Args:
        instructions: The system instructions.
        id: Defaults to the snake_case class name (``"default_agent"`` for a plain Agent).
        chat_ctx: The conversation the agent starts with.
        tools: Extra tools; ``@function_tool`` methods of the class are always included.
        stt, llm, tts: Per-agent models; omitted means the session's, None disables. The
            agent's ``stt`` is used by its default ``stt_node``. Taken as ``AgentSession``
            takes them: Trio models, LiveKit plugin objects (adapted here) or LiveKit
            inference model strings (see ``agents_trio.model_resolution``).
        vad: Not supported (the session's VAD serves every agent): giving it raises.
        turn_handling: Per-agent overrides of the session's turn handling (per key).
        tool_handling: ``{"async_options": {...}}``: this agent's background-tool templates
            (``agents_trio.tool_handling``); they replace the session's as a whole.
        allow_interruptions: Shortcut for ``turn_handling["interruption"]["enabled"]``.
        turn_detection, min_endpointing_delay, max_endpointing_delay: LiveKit 1.x's deprecated
            spellings of ``turn_handling`` keys; folded into it (when it is not given) with a
            ``DeprecationWarning``.
        min_consecutive_speech_delay: Minimum gap between two speeches of this agent.

    Raises:
        ValueError, TypeError: a model that is none of those (the error names the
            parameter), a bad ``turn_handling`` (an unknown key, a value of the wrong type or
            out of range, an unknown ``turn_detection``) or a negative delay.
        ValueError: ``vad`` was given.
    """

    def __init__(self, *, instructions: str | Instructions, id: str | None = None,
                 chat_ctx: ChatContext | None = None, tools: list[Any] | None = None,
                 stt: STT | str | None | NotGiven = NOT_GIVEN,
                 vad: VAD | None | NotGiven = NOT_GIVEN,
                 llm: LLM | RealtimeModel | str | None | NotGiven = NOT_GIVEN,
                 tts: TTS | str | None | NotGiven = NOT_GIVEN,
                 turn_handling: dict[str, Any] | None = None,
                 tool_handling: ToolHandlingOptions | None = None,
                 allow_interruptions: bool | None = None,
                 min_consecutive_speech_delay: float | None = None,
                 use_tts_aligned_transcript: bool | NotGiven = NOT_GIVEN,
                 turn_detection: object = NOT_GIVEN,
                 min_endpointing_delay: float | NotGiven = NOT_GIVEN,
                 max_endpointing_delay: float | NotGiven = NOT_GIVEN,
                 mcp_servers: list[MCPServer] | None | NotGiven = NOT_GIVEN) -> None:
        #: this agent's background-tool templates (None: the session's), completed with the
        #: defaults, not with the session's (as LiveKit)
        self.async_tool_options: AsyncToolOptions | None = check_tool_handling(
            type(self).__name__, tool_handling)
        # LiveKit 1.x's flat keywords: folded into turn_handling (unless given) with a warning
        migrated = turn_handling_from_deprecated(type(self).__name__, {
            name: value for name, value in (
                ("turn_detection", turn_detection),
                ("min_endpointing_delay", min_endpointing_delay),
                ("max_endpointing_delay", max_endpointing_delay))
            if not isinstance(value, NotGiven)})
        if turn_handling is None and migrated:
            turn_handling = migrated
        if not isinstance(vad, NotGiven):
            # LiveKit runs the agent's own VAD; here one recognition serves the whole session
            raise ValueError("a per-agent vad is not supported by agents_trio: the session's "
                             "VAD serves every agent (give it to AgentSession)")
        models = resolve_models("Agent", stt=stt, vad=None, llm=llm, tts=tts,
                                turn_handling=turn_handling, unset=NOT_GIVEN)
        turn_handling = models.turn_handling
        check_turn_handling(turn_handling)
        # it becomes turn_handling's interruption "enabled", a bool
        check_flag("allow_interruptions", allow_interruptions, allow_none=True)
        check_non_negative("min_consecutive_speech_delay", min_consecutive_speech_delay,
                           allow_none=True)
        if not isinstance(use_tts_aligned_transcript, NotGiven):
            check_flag("use_tts_aligned_transcript", use_tts_aligned_transcript,
                       allow_none=True)
        check_str("id", id, allow_none=True)
        if id is None:
            id = "default_agent" if type(self) is Agent else _snake_case(type(self).__name__)
        self._id = id
        check_instructions(instructions)
        self._instructions = instructions
        check_chat_ctx(chat_ctx)
        self._chat_ctx = chat_ctx.copy() if chat_ctx else ChatContext()
        # function tools, provider tools and toolsets, as given (flattened for the LLM)
        self._tools: list[Any] = list(tools or []) + find_function_tools(self)
        flatten_tools(self._tools)  # bad tools and duplicate names fail here
        self._stt: STT | None | NotGiven = models.stt
        self._llm: LLM | RealtimeModel | None | NotGiven = models.llm
        self._tts: TTS | None | NotGiven = models.tts
        self._vad: VAD | None | NotGiven = vad
        self._turn_handling = dict(turn_handling or {})
        if allow_interruptions is not None:
            interruption = dict(self._turn_handling.get("interruption", {}))
            interruption["enabled"] = allow_interruptions
            self._turn_handling["interruption"] = interruption
        self._min_consecutive_speech_delay = min_consecutive_speech_delay
        self._mcp_servers: list[MCPServer] | None | NotGiven = (
            mcp_servers if isinstance(mcp_servers, NotGiven)
            else check_mcp_servers(type(self).__name__, mcp_servers))
        self._use_tts_aligned_transcript = use_tts_aligned_transcript
        self._activity: AgentActivity | None = None

    # -- properties ---------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self._id

    @property
    def use_tts_aligned_transcript(self) -> bool | NotGiven:
        """Whether the TTS's word timestamps pace this agent's transcript (NOT_GIVEN: the
        session's choice)."""
        return self._use_tts_aligned_transcript

    @property
    def label(self) -> str:
        return type(self).__name__

    @property
    def instructions(self) -> str | Instructions:
        """As given: a string, or :class:`Instructions` rendered per turn modality."""
        return self._instructions

    @property
    def tools(self) -> list[Any]:
        return list(self._tools)

    @property
    def mcp_servers(self) -> list[MCPServer] | None | NotGiven:
        """The agent's MCP servers; ``NOT_GIVEN``: the session's are used."""
        return self._mcp_servers

    @property
    def chat_ctx(self) -> ChatContext:
        """A read-only view of the agent's chat context."""
        return ReadOnlyChatContext(self._chat_ctx.items)

    @property
    def session(self) -> SessionView:
        if self._activity is None:
            raise RuntimeError("the agent is not running in a session")
        return self._activity.session

    @property
    def stt(self) -> STT | None | NotGiven:
        return self._stt

    @property
    def vad(self) -> VAD | None | NotGiven:
        return self._vad

    @property
    def llm(self) -> LLM | RealtimeModel | None | NotGiven:
        return self._llm

    @property
    def tts(self) -> TTS | None | NotGiven:
        return self._tts

    @property
    def turn_handling(self) -> dict[str, Any]:
        return self._turn_handling

    # -- updates ------------------------------------------------------------------------------
    async def update_instructions(self, instructions: str | Instructions) -> None:
        """Replace the instructions (recorded as an ``AgentConfigUpdate`` when running).

        Cancellation: not a checkpoint; the update happens at once.
        """
        check_instructions(instructions)
        self._instructions = instructions
        if self._activity is not None:
            self._activity.on_instructions_updated()

    async def update_tools(self, tools: list[Any]) -> None:
        """Replace the tools (recorded as an ``AgentConfigUpdate`` when the set changed).

        Cancellation: not a checkpoint; the update happens at once.
        """
        flatten_tools(tools)
        old = set(function_tool_names(self._tools))
        self._tools = list(tools)
        if self._activity is not None:
            self._activity.on_tools_updated(old)

    async def update_chat_ctx(self, chat_ctx: ChatContext) -> None:
        """Replace the chat context; calls and outputs of unknown tools are dropped.

        Cancellation: not a checkpoint; the update happens at once.
        """
        check_chat_ctx(chat_ctx, allow_none=False)
        names = set(function_tool_names(self._tools))
        items = [i for i in chat_ctx.items
                 if i.type not in ("function_call", "function_call_output")
                 or getattr(i, "name", None) in names]
        self._chat_ctx = ChatContext(items)
        if self._activity is not None:
            self._activity.on_chat_ctx_replaced()

    # -- hooks --------------------------------------------------------------------------------
    async def on_enter(self) -> None:
        """Called when the agent becomes active (launched, not awaited, by the session).

        Cancellation: it runs in the agent's activity; a handoff waits for it to return (or
        to await an AgentTask), and closing the session cancels it. An exception is logged.
        """

    async def on_exit(self) -> None:
        """Called when the agent stops being active (handoff or close).

        Cancellation: runs once per ``on_enter``, also when the session closes, then shielded
        for at most the session's ``close_grace``; past the grace it is cancelled. An
        exception is logged.
        """

    async def on_user_turn_completed(self, turn_ctx: ChatContext,
                                     new_message: ChatMessage) -> None:
        """Called when the user finished a turn, before the reply; raise StopResponse to skip.

        Cancellation: the turn waits for it; closing the session cancels it, and the turn is
        then not answered.
        """

    def update_options(self, *, stt: STT | None | NotGiven = NOT_GIVEN,
                       vad: VAD | None | NotGiven = NOT_GIVEN,
                       llm: LLM | RealtimeModel | None | NotGiven = NOT_GIVEN,
                       tts: TTS | None | NotGiven = NOT_GIVEN) -> None:
        """Swap the agent's STT, LLM or TTS (None disables one, as at construction); only
        the ones given change. A running agent's next reply uses the new LLM and TTS (the
        STT is the default ``stt_node``'s). Raises ValueError for a ``vad`` (per-agent VADs
        are not supported here) and RuntimeError for swapping a realtime model in or out of
        a running agent (hand off to a new agent instead)."""
        if not isinstance(vad, NotGiven):
            raise ValueError("a per-agent vad is not supported by agents_trio: the session's "
                             "VAD serves every agent (give it to AgentSession)")
        if self._activity is not None:
            self._activity.on_models_updated(llm=llm, tts=tts, stt=stt)  # may refuse: first
        if not isinstance(stt, NotGiven):
            self._stt = stt
        if not isinstance(llm, NotGiven):
            self._llm = llm
        if not isinstance(tts, NotGiven):
            self._tts = tts

    async def on_user_turn_exceeded(self, ev: UserTurnExceededEvent) -> None:
        """Called when the user talked past ``turn_handling["user_turn_limit"]`` without
        the agent answering. By default, cuts in: a short, uninterruptible reply to the open
        turn's transcript, without tools (the earlier turns are in the context already).

        Cancellation: the agent's activity ending cancels it; a newer report never does.
        """
        await self.session.generate_reply(
            user_input=ev.transcript,
            instructions=CUT_IN_INSTRUCTIONS,
            allow_interruptions=False, tool_choice="none")

    # -- nodes --------------------------------------------------------------------------------
    async def llm_node(self, chat_ctx: ChatContext, tools: list[FunctionTool],
                       model_settings: ModelSettings
                       ) -> AsyncIterator[ChatChunk | str | FlushSentinel]:
        """Run the LLM: yields chunks (``str``, ``ChatChunk`` or ``FlushSentinel``).

        Cancellation: interrupting the speech cancels the iteration; the node is closed
        (``aclose``) in the task that iterated it, and the LLM stream with it.
        """
        llm = self._require_activity().llm
        # (not isinstance(llm, LLM): a runtime protocol check costs tens of µs on every reply)
        if llm is None or is_realtime_model(llm):  # a realtime model's steps have no llm_node
            raise RuntimeError("no LLM is configured for this agent or session")
        async with llm.chat(chat_ctx=chat_ctx, tools=tools,
                            tool_choice=model_settings.tool_choice) as stream:
            async for chunk in stream:
                yield chunk

    async def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                       ) -> AsyncIterator[rtc.AudioFrame]:
        """Synthesize one segment of text into audio frames.

        Cancellation: interrupting the speech cancels the iteration; the node is closed in the
        task that iterated it, and the TTS stream with it.
        """
        tts = self._require_activity().tts
        if tts is None:
            raise RuntimeError("no TTS is configured for this agent or session")
        async with tts.stream(text) as frames:
            async for frame in frames:
                yield frame

    async def stt_node(self, audio: AsyncIterable[rtc.AudioFrame], model_settings: ModelSettings
                       ) -> AsyncIterator[SpeechEvent]:
        """Turn the user's audio into speech events with the STT.

        An override may transform the events and delegate with
        ``async for ev in super().stt_node(audio, model_settings): yield ev``. The session
        consumes the node in one task and closes it when recognition stops.

        Cancellation: when recognition stops (the session closes), the node is closed and
        the STT stream with it.
        """
        stt = (self._require_activity().session.stt if isinstance(self._stt, NotGiven)
               else self._stt)
        if stt is None:
            raise RuntimeError("no STT is configured for this agent or session")
        async with _stt_events(stt, audio) as events:
            async for ev in events:
                yield ev

    async def transcription_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                                 ) -> AsyncIterator[str]:
        """Transform the agent's text shown and remembered (passthrough by default).

        The node gets each segment of a reply (LLM, ``say()`` or realtime) as it is generated
        and runs once the speech plays. What it yields is the transcription output's text
        (paced by the transcript synchronizer) and the assistant message the history keeps,
        cut at the played position when the reply is interrupted, as in LiveKit. The TTS
        still gets the text itself. A failing node is an ``error`` event; the segment then
        keeps what the node yielded before failing.

        Cancellation: interrupting the speech (or closing the session) cancels the iteration
        and closes the node; what it yielded so far is what the played part is cut from.
        """
        async for chunk in text:
            yield chunk

    async def realtime_audio_output_node(self, audio: AsyncIterable[rtc.AudioFrame],
                                         model_settings: ModelSettings
                                         ) -> AsyncIterator[rtc.AudioFrame]:
        """Transform a realtime model's audio before it is played (passthrough by default).

        Cancellation: interrupting the speech cancels the iteration; the node is closed in
        the task that iterated it.
        """
        self._require_activity()
        async for frame in audio:
            yield frame

    class default:  # lower case: LiveKit's name
        """The default nodes as functions of the agent (LiveKit's ``Agent.default``): an
        override can wrap them, e.g. ``Agent.default.llm_node(self, chat_ctx, tools,
        model_settings)``, whatever a base class between overrides."""

        @staticmethod
        def stt_node(agent: Agent, audio: AsyncIterable[rtc.AudioFrame],
                     model_settings: ModelSettings) -> AsyncIterator[SpeechEvent]:
            return Agent.stt_node(agent, audio, model_settings)

        @staticmethod
        def llm_node(agent: Agent, chat_ctx: ChatContext, tools: list[FunctionTool],
                     model_settings: ModelSettings
                     ) -> AsyncIterator[ChatChunk | str | FlushSentinel]:
            return Agent.llm_node(agent, chat_ctx, tools, model_settings)

        @staticmethod
        def tts_node(agent: Agent, text: AsyncIterable[str], model_settings: ModelSettings
                     ) -> AsyncIterator[rtc.AudioFrame]:
            return Agent.tts_node(agent, text, model_settings)

        @staticmethod
        def transcription_node(agent: Agent, text: AsyncIterable[str],
                               model_settings: ModelSettings) -> AsyncIterator[str]:
            return Agent.transcription_node(agent, text, model_settings)

        @staticmethod
        def realtime_audio_output_node(agent: Agent, audio: AsyncIterable[rtc.AudioFrame],
                                       model_settings: ModelSettings
                                       ) -> AsyncIterator[rtc.AudioFrame]:
            return Agent.realtime_audio_output_node(agent, audio, model_settings)

    @contextmanager
    def running_in(self, activity: AgentActivity) -> Iterator[None]:
        """The agent runs in ``activity`` for the duration of the block (used by the
        activity; ``session``, the updates and the nodes reach it meanwhile)."""
        self._activity = activity
        try:
            yield
        finally:
            self._activity = None

    @property
    def live_chat_ctx(self) -> ChatContext:
        """The agent's own, mutable chat context (the runtime records the conversation into
        it; ``chat_ctx`` is the read-only view for user code)."""
        return self._chat_ctx

    @live_chat_ctx.setter
    def live_chat_ctx(self, ctx: ChatContext) -> None:
        self._chat_ctx = ctx

    @property
    def min_consecutive_speech_delay(self) -> float | None:
        """This agent's minimum gap between two speeches (None: the session's)."""
        return self._min_consecutive_speech_delay

    def _require_activity(self) -> AgentActivity:
        if self._activity is None:
            raise RuntimeError("the agent is not running in a session")
        return self._activity

    def __repr__(self) -> str:
        return f"{type(self).__name__}(id={self._id!r})"


