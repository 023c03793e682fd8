"""AgentTask[T]: an agent awaited for a result, from a tool or from on_enter/on_exit.

``result = await GetEmail()`` runs the task's activity *inside the awaiting task's nursery*:
the parent activity pauses (its scheduler holds, nothing is closed), the session's current
activity points at the task, and user turns go to it. When the task completes, its activity
drains (``on_exit`` runs), its chat items merge into the parent's context, the parent resumes,
and the ``await`` returns the result (or raises the exception passed to ``complete``).

Because the task lives inside the tool that awaited it, closing the session unwinds tasks
innermost first (the session's ``inline_tasks`` stack), and each awaiter — a tool, ``on_enter``
or ``on_exit`` — gets ``ToolError("AgentTask … is cancelled")`` instead of hanging. A handoff
replaces the tasks holding the floor the same way, innermost first (``ToolError("… another
agent took over")``), and an agent that is leaving starts no new task but from its
``on_exit``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Generator
from typing import Any, Generic, TypeVar

import trio

from ._errors import ToolError
from .activity import Activity, InlineScope, current_inline
from .agent import NOT_GIVEN, Agent, NotGiven
from .instructions import Instructions
from .mcp import MCPServer
from .chat import AgentHandoff, ChatContext
from .hosts import ActivityHost
from .models import LLM, STT, TTS, VAD
from .realtime import RealtimeModel
from .run_result import RunHold
from .speech_args import check_flag
from .tool_handling import ToolHandlingOptions
from .tools import FunctionTool

T = TypeVar("T")

logger = logging.getLogger("agents_trio")


class _AwaitPhase(enum.Enum):
    NOT_AWAITED = "not_awaited"
    AWAITED = "awaited"


class AgentTask(Agent, Generic[T]):
    """An agent that produces a result of type ``T`` for whoever awaited it.

    Args:
        preserve_function_call_history: Merge the task's tool calls into the parent's
            context too (by default only messages are merged).
        id, chat_ctx, tools, stt, vad, llm, tts, turn_handling, tool_handling, allow_interruptions,
            min_consecutive_speech_delay: As for ``Agent``.
    """

    def __init__(self, *, instructions: str | Instructions, preserve_function_call_history: bool = False,
                 id: str | None = None, chat_ctx: ChatContext | None = None,
                 tools: list[FunctionTool] | None = None,
                 stt: STT | str | None | NotGiven = NOT_GIVEN,
                 vad: VAD | None | NotGiven = NOT_GIVEN,
                 llm: LLM | RealtimeModel | str | None | NotGiven = NOT_GIVEN,
                 tts: TTS | str | None | NotGiven = NOT_GIVEN,
                 turn_handling: dict[str, Any] | None = None,
                 tool_handling: ToolHandlingOptions | None = None,
                 allow_interruptions: bool | None = None,
                 min_consecutive_speech_delay: float | None = None,
                 turn_detection: object = NOT_GIVEN,
                 min_endpointing_delay: float | NotGiven = NOT_GIVEN,
                 max_endpointing_delay: float | NotGiven = NOT_GIVEN,
                 mcp_servers: list[MCPServer] | None | NotGiven = NOT_GIVEN) -> None:
        super().__init__(instructions=instructions, id=id, chat_ctx=chat_ctx, tools=tools,
                         stt=stt, vad=vad, llm=llm, tts=tts, turn_handling=turn_handling,
                         tool_handling=tool_handling,
                         allow_interruptions=allow_interruptions,
                         min_consecutive_speech_delay=min_consecutive_speech_delay,
                         turn_detection=turn_detection,
                         min_endpointing_delay=min_endpointing_delay,
                         max_endpointing_delay=max_endpointing_delay,
                         mcp_servers=mcp_servers)
        check_flag("preserve_function_call_history", preserve_function_call_history)
        self.preserve_function_call_history = preserve_function_call_history
        # awaiting and completing are independent: a task may be completed before it is
        # awaited (the await then runs it and returns the result, as in LiveKit)
        self._await_phase = _AwaitPhase.NOT_AWAITED
        self._completed = trio.Event()
        self._result: T | None = None
        self._exception: BaseException | None = None
        self._session: ActivityHost[Activity] | None = None  # while awaited
        # keeps the active run open across the return handoff (released once the parent
        # resumed): taken by complete(), released by the awaiter
        self._return_hold = RunHold()
        self._return_scope = trio.CancelScope()  # the wait for the task's activity to drain
        # the awaiter's wait for its parent to pause (for the speech playing to finish):
        # cancel() ends it, so a task cancelled before it started answers its awaiter at once
        self._pause_scope = trio.CancelScope()

    def done(self) -> bool:
        return self._completed.is_set()

    def complete(self, result: T | BaseException) -> None:
        """Finish the task with a result, or with an exception to raise in the awaiter.

        Raises:
            RuntimeError: the task was already completed.
        """
        if self.done():
            raise RuntimeError(f"AgentTask {self.id} is already completed")
        if isinstance(result, BaseException):
            self._exception = result
        else:
            self._result = result
        session = self._session if self._activity is not None else None
        run = session.conversation.active_run if session is not None else None
        if run is not None:
            self._return_hold = run.hold()
            if not isinstance(result, BaseException):
                run.set_final_output(result)
        self._completed.set()

    async def _finish_for_close(self) -> None:
        """The session closes (its unwinding of the inline tasks): once the task's activity
        runs, its speeches stop and its ``on_exit`` runs while it can still speak, as
        LiveKit's close drains a cancelled task; ``cancel()`` follows.

        Cancellation: the close bounds it (its grace); what is cut is interrupted.
        """
        if self._activity is not None:
            await self._activity.finish_for_close()

    def cancel(self) -> None:
        """Interrupt the task's speeches and complete it with a ``ToolError``."""
        if self._activity is not None:
            self._activity.interrupt(force=True)
        self._return_scope.cancel()
        self._pause_scope.cancel()
        if not self.done():
            self.complete(ToolError(f"AgentTask {self.id} is cancelled"))

    def __await__(self) -> Generator[Any, None, T]:
        return self._await_inline().__await__()

    async def _await_inline(self) -> T:
        scope = current_inline.get()
        if scope is None:
            raise RuntimeError("an AgentTask must be awaited inside a function tool, on_enter "
                               "or on_exit")
        if self._await_phase is _AwaitPhase.AWAITED:
            raise RuntimeError(f"AgentTask {self.id} was already awaited")
        self._await_phase = _AwaitPhase.AWAITED
        parent = scope.activity
        async with parent.inline_task_lock:
            handle = scope.speech_handle
            if handle is not None and handle.interrupted:
                raise RuntimeError("the speech that awaited the AgentTask was interrupted")
            if parent.session.closing:
                raise ToolError("the activity that awaited the inline task is closing")
            if parent.leaving and scope.hook != "on_exit":
                raise ToolError(f"AgentTask {self.id} not started: {parent.agent.id!r}, "
                                "which awaited it, is leaving")
            await self._run_inline(parent.session, parent, scope)
        if self._exception is not None:
            raise self._exception
        return self._result  # type: ignore[return-value]  # set with the phase: a T

    async def _run_inline(self, session: ActivityHost[Activity], parent: Activity,
                          scope: InlineScope) -> None:
        self._session = session
        handle = scope.speech_handle
        run = session.conversation.active_run
        hold = session.conversation.hold_run()
        if run is not None and handle is not None:
            run.unwatch(handle)  # the run may end while the task waits for the user
        # on the session's stack from here: a close cancels it (ToolError for the awaiter),
        # even while the parent is still pausing or the task's activity is still starting
        with session.inline_tasks.enter(self, self._finish_for_close, parent):
            with hold:
                with self._pause_scope:
                    await parent.pause()
                # cancel() (the close unwinding) answers the awaiter at once; a task completed
                # before it was awaited still runs (on_enter, on_exit), as in LiveKit
                if not self._pause_scope.cancel_called:
                    await self._run_child(session, parent, scope, hold)
            known = {item.id for item in parent.agent.live_chat_ctx.items}
            parent.agent.live_chat_ctx.merge(
                self.live_chat_ctx,
                exclude_function_calls=not self.preserve_function_call_history)
            scope.gained.extend(i for i in parent.agent.live_chat_ctx.items
                                if i.id not in known)
            if session.closing:
                pass  # the close cancels the parent next: nothing more may start there
            elif session.current_agent is parent.agent:
                parent.resume()
            else:
                # another agent took over while the task ran (update_agent): the parent does
                # not come back; the handoff drains it next (its on_exit says goodbye), and
                # the awaiter, told now, can start nothing more there
                logger.warning("the agent changed while %s ran; %s leaves instead of "
                               "resuming", self.id, parent.agent.id)
                parent.block_new_turns()
        run = session.conversation.active_run
        if run is not None and handle is not None:
            run.watch(handle)
        if run is not None and scope.hook == "on_enter":
            parent.watch_on_enter(run)  # the rest of on_enter belongs to the run again
        self._return_hold.release()

    async def _run_child(self, session: ActivityHost[Activity], parent: Activity,
                         scope: InlineScope, hold: RunHold) -> None:
        """Run the task's activity until the task completes; the session points at it
        meanwhile. Releases the run's ``hold`` once the task has the floor."""
        child = Activity(session, self)
        took_floor = False
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(child.run)
                if self._pause_scope.cancel_called:
                    # the close unwound the task while its activity started: it never
                    # enters (no on_enter, no on_exit), as LiveKit starts no activity then
                    child.stop()
                    return
                session.switch_current(child, AgentHandoff(
                    old_agent_id=parent.agent.id, new_agent_id=self.id),
                    old_agent=parent.agent)
                took_floor = True
                child.enter()  # the run now watches the task's on_enter instead
                if scope.hook == "on_enter":
                    # the parent's on_enter is blocked on the task: the child carries on
                    parent.enter_settled.set()
                    parent.unwatch_on_enter()
                    session.conversation.progressed()
                hold.release()
                nursery.start_soon(self._fail_if_replaced, child)
                await self._completed.wait()
                # cancel() (the close unwinding) stops waiting for a graceful drain, which a
                # tool of the task that never returns would hold up
                with self._return_scope:
                    if not session.closing:
                        await child.drain()
                    else:
                        # the close's unwinding takes the task (its goodbye, then cancel()):
                        # stopped before that, one that completed itself meanwhile (told
                        # its inner task was cancelled) would run on_exit unable to speak
                        await trio.sleep_forever()
                # drained (no-op), or closing / drain given up: cancel the task's speeches
                # and tools; its on_exit still runs
                child.stop()
        finally:
            hold.release()
            # the floor goes back to the parent unless a handoff takes it: update_agent()
            # names the next agent at once, and one named while the task ran replaces it.
            # The close drops the handoffs: the parent gets the floor back, for its goodbye
            if took_floor and session.activity is child and (
                    session.closing or session.current_agent is self):
                session.switch_current(parent)
                session.conversation.commit(
                    AgentHandoff(old_agent_id=self.id, new_agent_id=parent.agent.id),
                    old_agent=self, new_agent=parent.agent)

    async def _fail_if_replaced(self, child: Activity) -> None:
        """The task's activity ended without completing it: the awaiter gets an error
        instead of waiting for ever. Either the session's close stopped it (a drained
        shutdown ends the current activity before it unwinds the task chain; the close also
        drops a handoff that was replacing the task): then the task is cancelled, as
        LiveKit's close says. Or another agent took over (``update_agent`` names it at
        once)."""
        await child.wait_stopped()
        if self.done():
            return
        session = self._session
        if session is not None and (session.closing or session.current_agent is self):
            self.complete(ToolError(f"AgentTask {self.id} is cancelled"))
        else:
            self.complete(ToolError(f"AgentTask {self.id} ended: another agent took over"))
