"""Background tools: calls that reported progress (``RunContext.update``) and went on running.

Every dispatched call is a :class:`ToolRun`. The call's *step* waits only for the run's first
answer: its outcome, or its first update (whose message then answers the call). A call answered
by an update keeps running in the activity's nursery (not the step's): interrupting a speech
does not cancel it, a handoff cancels it if it is ``CANCELLABLE`` and waits for it otherwise,
and the session closing cancels it. What it reports afterwards (later updates, its final value)
is committed as calls and outputs of their own (``{call_id}_update_N``, ``{call_id}_final``),
each answered at once, so every call in the history is answered exactly once; the ones that
ask for a reply are voiced together by one deferred reply once the agent is idle.

As in LiveKit, a deferred reply asked for while a ``session.run()`` is active keeps that run
open (a ``RunHold``) until the reply's speech exists (the run then watches the speech itself),
except while the agent is paused for an AgentTask: the task may need a run of its own to
return, so the hold is let go then and taken again, on the run active then, at the resume.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal, Protocol

import msgspec
import trio

from ._errors import SessionClosedError
from .chat import ChatItem, FunctionCall, FunctionCallOutput, new_item_id
from .events import ToolCallUpdated, ToolExecutionUpdatedEvent, ToolReplyUpdated
from .models import ToolChoice
from .nurseries import Wakeup
from .run_result import RunHold
from .speech_handle import SpeechHandle
from .fillers import Filler, FillerSource, filler_running
from .floor import Floor
from .tool_handling import (REPLY_AT_TAIL, REPLY_MAYBE_COVERED, UPDATE_TEMPLATE,
                            AsyncToolOptions, Template, render_template)
from .tools import ToolOutcome, outcome_from_value, tool_error_outcome

__all__ = ["BackgroundTools", "NON_BLOCKING", "REPLY_AT_TAIL", "REPLY_MAYBE_COVERED",
           "ToolRun", "UPDATE_TEMPLATE"]

logger = logging.getLogger("agents_trio")

#: set in ``FunctionCall.extra`` of a call answered by its first update (LiveKit's key)
NON_BLOCKING = "__livekit_agents_tool_non_blocking"

HANDOFF_AFTER_UPDATE = "the agent handoff did not happen"


class BackgroundHost(Protocol):
    """What background tools need from the activity that runs them."""

    @property
    def accepts_tool_replies(self) -> bool: ...

    @property
    def tool_options(self) -> AsyncToolOptions: ...

    @property
    def scheduling_paused(self) -> bool:
        """The agent is paused for an AgentTask it awaits."""
        ...

    async def wait_resumed(self) -> None:
        """Wait until the agent is not paused for an AgentTask.

        Cancellation: a checkpoint only.
        """
        ...

    def commit_item(self, item: ChatItem, handle: SpeechHandle | None = None) -> None: ...

    def emit_tool_update(self, event: ToolExecutionUpdatedEvent) -> None: ...

    def last_item_id(self) -> str | None: ...

    async def wait_for_floor(self) -> None:
        """Wait until this agent is idle and no one else holds the floor.

        Cancellation: a checkpoint only.

        Raises:
            SessionClosedError: the session closes, or the agent stops running.
        """
        ...

    @property
    def floor(self) -> Floor: ...

    def say_filler(self, text: str) -> SpeechHandle:
        """Say ``text`` through the session's current agent."""
        ...

    async def wait_for_current_floor(self) -> object:
        """Wait until the session's current agent is idle and no one else holds the floor;
        return that agent's activity (follows handoffs and AgentTasks).

        Cancellation: a checkpoint only.

        Raises:
            SessionClosedError: the session closes.
        """
        ...

    def hold_run(self) -> RunHold:
        """A hold on the active ``session.run()`` (of nothing when none is active)."""
        ...

    def on_state_events(self, filler: Filler, *, listen: bool) -> None: ...

    def background_reply(self, instructions: str, tool_choice: ToolChoice | None
                         ) -> SpeechHandle: ...


class ToolRun:
    """One dispatched call, from start to end (it is the call's ``RunContext`` progress)."""

    def __init__(self, call: FunctionCall, tools: BackgroundTools, *, cancellable: bool,
                 scope: trio.CancelScope, speech: SpeechHandle,
                 on_answer: Callable[[], None], options: AsyncToolOptions) -> None:
        self.call = call
        self.options = options  # the templates of the call's tool (``tool_handling``)
        self._on_answer = on_answer
        self.speech = speech  # the speech whose step made the call
        self.cancellable = cancellable
        self.scope = scope  # the scope the tool runs in
        self.answered = trio.Event()
        self.answer: ToolOutcome | None = None  # None: cancelled before answering
        self.updated = False  # answered by an update: the rest runs in the background
        self.ended = trio.Event()
        self._tools = tools

    @property
    def update_template(self) -> Template:
        return self.options["update_template"]

    def settle(self, outcome: ToolOutcome | None) -> None:
        """The call's first answer (later ones are ignored)."""
        if not self.answered.is_set():
            self.answer = outcome
            self.answered.set()
            self._on_answer()

    def update(self, *, entry_id: str, message: str, output: object, silent: bool) -> None:
        self._tools.host.emit_tool_update(ToolExecutionUpdatedEvent(update=ToolCallUpdated(
            id=entry_id, call_id=self.call.call_id, message=message, silent=silent)))
        outcome = outcome_from_value(self.call, output)
        outcome.output.reply_required = not silent
        if not self.answered.is_set():
            self.call.extra[NON_BLOCKING] = True
            self.updated = True
            self._tools.started(self)
            self.settle(outcome)
            return
        # a report is not a result: the reply to it may call no tool
        self._tools.report(self.call, entry_id, outcome, tool_choice="none",
                           options=self.options)

    def finish(self, outcome: ToolOutcome) -> None:
        """The tool returned after answering with an update: report its value."""
        if outcome.agent is not None:
            logger.error("tool %r returned an Agent after ctx.update(); no handoff",
                         self.call.name)
            outcome = tool_error_outcome(self.call, HANDOFF_AFTER_UPDATE)
        self._tools.report(self.call, f"{self.call.call_id}_final", outcome, tool_choice=None,
                           options=self.options)

    def end(self) -> None:
        self.ended.set()
        self._tools.ended(self)

    @asynccontextmanager
    async def foreground(self) -> AsyncIterator[Any]:
        """See ``RunContext.foreground``.

        Cancellation: cancelling the wait or the body releases the floor.
        """
        host = self._tools.host
        await self._tools.wait_delivered()
        while True:
            activity = await host.wait_for_current_floor()
            if not host.floor.held_by_other:  # no checkpoint between the check and the hold
                break
        async with host.floor.hold():
            yield activity

    @asynccontextmanager
    async def filler(self, source: FillerSource, *, delay: float, interval: float | None,
                     max_steps: int | None) -> AsyncIterator[Filler]:
        """See ``RunContext.with_filler``.

        Cancellation: the filler stops with the body.
        """
        host = self._tools.host
        filler = Filler(source, delay=delay, interval=interval, max_steps=max_steps,
                        say=host.say_filler, wait_idle=host.wait_for_current_floor)
        host.on_state_events(filler, listen=True)
        try:
            async with filler_running(filler, self.speech) as running:
                yield running
        finally:
            host.on_state_events(filler, listen=False)


def _reply_tool_choice(requests: list[ToolChoice | None]) -> ToolChoice | None:
    """One reply answering several outputs honours their request if they share it."""
    distinct: list[ToolChoice | None] = []
    for request in requests:
        if request not in distinct:
            distinct.append(request)
    return distinct[0] if len(distinct) == 1 else None


class BackgroundTools:
    """The background calls of one activity and their deferred replies."""

    def __init__(self, host: BackgroundHost) -> None:
        self.host = host
        self._running: set[ToolRun] = set()
        self._changed = Wakeup()
        self._pending: list[tuple[list[ChatItem], ToolChoice | None]] = []
        self._reply_options: AsyncToolOptions | None = None  # the latest report's templates
        self._delivering = False
        self._run_hold = RunHold()  # the active run waits for the deferred reply
        self._nursery: trio.Nursery | None = None

    def bind(self, nursery: trio.Nursery | None) -> None:
        """Deferred replies wait for the agent to be idle in ``nursery`` (the activity's);
        None: the nursery closed, no reply is asked for any more."""
        self._nursery = nursery

    def run(self, call: FunctionCall, *, cancellable: bool, scope: trio.CancelScope,
            speech: SpeechHandle, on_answer: Callable[[], None],
            options: AsyncToolOptions | None = None) -> ToolRun:
        """A run of ``call``; ``on_answer`` is called once, when it is first answered;
        ``options``: its tool's templates (default: the host's)."""
        return ToolRun(call, self, cancellable=cancellable, scope=scope, speech=speech,
                       on_answer=on_answer,
                       options=options if options is not None else self.host.tool_options)

    async def wait_delivered(self) -> None:
        """Wait until the deferred reply being prepared (if any) has been asked for.

        Cancellation: a checkpoint only.
        """
        await trio.lowlevel.checkpoint()
        while self._delivering:
            await self._changed.wait()

    def paused(self) -> None:
        """The agent is paused for an AgentTask: the run stops waiting for the reply."""
        self._run_hold.release()

    def resumed(self) -> None:
        """The AgentTask returned: the run active now waits for the pending reply."""
        if self._delivering and self._run_hold.released:
            self._run_hold = self.host.hold_run()

    def started(self, run: ToolRun) -> None:
        self._running.add(run)

    def ended(self, run: ToolRun) -> None:
        self._running.discard(run)
        self._changed.notify()

    def __len__(self) -> int:
        return len(self._running)

    async def drain(self) -> None:
        """Cancel the cancellable background calls and wait for all of them to end.

        Cancellation: stops waiting; the calls go on until the activity's nursery ends.
        """
        for run in list(self._running):
            if run.cancellable:
                run.scope.cancel()
        while self._running:
            await self._changed.wait()

    def report(self, call: FunctionCall, entry_id: str, outcome: ToolOutcome, *,
               tool_choice: ToolChoice | None, options: AsyncToolOptions | None = None) -> None:
        """Commit a background report as a call and its output; a report asking for a reply
        joins the next deferred reply."""
        entry = FunctionCall(call_id=entry_id, name=call.name, arguments=call.arguments,
                             extra=dict(call.extra), group_id=None)
        output: FunctionCallOutput = msgspec.structs.replace(
            outcome.output, call_id=entry_id, id=new_item_id())
        self.host.commit_item(entry)
        self.host.commit_item(output)
        if not output.reply_required:
            return
        self._pending.append(([entry, output], tool_choice))
        self._reply_options = options
        if not self._delivering and self._nursery is not None:
            self._delivering = True
            if not self.host.scheduling_paused:  # else taken at the resume
                self._run_hold = self.host.hold_run()
            self._nursery.start_soon(self._deliver)

    async def _deliver(self) -> None:
        try:
            asked = self._ask_for_reply(await self._wait_to_reply())
        finally:  # the run watches the reply's speech from here (the hold may be a new one)
            self._run_hold.release()
        if asked is not None:
            await self._follow_reply(*asked)

    async def _wait_to_reply(self) -> bool:
        """Wait until this agent may reply (False: it left, or the session closes).

        Cancellation: a checkpoint only.
        """
        try:
            while True:
                await self.host.wait_for_floor()
                if not self.host.scheduling_paused:
                    return True
                # idle because paused for an AgentTask: the reply waits for the resume
                await self.host.wait_resumed()
        except SessionClosedError:
            return False
        finally:
            self._delivering = False
            self._changed.notify()

    def _ask_for_reply(self, idle: bool) -> tuple[SpeechHandle, list[str]] | None:
        pending, self._pending = self._pending, []
        if not idle or not self.host.accepts_tool_replies:
            logger.debug("dropping a background tool reply: the agent left")
            return None
        items = [item for entry, _ in pending for item in entry]
        if not items:
            return None
        call_ids = [i.call_id for i in items if isinstance(i, FunctionCallOutput)]
        options = self._reply_options or self.host.tool_options
        template = options["reply_at_tail_template" if self.host.last_item_id() == items[-1].id
                           else "reply_maybe_covered_template"]
        handle = self.host.background_reply(
            render_template(template, {"call_ids": call_ids}),
            _reply_tool_choice([c for _, c in pending]))
        self._emit_reply(call_ids, "scheduled", handle)
        return handle, call_ids

    async def _follow_reply(self, handle: SpeechHandle, call_ids: list[str]) -> None:
        await handle
        status: Literal["completed", "interrupted", "skipped"] = (
            "interrupted" if handle.interrupted
            else "skipped" if not handle.chat_items else "completed")
        self._emit_reply(call_ids, status, handle)

    def _emit_reply(self, call_ids: list[str],
                    status: Literal["scheduled", "completed", "interrupted", "skipped"],
                    handle: SpeechHandle) -> None:
        self.host.emit_tool_update(ToolExecutionUpdatedEvent(update=ToolReplyUpdated(
            update_ids=list(call_ids), status=status, speech_id=handle.id)))
