"""Activity: one running Agent — its speech scheduler, user turns, interruptions and tools.

The activity owns a nursery; every speech of the agent runs in it. The scheduler plays one
speech at a time (priority, then FIFO). A speech's generation step runs in the handle's step
scope; its tools run in the activity's nursery, outside that scope, and the step waits for
each call's first answer (see ``generation`` and ``background_tools``).
"""

from __future__ import annotations

import contextvars
import enum
import logging
import sys
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

import msgspec
import trio
from livekit import rtc

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

from .chat import (INSTRUCTIONS_ID, AgentConfigUpdate, ChatContext, ChatItem, ChatMessage,
                   FunctionCall, FunctionCallOutput)
from .events import (FunctionToolsExecutedEvent, LLMMetrics, TTSMetrics,
                     ToolExecutionUpdatedEvent, UserTurnExceededEvent)
from .generation import Generation, ReplyRequest, StepState
from .agent import NOT_GIVEN, Agent, NotGiven
from .agent_state import AgentStateRules
from .hosts import ActivityHost
from .interruption import AudioInterruption
from .models import LLM, STT, TTS, CompletionUsage, ToolChoice
from .nurseries import Flag, PriorityQueue, TaskOwner, Wakeup, open_owner, single_leaf
from .preemptive import PreemptiveGeneration
from .user_turns import UserTurns
from .realtime import RealtimeModel, is_realtime_model
from .realtime_generation import RealtimeGeneration
from .realtime_link import RealtimeLink
from .options import resolve_turn_handling
from .recognition import EndOfTurnInfo
from .run_context import RunContext
from .run_result import RunHold, RunResult
from .speech_handle import SpeechHandle
from .instructions import InputDetails, Instructions, InputModality, render_instructions
from ._errors import SessionClosedError
from .background_tools import NON_BLOCKING, BackgroundTools, ToolRun
from .fillers import Filler
from .floor import Floor
from .cancel_tools import with_cancel_tools
from .tool_calls import Admission, ToolCalls, execute_admitted, session_calls
from .tool_events import call_ended, call_started
from .async_toolset import async_toolsets_by_tool
from .session_scope import session_scope
from .speech_args import (check_chat_ctx, check_flag, check_instructions, check_say_text,
                          check_tool_choice)
from .tool_handling import AsyncToolOptions, resolve_async_tool_options
from .tool_mocks import find_mock
from .tools import FunctionTool, ToolFlag, cancelled_outcome
from .mcp import MCPServer, MCPTool, open_mcp_tools
from .toolsets import aclose_toolsets, flatten_tools, function_tool_names, setup_toolsets
from .turn_limit import TurnLimitHook
from .turn_metrics import assistant_message_metrics, llm_step_metrics
from .usage import model_label, model_metadata

logger = logging.getLogger("agents_trio")

_HANDOFF_INTERRUPTED = "the agent handoff was interrupted and did not happen"


class InlineScope(msgspec.Struct, kw_only=True):
    """Where user code that may await an AgentTask runs: a tool, or on_enter/on_exit."""

    activity: Activity
    speech_handle: SpeechHandle | None = None
    function_call: FunctionCall | None = None
    hook: str | None = None  # "on_enter" / "on_exit" when awaited from a hook
    # what the AgentTasks awaited here said (merged into the agent's context on return): the
    # tool reply of this tool's step sees it, as it sees the step's own items
    gained: list[ChatItem] = msgspec.field(default_factory=list)


current_inline: contextvars.ContextVar[InlineScope | None] = contextvars.ContextVar(
    "agents_trio_current_inline", default=None)


class ActivityState(enum.Enum):
    CREATED = "created"
    RUNNING = "running"
    DRAINING = "draining"   # on_exit done; only forced tool replies are scheduled
    CLOSED = "closed"       # its nursery is closed; on_exit may still be running


class _HookPhase(enum.Enum):
    NOT_ENTERED = "not_entered"
    ENTERED = "entered"
    EXITED = "exited"


class Activity:
    """Runs one agent inside the session. Created and owned by the session's activity host."""

    def __init__(self, session: ActivityHost[Activity], agent: Agent) -> None:
        self.session = session
        self.agent = agent
        self.options = resolve_turn_handling(session.turn_handling_overrides, agent.turn_handling)
        self.min_consecutive_speech_delay = (
            agent.min_consecutive_speech_delay if agent.min_consecutive_speech_delay is not None
            else session.min_consecutive_speech_delay)
        aligned = agent.use_tts_aligned_transcript
        self.use_tts_aligned_transcript = (
            aligned if not isinstance(aligned, NotGiven) else session.use_tts_aligned_transcript
        ) is True
        self.llm = session.llm if isinstance(agent.llm, NotGiven) else agent.llm
        self.tts = session.tts if isinstance(agent.tts, NotGiven) else agent.tts
        self.stt = session.stt if isinstance(agent.stt, NotGiven) else agent.stt
        self._turn_limit = TurnLimitHook(self, session.conversation)
        self._state = ActivityState.CREATED
        self._hooks = _HookPhase.NOT_ENTERED
        self._queue: PriorityQueue[SpeechHandle] = PriorityQueue()
        self._current_speech: SpeechHandle | None = None
        self._speeches: set[SpeechHandle] = set()
        self._speeches_changed = Wakeup()
        self._pending_user_messages: dict[SpeechHandle, ChatMessage] = {}
        #: the one place that decides the agent's state while this activity runs
        self.agent_state = AgentStateRules(session.conversation, self)
        self.turns = UserTurns(self)
        self.interruption = AudioInterruption(self)
        #: the background-tool templates: the agent's (completed with the defaults), or the
        #: session's
        self.tool_options = (session.async_tool_options if agent.async_tool_options is None
                             else resolve_async_tool_options(agent.async_tool_options))
        # the calls running now, for on_duplicate and lk_agents_cancel_task
        self.tool_calls = ToolCalls(session_calls(session))
        # the tools of AsyncToolsets: the session's run in the session's scope
        self._session_scoped = async_toolsets_by_tool(session.tools)
        self._agent_async = async_toolsets_by_tool(agent.tools)
        self.background = BackgroundTools(self)  # calls answered by an update, still running
        # per speech, its calls not answered yet: a speech waiting only for them holds no floor
        self._unanswered: dict[SpeechHandle, int] = {}
        # the speeches whose step dispatched calls it has not committed yet: until then their
        # outcomes may hand off, so the agent is not settled (a realtime agent too, whose
        # replies do not hold an input back otherwise)
        self._tool_rounds: set[SpeechHandle] = set()
        self.preemptive = PreemptiveGeneration(self)
        self.realtime = RealtimeLink(self, self.llm) if is_realtime_model(self.llm) else None
        self.scheduling_closed = Flag()
        self._nursery: trio.Nursery | None = None
        self._mcp_tools: list[MCPTool] = []  # the MCP servers' tools, once connected
        # cancelled by stop(): ends the speech scheduler, which runs in run's own task
        self._stop_scope = trio.CancelScope()
        self._stopped = Flag()
        self.scheduling_open = Flag()
        self.scheduling_open.set()
        # set when on_enter returned, or handed the floor to an AgentTask it awaits
        self.enter_settled = Flag()
        self.enter_finished = Flag()
        # on_enter's own scope: a close ends it before on_exit runs (finish_for_close)
        self._enter_scope = trio.CancelScope()
        self._on_enter_hold: RunHold | None = None  # the active run waits for on_enter
        self._inline_task_lock: trio.Lock | None = None  # see inline_task_lock

    @property
    def inline_task_lock(self) -> trio.Lock:
        """AgentTasks awaited by parallel tool calls of one turn run one after another, under
        this lock (made by the first use: most activities never await one)."""
        if self._inline_task_lock is None:
            self._inline_task_lock = trio.Lock()
        return self._inline_task_lock

    # -- lifecycle ----------------------------------------------------------------------------
    @property
    def state(self) -> ActivityState:
        return self._state

    @property
    def current_speech(self) -> SpeechHandle | None:
        """The speech the scheduler authorized, until its generation step is done (then it
        only waits for its tools, as a background speech).

        Derived from the step, not only from the scheduler's pointer: once the step is done,
        the speech's tool reply is queued as a new step that is not authorized yet, and that
        step is not playing whether or not the scheduler has run since. (Counting it made a
        parent pausing for an AgentTask wait for a step that only its resume could start.)
        """
        speech = self._current_speech
        if speech is None or speech.generation_done or not speech.authorized:
            return None
        return speech

    @property
    def audio_output_enabled(self) -> bool:
        return self.session.output.active_audio is not None and self.tts is not None

    @property
    def allow_interruptions(self) -> bool:
        return self.options.interruption.enabled

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the agent until ``stop()`` or cancellation; ``on_exit`` runs on the way out.

        Cancellation: cancelling the caller cancels every speech and tool of the agent; its
        ``on_exit`` (if ``on_enter`` was started) still runs under the session's shielded grace.
        """
        owner: TaskOwner | None = None
        try:
            with self.agent.running_in(self):
                try:
                    async with open_owner(grace=self.session.close_grace,
                                          name=f"activity:{self.agent.id}") as owner:
                        self._nursery = owner.nursery
                        self.interruption.bind(owner.nursery)
                        self.background.bind(owner.nursery)
                        self._record_config()
                        await setup_toolsets([*self.session.tools, *self.agent.tools])
                        self._mcp_tools = await open_mcp_tools(owner.nursery,
                                                               self._mcp_servers())
                        if self.realtime is not None:
                            await owner.start(self.realtime.run)
                        self.turns.bind(owner.nursery)
                        self._state = ActivityState.RUNNING
                        task_status.started()
                        del task_status  # not kept: it holds start()'s temporary nursery
                        # the speech scheduler runs here, until stop(): no task of its own
                        with self._stop_scope:
                            await self._scheduler()
                        owner.cancel()
                finally:
                    # its nursery is closed from here on: nothing can start in it, so it
                    # takes no turn, speech or tool reply (on_exit may still run below)
                    self._state = ActivityState.CLOSED
                    if owner is not None:
                        with owner.cleanup_scope():
                            await self._run_on_exit()
                            await aclose_toolsets(self.agent.tools)
                    self._queue.close()
        finally:
            self._stopped.set()

    def enter(self) -> None:
        """Launch ``on_enter`` (not awaited); called once the session points at this activity."""
        if self._hooks is _HookPhase.NOT_ENTERED and self._nursery is not None:
            self._hooks = _HookPhase.ENTERED
            run = self.session.conversation.active_run
            if run is not None:
                # an active run watches on_enter (without awaiting it): its speeches belong to it
                self.watch_on_enter(run)
            self._nursery.start_soon(self._run_on_enter)

    def watch_on_enter(self, run: RunResult[Any]) -> None:
        """Keep ``run`` open until on_enter returns (or hands the floor to an AgentTask)."""
        if self._on_enter_hold is None and not self.enter_finished.is_set():
            self._on_enter_hold = run.hold()

    def unwatch_on_enter(self) -> None:
        hold, self._on_enter_hold = self._on_enter_hold, None
        if hold is not None:
            hold.release()

    async def drain(self) -> None:
        """Run ``on_exit``, let queued speeches and tool replies finish, then stop.

        Cancellation: cancelling ``drain`` leaves the activity running in draining state.
        """
        if self._state is not ActivityState.RUNNING:
            await self._stopped.wait()
            return
        self.preemptive.discard()
        self.block_new_turns()
        # on_exit follows on_enter: a handoff requested right after this agent started
        # waits for its on_enter to return (or hand the floor to an AgentTask)
        await self.wait_enter_settled()
        await self._exit()
        # the speeches still to play: a queued handle that is done (its task ended, e.g.
        # cancelled by a close meanwhile) never plays, and nothing would wake this wait again
        while self._speeches or any(not h.done() for h in self._queue):
            await self._speeches_changed.wait()
        await self.background.drain()
        self._stop_scope.cancel()
        await self._stopped.wait()

    async def wait_enter_settled(self) -> None:
        """Wait until ``on_enter`` returned or handed the floor to an AgentTask it awaits
        (at once if it was never launched).

        Cancellation: a checkpoint only.
        """
        if self._hooks is _HookPhase.ENTERED:
            await self.enter_settled.wait()

    async def finish_for_close(self) -> None:
        """The session closes without draining: stop what the agent is doing, then let it
        say goodbye, as LiveKit's close does (it interrupts with ``force``, then drains).

        ``on_enter`` still running is cancelled (``on_exit`` follows it); every speech is
        interrupted, also one that disallows interruptions, and waited for until it stopped
        playing (a speech waiting only for its running tools does not count: it may be the
        speech of the tool that asked for the close); a scheduler paused for an AgentTask
        (the close unwound the task) opens again. Then ``on_exit`` runs while the agent can
        still speak, and what it says plays. The activity then drains (it takes no new
        speech); its tools and everything else are left to the close's cancellation.

        Cancellation: the caller bounds it (the close's grace): what is cut there is
        interrupted (its played part kept), ``on_exit`` does not run again, and the activity
        drains all the same.
        """
        if self._state is not ActivityState.RUNNING:
            return  # draining (its own on_exit ran or runs) or closed
        try:
            self.preemptive.discard()
            self.block_new_turns()
            if self._hooks is _HookPhase.ENTERED and not self.enter_finished.is_set():
                self._enter_scope.cancel()
                await self.enter_finished.wait()
            self.interrupt(force=True)
            self._open_scheduling()
            await self._wait_speeches_stopped()
            await self._exit()
            await self._wait_speeches_stopped()
        finally:
            if self._state is ActivityState.RUNNING:
                self._state = ActivityState.DRAINING
            self.interrupt(force=True)  # what the grace cut stops now

    async def _exit(self) -> None:
        """What a drain and a close share: ``on_exit`` (once), then the activity drains."""
        await self._run_on_exit()
        if self._state is ActivityState.RUNNING:
            # states only move forward: a close during on_exit (which need not cancel this
            # caller) left the activity CLOSED, and it stays so
            self._state = ActivityState.DRAINING

    async def _wait_speeches_stopped(self) -> None:
        """Wait until no speech of this agent is queued or playing, or about to reply to its
        tools (``floor_free``: a speech waiting for calls not answered yet does not count)."""
        while not self.floor_free:
            await self._speeches_changed.wait()

    @property
    def settled(self) -> bool:
        """Waiting for the user: ``on_enter`` returned (while it awaits an AgentTask the task's
        activity is current instead; when the task gives the floor back, the rest of
        ``on_enter`` runs first), no speech is queued or unfinished (a speech is finished once
        its tool rounds and tool replies are: between a step that called tools and their
        dispatch nothing runs, but the turn is not over), and no tool of this agent runs (a
        tool that awaits an AgentTask has handed the floor to the task's activity, which is
        then current) nor waits for its step to commit its outcome, which may hand off.

        An activity a handoff was requested from (its turns are blocked), or that drains or
        closed, is never settled: the conversation waits for the user again once the next
        agent is current and settled."""
        # with a realtime model the server owns the turn: a new input ends the response in
        # progress (see RealtimeLink), so only tools (until their step committed them) and
        # on_enter hold an input back
        return (self.accepts_turns and self.turns.open and self.enter_finished.is_set()
                and not self.tools_running and not self._tool_rounds
                and (self.realtime is not None or not self.replying))

    @property
    def replying(self) -> bool:
        """A speech of this agent is scheduled and not finished (also with a realtime model,
        whose replies ``settled`` does not wait for)."""
        return any(h.scheduled and not h.done() for h in self._speeches)

    def _note_progress(self) -> None:
        self._speeches_changed.notify()
        self.session.conversation.progressed()

    def block_new_turns(self) -> None:
        """Stop accepting user turns (a handoff was requested or the agent drains)."""
        self.turns.block()

    @property
    def leaving(self) -> bool:
        """A handoff or the close takes the floor from this agent (it takes no user turn
        any more): nothing new starts here but what its ``on_exit`` does."""
        return not self.turns.open

    def end_realtime(self) -> None:
        """Another agent takes over: nothing more reaches this activity's realtime session."""
        if self.realtime is not None:
            self.realtime.end()

    @property
    def server_turn_detection(self) -> bool:
        return self.realtime is not None and self.realtime.server_turn_detection

    def start_soon(self, async_fn: Callable[[], Awaitable[object]]) -> None:
        """Run ``async_fn`` in the activity's nursery (cancelled when the activity ends)."""
        assert self._nursery is not None
        self._nursery.start_soon(async_fn)

    def push_realtime_audio(self, frame: rtc.AudioFrame) -> None:
        if self.realtime is not None:
            self.realtime.push_audio(frame)

    async def _run_on_enter(self) -> None:
        token = current_inline.set(InlineScope(activity=self, hook="on_enter"))
        try:
            with self._enter_scope:
                await self.agent.on_enter()
        except Exception:
            logger.exception("error in %s.on_enter", type(self.agent).__name__)
        finally:
            current_inline.reset(token)
            self.enter_settled.set()
            self.enter_finished.set()
            self._note_progress()
            self.unwatch_on_enter()

    async def _run_on_exit(self) -> None:
        if self._hooks is not _HookPhase.ENTERED:
            return
        self._hooks = _HookPhase.EXITED
        token = current_inline.set(InlineScope(activity=self, hook="on_exit"))
        try:
            await self.agent.on_exit()
        except Exception:
            logger.exception("error in %s.on_exit", type(self.agent).__name__)
        finally:
            current_inline.reset(token)

    # -- pausing for an AgentTask (the parent stays alive, its scheduler holds) ---------------
    async def pause(self) -> None:
        """Hold the scheduler: the speeches queued before the call and the one playing
        finish first (the task's speeches must not play over them); those queued later
        wait until ``resume()``; a realtime session is closed until then. Returns once all
        of that is done.

        Cancellation: a checkpoint; cancelled while the speeches queued before it still
        generate, the activity is not paused yet; later, it stays paused.
        """
        if self.scheduling_open.is_set():
            # what was queued before the pause plays first, as LiveKit's pause plays out
            # its queue (the greeting an on_enter asks for just before it awaits a task):
            # each of those speeches generates while the scheduler is still open
            for queued in [h for h in self._queue if not h.done()]:
                await queued.wait_for_generation()
        if self.scheduling_open.is_set():
            self.scheduling_open = Flag()
            self.scheduling_closed.set()
            self.background.paused()
            # a preemptive reply parked here would never be taken: the user's turn ends
            # under the task, which answers it. Dropped once closed (none starts while
            # paused), as LiveKit's pause drops it
            self.preemptive.discard()
        while (playing := self.current_speech) is not None:
            await playing.wait_for_generation()
        if self.realtime is not None:
            await self.realtime.suspend()

    @property
    def scheduling_paused(self) -> bool:
        """Paused for an AgentTask (between ``pause()`` and ``resume()``)."""
        return not self.scheduling_open.is_set()

    async def wait_resumed(self) -> None:
        """Wait until this agent is not paused for an AgentTask.

        Cancellation: a checkpoint only.
        """
        await trio.lowlevel.checkpoint()
        while not self.scheduling_open.is_set():
            await self.scheduling_open.wait()

    def resume(self) -> None:
        """Reopen the scheduler after an AgentTask returned (recorded as a config update)."""
        if self._open_scheduling():
            self.background.resumed()
            self.commit_item(AgentConfigUpdate(instructions=self.instructions_text(),
                                               tools_added=function_tool_names(self.agent.tools)))

    def reopen_to_leave(self) -> None:
        """The AgentTask this activity paused for was replaced by a handoff: its scheduler
        opens again (without the config update of ``resume()``), so that the goodbye of
        its ``on_exit`` plays while the handoff drains it."""
        if self._open_scheduling():
            self.background.resumed()

    def _open_scheduling(self) -> bool:
        """Let the scheduler authorize speeches again; False when it was not paused."""
        if self.scheduling_open.is_set():
            return False
        self.scheduling_closed = Flag()
        self.scheduling_open.set()
        return True

    def instructions_text(self, modality: InputModality = "audio") -> str:
        """The agent's instructions rendered for a turn of ``modality``; the agent's context
        holds the spoken (audio) rendering, as LiveKit's does."""
        return render_instructions(self.agent.instructions, modality)

    def _record_config(self) -> None:
        ctx = self.agent.live_chat_ctx
        instructions = ChatMessage(role="system", content=[self.instructions_text()],
                                   id=INSTRUCTIONS_ID, created_at=0.0)
        idx = ctx.index_by_id(INSTRUCTIONS_ID)
        if idx is None:
            ctx.items.insert(0, instructions)
        else:
            ctx.items[idx] = instructions
        self.commit_item(AgentConfigUpdate(instructions=self.instructions_text(),
                                           tools_added=function_tool_names(self.agent.tools)))

    def on_instructions_updated(self) -> None:
        self._record_config_change(AgentConfigUpdate(instructions=self.instructions_text()))
        idx = self.agent.live_chat_ctx.index_by_id(INSTRUCTIONS_ID)
        if idx is not None:
            self.agent.live_chat_ctx.items[idx] = ChatMessage(
                role="system", content=[self.instructions_text()], id=INSTRUCTIONS_ID,
                created_at=0.0)
        if self.realtime is not None:
            self.realtime.agent_changed("instructions")

    def on_tools_updated(self, old_names: set[str]) -> None:
        if self.realtime is not None:
            self.realtime.agent_changed("tools")
        new_names = set(function_tool_names(self.agent.tools))
        if new_names != old_names:
            self._record_config_change(AgentConfigUpdate(
                tools_added=sorted(new_names - old_names) or None,
                tools_removed=sorted(old_names - new_names) or None))

    def on_chat_ctx_replaced(self) -> None:
        if self.agent.live_chat_ctx.index_by_id(INSTRUCTIONS_ID) is None:
            self.agent.live_chat_ctx.items.insert(0, ChatMessage(
                role="system", content=[self.instructions_text()], id=INSTRUCTIONS_ID,
                created_at=0.0))
        if self.realtime is not None:
            self.realtime.agent_changed("chat_ctx")

    def _record_config_change(self, update: AgentConfigUpdate) -> None:
        self.commit_item(update)

    # -- committing ---------------------------------------------------------------------------
    def commit_item(self, item: ChatItem, handle: SpeechHandle | None = None) -> None:
        """Record ``item`` in the agent's context and in the conversation."""
        self.agent.live_chat_ctx.insert(item)
        self.session.conversation.commit(item, handle)

    def stop(self) -> None:
        """Leave ``run``: its nursery is cancelled and ``on_exit`` runs if it has not."""
        self._stop_scope.cancel()

    async def wait_stopped(self) -> None:
        """Wait until ``run`` has returned (``on_exit`` done).

        Cancellation: a checkpoint; the activity is not affected.
        """
        await self._stopped.wait()

    # -- creating speeches --------------------------------------------------------------------
    def _check_can_schedule(self, *, force: bool = False) -> None:
        if self._state is ActivityState.RUNNING or (force and self._state is
                                                     ActivityState.DRAINING):
            return
        raise RuntimeError(f"the activity of {self.agent.id!r} is {self._state.value}; "
                           "cannot schedule a new speech")

    def tools(self) -> list[Any]:
        """The session's tools, then the agent's, as the LLM gets them (toolsets unwrapped:
        the function tools, then the provider tools), and LiveKit's cancel tools when one of
        them is cancellable (``cancel_tools``)."""
        return with_cancel_tools(flatten_tools(self.tool_sources()))

    def tool_sources(self) -> list[Any]:
        """The session's tools, the agent's and its MCP servers', as given (toolsets whole)."""
        return [*self.session.tools, *self.agent.tools, *self._mcp_tools]

    def _mcp_servers(self) -> list[MCPServer]:
        """The agent's MCP servers if it gave any (even none), else the session's."""
        servers = self.agent.mcp_servers
        if isinstance(servers, NotGiven):
            servers = self.session.mcp_servers
        return servers or []

    def say(self, text: str | AsyncIterable[str], *, allow_interruptions: bool | None = None,
            add_to_chat_ctx: bool = True,
            audio: AsyncIterable[rtc.AudioFrame] | None = None) -> SpeechHandle:
        check_say_text(text)
        check_flag("allow_interruptions", allow_interruptions, allow_none=True)
        check_flag("add_to_chat_ctx", add_to_chat_ctx)
        self._check_can_schedule()
        realtime_say = (self.realtime is not None and self.realtime.capabilities.supports_say
                        and audio is None)
        if (self.session.output.active_audio is not None and self.tts is None and not realtime_say
                and audio is None):
            raise RuntimeError("say() needs a TTS (or a realtime model that supports say, or "
                               "audio=) when audio output is enabled")
        handle = SpeechHandle(allow_interruptions=self._allow(allow_interruptions), source="say")
        request = ReplyRequest(chat_ctx=ChatContext(), tools=[], say_text=text,
                               say_audio=audio, add_to_chat_ctx=add_to_chat_ctx)
        self.start_speech(handle, request)
        self.schedule(handle)
        return handle

    def generate_reply(self, *, user_message: ChatMessage | None = None,
                       chat_ctx: ChatContext | None = None,
                       instructions: str | Instructions | None = None,
                       tool_choice: ToolChoice | None = None,
                       allow_interruptions: bool | None = None,
                       schedule: bool = True,
                       input_modality: InputModality = "text") -> SpeechHandle:
        check_chat_ctx(chat_ctx)
        check_instructions(instructions, allow_none=True)
        check_tool_choice(tool_choice)
        check_flag("allow_interruptions", allow_interruptions, allow_none=True)
        self._check_can_schedule()
        if self.llm is None:
            raise RuntimeError("generate_reply() needs an LLM")
        inline = current_inline.get()
        if tool_choice is None and inline is not None and inline.function_call is not None:
            tool_choice = "none"
        ctx = (chat_ctx if chat_ctx is not None else self.agent.live_chat_ctx).copy()
        if user_message is not None:
            ctx.insert(user_message)
        handle = SpeechHandle(allow_interruptions=self._allow(allow_interruptions),
                              input_details=InputDetails(modality=input_modality))
        if user_message is not None:
            self._pending_user_messages[handle] = user_message
        # replies asked for inside this agent's on_enter (and their tool replies, which keep
        # the request's tools) do not see IGNORE_ON_ENTER tools
        in_on_enter = (inline is not None and inline.hook == "on_enter"
                       and inline.activity is self)
        # as given (toolsets whole): each step flattens them again, so a toolset's tools may
        # change between the steps of one reply (LiveKit's tool search loads tools that way)
        tools = ([t for t in self.tools() if not (isinstance(t, FunctionTool)
                                                  and t.flags & ToolFlag.IGNORE_ON_ENTER)]
                 if in_on_enter else self.tool_sources())
        request = ReplyRequest(chat_ctx=ctx, tools=tools, tool_choice=tool_choice,
                               instructions=(None if instructions is None else
                                             render_instructions(instructions, input_modality)),
                               modality=input_modality, in_on_enter=in_on_enter,
                               sync_chat_ctx=self.realtime is not None,
                               user_metrics=None if user_message is None
                               else user_message.metrics)
        self.start_speech(handle, request)
        if schedule:
            self.schedule(handle)
        return handle

    def _allow(self, allow: bool | None) -> bool:
        return self.allow_interruptions if allow is None else allow

    def start_speech(self, handle: SpeechHandle, request: ReplyRequest, *,
                      user_initiated: bool = True) -> None:
        assert self._nursery is not None
        self._speeches.add(handle)
        self.session.conversation.speech_created(handle, user_initiated=user_initiated)
        self._nursery.start_soon(self._speech_task, handle, request)

    def schedule(self, handle: SpeechHandle, *, force: bool = False) -> None:
        self._check_can_schedule(force=force)
        handle.mark_scheduled()
        user_message = self._pending_user_messages.pop(handle, None)
        if user_message is not None:
            self.commit_item(user_message)
        self._queue.put_nowait(handle, handle.priority)
        self.agent_state.on_scheduled(handle)

    # -- the scheduler and speeches -----------------------------------------------------------
    async def _scheduler(self) -> None:
        while await self._schedule_next():
            pass

    async def _schedule_next(self) -> bool:
        """Take the next speech, authorize it once scheduling is open and wait until its
        generation ends; False once the queue is closed. One call per speech: the scheduler
        keeps no reference to a finished speech while it waits for the next one."""
        try:
            handle = await self._queue.get()
        except trio.ClosedResourceError:
            return False
        if handle.done():
            return True
        # pause() replaces the event: wait on the current one until it is set, and
        # authorize with no checkpoint after the last look
        while not self.scheduling_open.is_set():
            await self.scheduling_open.wait()
        if handle.done():
            return True
        self._current_speech = handle
        handle.authorize()
        await handle.wait_for_generation()
        self._current_speech = None
        self._note_progress()
        if self.min_consecutive_speech_delay > 0:
            await trio.sleep(self.min_consecutive_speech_delay)
        return True

    async def _speech_task(self, handle: SpeechHandle, request: ReplyRequest | None) -> None:
        try:
            while request is not None:
                request = await self._reply_step(handle, request)
        except trio.Cancelled:
            # the close cancels a speech it had not interrupted (one of an agent already
            # draining, as on a handoff): it did not play out, so it ends interrupted, as
            # every speech does that LiveKit's close interrupts
            handle.interrupt(force=True)
            raise
        except Exception as e:
            logger.exception("speech %s failed", handle.id)
            handle.set_error(e)
        except BaseExceptionGroup as group:
            # a failure beside a cancellation (an output that fails while the close cancels
            # the speech): recorded as the failure alone is; the cancellation goes on
            errors, cancelled = group.split(Exception)
            if errors is not None:
                logger.error("speech %s failed", handle.id, exc_info=errors)
                handle.set_error(single_leaf(errors))
            if cancelled is not None:
                handle.interrupt(force=True)  # as for the cancellation alone
                raise cancelled from None
        finally:
            self._speeches.discard(handle)
            self._tool_rounds.discard(handle)
            self._pending_user_messages.pop(handle, None)
            self.interruption.release(handle)
            handle.mark_done()
            self.agent_state.on_speech_finished()
            self._note_progress()

    async def _reply_step(self, handle: SpeechHandle, request: ReplyRequest
                          ) -> ReplyRequest | None:
        """One generation step and its tools; returns the tool reply's request, if any.

        Cancellation (the session closes): the played part of the reply is committed as
        interrupted, and every tool call of the step is answered — by its result if it has
        one, else by an error output saying the close cancelled it — before the cancellation
        propagates.
        """
        step = StepState(handle.step_message_id)
        realtime = self.realtime is not None and (
            request.say_text is None or (self.realtime.capabilities.supports_say
                                         and request.say_audio is None))
        generation_type = RealtimeGeneration if realtime else Generation
        try:
            async with trio.open_nursery() as tool_nursery:
                with handle.step_scope:
                    try:
                        await generation_type(self, handle, request, step).run(tool_nursery)
                    except BaseException:
                        self._finish_generation(handle, request, step, cut_short=True)
                        raise
                    self._finish_generation(handle, request, step,
                                            cut_short=step.error is not None)
        except BaseException:
            self._finish_tools(handle, request, step, may_reply=False)
            raise
        next_request = self._finish_tools(handle, request, step, may_reply=True)
        if realtime and step.calls:
            assert self.realtime is not None
            # the outputs go to the session in any case (marked now); an interruption (a
            # barge-in, the close) ends only the wait for them: the reply that would follow
            # is cut (else a session reconnecting holds the scheduler, and the close's
            # goodbye, until it is live)
            self.realtime.agent_changed("chat_ctx")
            await handle.wait_if_not_interrupted([self.realtime.push_tool_outputs()])
        return next_request

    def _finish_generation(self, handle: SpeechHandle, request: ReplyRequest,
                           step: StepState, *, cut_short: bool) -> None:
        """Commit what was played (``cut_short``: interrupted, failed or closed first)."""
        if step.error is not None:
            handle.set_error(step.error)
        text = step.played_text.strip()
        if text and request.add_to_chat_ctx:
            msg = ChatMessage(role="assistant", content=[text],
                              interrupted=handle.interrupted or cut_short,
                              id=step.message_id,
                              metrics=assistant_message_metrics(
                                  step, request, llm=self.llm, tts=self.tts,
                                  now=trio.current_time()),
                              created_at=(trio.current_time() if step.authorized_at is None
                                          else step.authorized_at))
            self.commit_item(msg, handle)
            step.said = msg
        self.interruption.release(handle)
        handle.mark_generation_done()
        self.agent_state.on_generation_finished(
            handle, tools_busy=bool(step.calls) and not handle.interrupted)

    def reply_pending(self, *, exclude: SpeechHandle | None = None) -> bool:
        """A scheduled generate_reply that has not finished its generation yet."""
        return any(h is not exclude and h.source != "say" and not h.done() for h in self._queue)

    @property
    def speech_scheduled(self) -> bool:
        """A speech of this activity is scheduled and not done."""
        return any(h.scheduled for h in self._speeches)

    # -- tools --------------------------------------------------------------------------------
    def dispatch_tool(self, handle: SpeechHandle, call: FunctionCall, step: StepState,
                      tools: list[FunctionTool], tool_nursery: trio.Nursery) -> None:
        """Start one function call of ``step`` in the step's tool nursery; it counts as
        running from now."""
        step.calls.append(call)
        self._tool_rounds.add(handle)
        # running from dispatch: no gap between a step's generation ending and its tools
        # starting in which the agent looks idle
        self.session.running_tools.add(call, owner=self)
        self._unanswered[handle] = self._unanswered.get(handle, 0) + 1
        by_name = {t.name: t for t in tools if isinstance(t, FunctionTool)}
        scoped = call.name in self._session_scoped
        calls = session_scope(self.session).tool_calls if scoped else self.tool_calls
        options = self._call_options(call.name)
        # judged now, in the order the LLM made the calls (on_duplicate)
        admission = calls.admit(by_name.get(call.name), call, options,
                                interruptible=lambda: handle.allow_interruptions)
        tool_nursery.start_soon(self._run_tool, handle, call, step, by_name, admission,
                                scoped, options)

    def _call_options(self, name: str) -> AsyncToolOptions:
        """The templates of tool ``name``: its AsyncToolset's, else for a session-scoped
        tool the session's, else this agent's (``tool_options``)."""
        toolset = self._session_scoped.get(name) or self._agent_async.get(name)
        if toolset is not None and toolset.async_tool_options is not None:
            return resolve_async_tool_options(toolset.async_tool_options)
        if name in self._session_scoped:
            return self.session.async_tool_options
        return self.tool_options

    async def _run_tool(self, handle: SpeechHandle, call: FunctionCall, step: StepState,
                        tools: dict[str, FunctionTool], admission: Admission, scoped: bool,
                        options: AsyncToolOptions) -> None:
        """Wait for the call's first answer (see ``background_tools``): the call itself runs
        in the activity's nursery (the session's scope for a session-scoped AsyncToolset),
        so one answered by an update outlives the step."""
        call.created_at = trio.current_time()
        self.session.conversation.refresh()
        self.preemptive.discard()
        scope = InlineScope(activity=self, speech_handle=handle, function_call=call)
        self.session.conversation.record_run_item(call, handle)
        tool = tools.get(call.name)
        def on_answer() -> None:
            self._unanswered[handle] -= 1
            if not self._unanswered[handle]:
                del self._unanswered[handle]
            self._note_progress()

        session_scoped = session_scope(self.session) if scoped else None
        background = session_scoped.background if session_scoped else self.background
        run = background.run(call, scope=admission.scope, speech=handle, on_answer=on_answer,
                             options=options, cancellable=(
            tool is not None and bool(tool.flags & ToolFlag.CANCELLABLE)))
        assert self._nursery is not None
        start_soon = session_scoped.start_soon if session_scoped else self._nursery.start_soon
        start_soon(self._execute_tool, handle, call, tools, admission, run, scope)
        try:
            await run.answered.wait()
        finally:
            if not run.answered.is_set():
                # the step is cancelled (the session closes): so is its call, which answers
                # before the step ends, as a child of the step would (a tool shielding itself
                # holds the step, and the close reports it)
                run.scope.cancel()
                with trio.CancelScope(shield=True):
                    await run.answered.wait()
            step.outcomes[call.call_id] = (run.answer if run.answer is not None
                                           else cancelled_outcome(
                                               call, closing=self.session.closing))
            step.gained.extend(scope.gained)
            self.session.running_tools.discard(call)
            self._note_progress()
            self.session.conversation.refresh()  # the away window restarts in full after a tool

    async def _execute_tool(self, handle: SpeechHandle, call: FunctionCall,
                            tools: dict[str, FunctionTool], admission: Admission, run: ToolRun,
                            scope: InlineScope) -> None:
        token = current_inline.set(scope)
        started = False

        def on_start() -> None:
            nonlocal started
            started = True
            self.emit_tool_update(call_started(call))

        outcome = None
        try:
            outcome = await execute_admitted(
                call, tools, admission, on_start=on_start,
                make_context=lambda c: RunContext(session=self.session, speech_handle=handle,
                                                  function_call=c, progress=run),
                is_agent=_is_agent, mock=find_mock(self.session, self.agent, call.name))
        finally:
            admission.release()
            cancelled = outcome is None or admission.cancelled
            if run.updated and outcome is not None and not cancelled:
                run.finish(outcome)
            run.settle(outcome)
            if started:
                self.emit_tool_update(call_ended(
                    call, None if cancelled else outcome,
                    entry_id=f"{call.call_id}_final" if run.updated else None))
            current_inline.reset(token)
            run.end()
            if run.updated:
                self.session.conversation.refresh()

    # -- background tools (BackgroundHost) ----------------------------------------------------
    @property
    def accepts_tool_replies(self) -> bool:
        return self._state is ActivityState.RUNNING and not self.session.closing

    def emit_tool_update(self, event: ToolExecutionUpdatedEvent) -> None:
        self.session.conversation.emit("tool_execution_updated", event)

    def last_item_id(self) -> str | None:
        items = self.agent.live_chat_ctx.items
        return items[-1].id if items else None

    @property
    def floor(self) -> Floor:
        return self.session.floor

    @property
    def floor_free(self) -> bool:
        """No speech of this agent is queued, generating, or about to reply to its tools
        (running tools do not count, as in LiveKit: a speech waiting for calls not answered
        yet holds no floor)."""
        return not any(h.scheduled and not h.done()
                       and not (h.generation_done and h in self._unanswered)
                       for h in self._speeches)

    async def wait_for_floor(self) -> None:
        """Wait until this agent is idle (the user is not speaking and no end of turn is being
        decided or handled, no speech is queued or generating) and no one else holds the
        floor.

        Cancellation: a checkpoint only.

        Raises:
            SessionClosedError: the session closes, or this agent stops running.
        """
        conversation = self.session.conversation
        while True:
            if not self.accepts_tool_replies:
                raise SessionClosedError("the agent is no longer running")
            recognition = self.session.recognition
            if recognition is not None:
                await recognition.wait_user_idle()
            await self.wait_turns_handled()
            await conversation.wait_until(lambda: not self.accepts_tool_replies or (
                self.floor_free and not self.floor.held_by_other))
            if (self.accepts_tool_replies and self.floor_free and not self.floor.held_by_other
                    and not self.turns.handling
                    and (recognition is None or not (recognition.user_speaking
                                                     or recognition.end_of_turn_pending))):
                return

    async def wait_for_current_floor(self) -> Activity:
        """Wait until the session's current agent (this one, the agent it handed off to, or
        the AgentTask it awaits) is idle and no one else holds the floor; return its activity.
        Follows handoffs, as LiveKit's ``session.wait_for_idle()``; as there, running tools do
        not count (see ``floor_free``).

        Cancellation: a checkpoint only.

        Raises:
            SessionClosedError: the session closes.
        """
        session = self.session
        while True:
            current = session.activity
            if not isinstance(current, Activity) or session.closing:
                raise SessionClosedError("the session is closing")
            try:
                await current.wait_for_floor()
            except SessionClosedError:
                # that agent left: follow the next one once the session points at it
                await session.conversation.wait_until(
                    lambda: session.closing or session.activity is not current)
                continue
            if session.activity is current:
                return current

    def say_filler(self, text: str) -> SpeechHandle:
        """Say a filler through the session's current agent (see ``wait_for_current_floor``)."""
        current = self.session.activity
        target = current if isinstance(current, Activity) else self
        token = current_inline.set(None)  # the agent's speech, not the tool's
        try:
            return target.say(text)
        finally:
            current_inline.reset(token)

    def on_state_events(self, filler: Filler, *, listen: bool) -> None:
        filler.follow_states(self.session.conversation.events, listen=listen)

    def hold_run(self) -> RunHold:
        return self.session.conversation.hold_run()

    def background_reply(self, instructions: str, tool_choice: ToolChoice | None
                         ) -> SpeechHandle:
        token = current_inline.set(None)  # a reply of the agent, not of the tool
        try:
            return self.generate_reply(instructions=instructions, tool_choice=tool_choice)
        finally:
            current_inline.reset(token)

    def _finish_tools(self, handle: SpeechHandle, request: ReplyRequest, step: StepState, *,
                      may_reply: bool) -> ReplyRequest | None:
        """Commit the step's calls and outputs, emit ``function_tools_executed``, hand off,
        and return the tool reply's request when one is due (never when ``may_reply`` is
        False: the session closes)."""
        if not step.calls:
            return None
        # committed below, the handoff asked for with them: no checkpoint until then, so
        # nothing sees the agent settled before the handoff blocks its turns
        self._tool_rounds.discard(handle)
        self._note_progress()
        interrupted = handle.interrupted or not may_reply
        outcomes = [step.outcomes.get(c.call_id) for c in step.calls]
        outputs: list[FunctionCallOutput | None] = []
        agents: list[Agent] = []
        for call, outcome in zip(step.calls, outcomes):
            if outcome is None:
                outputs.append(None)
                continue
            output: FunctionCallOutput = outcome.output
            if outcome.agent is not None:
                if interrupted:
                    output = FunctionCallOutput(call_id=call.call_id, name=call.name,
                                                output=_HANDOFF_INTERRUPTED, is_error=True,
                                                created_at=output.created_at)
                else:
                    agents.append(outcome.agent)
            if interrupted:  # an interrupted turn answers no tool output
                output.reply_required = False
            outputs.append(output)
        ev = FunctionToolsExecutedEvent(function_calls=list(step.calls),
                                        function_call_outputs=outputs,
                                        has_agent_handoff=len(agents) == 1)
        self.session.conversation.emit("function_tools_executed", ev)
        for call, call_output in zip(step.calls, outputs):
            self.commit_item(call, handle)
            if call_output is not None:
                self.commit_item(call_output, handle)
        if ev.has_agent_handoff:
            self.session.update_agent(agents[0])
        elif len(agents) > 1:
            logger.error("a step returned more than one agent; no handoff")
        if not ev.has_tool_reply or self.session.closing:
            return None
        chat_ctx = (self.agent.live_chat_ctx.copy() if self.realtime is not None
                    else self._tool_reply_context(request, step, outputs))
        if self.realtime is not None and (
                self.realtime.capabilities.auto_tool_reply_generation or ev.has_agent_handoff):
            return None  # the server answers itself, or the session is handed over
        steps_before = handle.num_steps
        tool_choice = request.tool_choice
        if (steps_before >= self.session.max_tool_steps + 1 or self._state is not
                ActivityState.RUNNING or tool_choice == "none" or ev.has_agent_handoff):
            tool_choice = "none"
        else:
            # a reply to progress reports calls no tool (see background_tools)
            requested = {"none" if call.extra.get(NON_BLOCKING) else None
                         for call, out in zip(step.calls, outputs)
                         if out is not None and out.reply_required}
            if requested == {"none"}:
                tool_choice = "none"
            elif tool_choice is None or tool_choice == "required":
                tool_choice = "auto"
        handle.next_step()
        self.schedule(handle, force=True)
        return ReplyRequest(chat_ctx=chat_ctx, tools=request.tools,
                            tool_choice=tool_choice, in_on_enter=request.in_on_enter)

    def _tool_reply_context(self, request: ReplyRequest, step: StepState,
                            outputs: list[FunctionCallOutput | None]) -> ChatContext:
        """The context a tool reply answers from: the turn's own context plus what its step
        produced (the reply played, the calls and outputs, what AgentTasks awaited by its tools
        said), with the agent's current instructions.

        Note: not the agent's live context. A user input that arrived meanwhile is in there
        already (committed when its own reply was scheduled); a tool reply runs on the earlier
        turn's speech and must not answer it — its own reply will, exactly once.
        """
        ctx = request.chat_ctx.copy()
        produced: list[ChatItem] = [step.said] if step.said is not None else []
        produced += [*step.calls, *(o for o in outputs if o is not None), *step.gained]
        ctx.merge(ChatContext(produced), exclude_function_calls=False)
        idx = ctx.index_by_id(INSTRUCTIONS_ID)
        if idx is not None:
            ctx.items[idx] = ChatMessage(role="system",
                                         content=[self.instructions_text(request.modality)],
                                         id=INSTRUCTIONS_ID, created_at=0.0)
        return ctx

    # -- metrics helpers used by Generation ---------------------------------------------------
    def llm_metrics(self, handle: SpeechHandle, *, ttft: float, duration: float,
                    usage: CompletionUsage | None = None, request_id: str = "") -> LLMMetrics:
        return llm_step_metrics(self.llm, handle, ttft=ttft, duration=duration, usage=usage,
                                request_id=request_id)

    def tts_metrics(self, handle: SpeechHandle, *, ttfb: float, duration: float,
                    audio_duration: float, characters: int) -> TTSMetrics:
        return TTSMetrics(speech_id=handle.id, ttfb=ttfb, duration=duration,
                          audio_duration=audio_duration, characters_count=characters,
                          cancelled=handle.interrupted, label=model_label(self.tts),
                          metadata=model_metadata(self.tts))

    def report_model_error(self, handle: SpeechHandle, error: BaseException, *,
                           source: object) -> None:
        handle.set_error(error)
        self.session.conversation.report_error(error, source)

    def forward_transcription_nowait(self, text: str, *, final: bool = True) -> None:
        self.session.conversation.send_transcription(
            text, enabled=self.session.output.active_transcription is not None, final=final)

    def on_text_playback_started(self, handle: SpeechHandle) -> None:
        self.agent_state.on_playback_started(handle)

    def on_playback_started(self) -> None:
        self.agent_state.on_playback_started()

    # -- user turns ---------------------------------------------------------------------------
    def on_end_of_turn(self, info: EndOfTurnInfo) -> bool:
        """Decide a completed user turn (called by the session's recognition)."""
        return self.turns.on_end_of_turn(info)

    def on_models_updated(self, *, llm: LLM | RealtimeModel | None | NotGiven,
                          tts: TTS | None | NotGiven,
                          stt: STT | None | NotGiven = NOT_GIVEN) -> None:
        """The agent swapped its LLM, TTS or STT: the next steps use them, and the session's
        keyterms go to the new STT. A realtime model is not swapped in or out (its session
        belongs to the activity)."""
        if not isinstance(llm, NotGiven):
            if is_realtime_model(llm) or is_realtime_model(self.llm):
                raise RuntimeError("a realtime model cannot be swapped in or out of a running "
                                   "agent; use session.update_agent() with a new agent")
            self.llm = llm
        if not isinstance(tts, NotGiven):
            self.tts = tts
        if not isinstance(stt, NotGiven):
            self.stt = stt
            self.session.stt_context.swap_stt(stt)

    async def wait_turns_handled(self) -> None:
        """Wait until the user turns this agent accepted are handled.

        Cancellation: a checkpoint only.
        """
        await self.turns.wait_handled()

    def on_user_turn_exceeded(self, ev: UserTurnExceededEvent) -> None:
        """The user talked past ``user_turn_limit``: the agent's hook runs once idle."""
        self._turn_limit.report(ev, self._nursery)

    # -- routed from recognition ---------------------------------------------------------
    def on_final_transcript(self, transcript: str) -> None:
        self.interruption.on_final_transcript()
        self.preemptive.start()

    @property
    def accepts_turns(self) -> bool:
        return self._state is ActivityState.RUNNING

    @property
    def takes_new_turns(self) -> bool:
        """A new user turn would be answered here: running, no handoff requested and not
        draining (its turns are blocked), not paused for an AgentTask."""
        return self.accepts_turns and self.turns.open and not self.scheduling_paused

    @property
    def tools_running(self) -> bool:
        return self.session.running_tools.owned_by(self)

    @property
    def background_running(self) -> bool:
        """A call answered by an update still runs (it holds the user-away timer off)."""
        return len(self.background) > 0

    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools() if isinstance(t, FunctionTool)]

    def interrupt_background_speeches(self) -> None:
        """Interrupt the speeches waiting for their tools (a new user turn is answered)."""
        for h in list(self._speeches):
            if (h is not self.current_speech and h.scheduled and not h.done()
                    and h.generation_done and h.allow_interruptions):
                h.interrupt()

    def interrupt(self, *, force: bool = False) -> list[SpeechHandle]:
        """Interrupt the background, current and queued speeches (§4.6)."""
        self.preemptive.discard()
        current = self.current_speech
        if current is not None and not current.allow_interruptions and not force:
            raise RuntimeError("the current speech does not allow interruptions")
        interrupted: list[SpeechHandle] = []
        for h in list(self._speeches):
            # a forced interruption (the close's) takes every background speech, also one
            # still generating (e.g. a paused agent's tool reply while an AgentTask ran), as
            # LiveKit's does; an unforced one leaves those to finish their step
            if h is not current and (h.generation_done or force) and (
                    h.allow_interruptions or force):
                interrupted.append(h.interrupt(force=force))
        if current is not None:
            interrupted.append(current.interrupt(force=force))
        for h in list(self._queue):
            if h.done() or h.interrupted:
                continue
            if not h.allow_interruptions and not force:
                logger.warning("stopped interrupting at a speech that does not allow it")
                break
            interrupted.append(h.interrupt(force=force))
        return interrupted


def _is_agent(value: object) -> bool:
    return isinstance(value, Agent)
