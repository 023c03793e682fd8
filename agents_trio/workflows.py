"""TaskGroup: AgentTasks run in order, with a way back to an earlier one.

The group is itself an AgentTask. Its ``on_enter`` awaits each step's task in turn (the group's
activity pauses while a step runs, like any parent), merges the step's conversation into the
group's, and finally completes with the results by id. Once a step has been visited, later
steps get an ``out_of_scope`` tool: the LLM calls it when the user wants to change an earlier
answer, and the group re-runs the requested steps before coming back.
"""

from __future__ import annotations

import inspect

import logging
from collections.abc import Callable
from typing import Any

import msgspec

from ._errors import ToolError
from .agent_task import AgentTask
from .chat import ChatContext
from .chat_summary import summarize_chat_ctx
from .models import LLM
from .speech_args import check_callable, check_flag, check_str
from .tools import FunctionTool, ToolFlag, function_tool

logger = logging.getLogger("agents_trio")



class TaskCompletedEvent(msgspec.Struct, kw_only=True):
    task_id: str
    agent_task: Any
    result: Any


class TaskGroupResult(msgspec.Struct, kw_only=True):
    task_results: dict[str, Any]


class _OutOfScope(ToolError):
    def __init__(self, task_ids: list[str]) -> None:
        super().__init__(f"the user wants to go back to {', '.join(task_ids)}")
        self.task_ids = task_ids


class _Step(msgspec.Struct, kw_only=True):
    id: str
    factory: Callable[[], AgentTask[Any]]
    description: str


class TaskGroup(AgentTask[TaskGroupResult]):
    """Runs AgentTasks one after another and completes with their results by id.

    Args:
        summarize_chat_ctx: At the end, replace what was said in the group (and its tool
            calls) with one summary message made by the session LLM, as LiveKit does (see
            ``agents_trio.chat_summary``); a failing summary keeps the conversation.
        return_exceptions: Store a failing step's exception as its result instead of
            failing the whole group.
        chat_ctx: The conversation the steps start from.
        on_task_completed: Called after each step with a ``TaskCompletedEvent``; an async
            function is awaited before the next step starts (a plain function also works).
    """

    def __init__(self, *, summarize_chat_ctx: bool = True, return_exceptions: bool = False,
                 chat_ctx: ChatContext | None = None,
                 on_task_completed: Callable[[TaskCompletedEvent], Any] | None = None) -> None:
        check_flag("summarize_chat_ctx", summarize_chat_ctx)
        check_flag("return_exceptions", return_exceptions)
        check_callable("on_task_completed", on_task_completed, allow_none=True)
        super().__init__(instructions="*empty*", chat_ctx=chat_ctx)
        self._steps: list[_Step] = []
        self._summarize = summarize_chat_ctx
        self._return_exceptions = return_exceptions
        self._on_task_completed = on_task_completed

    def add(self, factory: Callable[[], AgentTask[Any]], *, id: str,
            description: str) -> TaskGroup:
        """Add a step: ``factory()`` builds its task when the step runs."""
        check_callable("task_factory", factory)
        check_str("id", id)
        check_str("description", description)
        if any(s.id == id for s in self._steps):
            raise ValueError(f"a step with id {id!r} already exists")
        self._steps.append(_Step(id=id, factory=factory, description=description))
        return self

    async def on_enter(self) -> None:
        """Run the group's tasks in order, then complete with their results.

        Cancellation: cancelling it (the session closes) cancels the task being awaited; the
        group does not complete.
        """
        results: dict[str, Any] = {}
        pending = [s.id for s in self._steps]
        visited: list[str] = []
        steps = {s.id: s for s in self._steps}
        while pending:
            step = steps[pending.pop(0)]
            try:
                task = self._build_step(step)
            except Exception as e:
                # a factory that fails (or builds no task) fails its step, as the task would:
                # the awaiter is answered instead of waiting for a step that never runs
                if not self._return_exceptions:
                    self.complete(e)
                    return
                results[step.id] = e
                continue
            # as update_chat_ctx does: calls of tools this step does not have are left out
            task.live_chat_ctx = self._chat_ctx.copy(exclude_instructions=True,
                                                     tools=task.tools)
            earlier = [i for i in visited if i != step.id]
            if earlier:
                back = self._out_of_scope_tool(task, earlier, steps)
                await task.update_tools([*task.tools, back])
            try:
                try:
                    results[step.id] = await task
                except _OutOfScope:
                    raise
                except Exception as e:
                    if not self._return_exceptions:
                        self.complete(e)
                        return
                    results[step.id] = e
                finally:
                    self._chat_ctx.merge(task.live_chat_ctx, exclude_function_calls=False)
                if step.id not in visited:
                    visited.append(step.id)
                if self._on_task_completed is not None:
                    # LiveKit's callback is a coroutine function; a plain function works
                    # too. As in LiveKit, its error is the step's.
                    outcome = self._on_task_completed(TaskCompletedEvent(
                        task_id=step.id, agent_task=task, result=results[step.id]))
                    if inspect.isawaitable(outcome):
                        await outcome
            except _OutOfScope as back:
                pending = [*back.task_ids, step.id, *pending]
                continue
            except Exception as e:  # the callback's
                if not self._return_exceptions:
                    self.complete(e)
                    return
                results[step.id] = e
        if self._summarize:
            await self._summarize_chat_ctx()
        self.complete(TaskGroupResult(task_results=results))

    @staticmethod
    def _build_step(step: _Step) -> AgentTask[Any]:
        task = step.factory()
        if not isinstance(task, AgentTask):
            raise TypeError(f"the task factory of step {step.id!r} must return an AgentTask, "
                            f"got {type(task).__name__}")
        return task

    def _out_of_scope_tool(self, task: AgentTask[Any], ids: list[str],
                           steps: dict[str, _Step]) -> FunctionTool:
        descriptions = "; ".join(f"{i}: {steps[i].description}" for i in ids)
        schema = {
            "name": "out_of_scope",
            "description": ("Call when the user asks to change something handled by an earlier "
                            f"step ({descriptions})."),
            "parameters": {"type": "object", "required": ["task_ids"], "properties": {
                "task_ids": {"type": "array", "items": {"type": "string", "enum": ids}}}},
        }

        async def out_of_scope(raw_arguments: dict[str, Any]) -> None:
            requested = [i for i in raw_arguments.get("task_ids", []) if i in ids]
            if not requested:
                raise ToolError(f"task_ids must name earlier steps: {', '.join(ids)}")
            task.complete(_OutOfScope(requested))

        # offered to the user's turns of the step, not to the reply its on_enter generates
        return function_tool(out_of_scope, raw_schema=schema, flags=ToolFlag.IGNORE_ON_ENTER)

    async def _summarize_chat_ctx(self) -> None:
        llm = self.session.llm
        if llm is None:
            return
        if not isinstance(llm, LLM):  # a realtime model has no chat to summarize with
            logger.error("summarizing the task group's conversation needs an LLM; keeping it")
            return
        try:
            self._chat_ctx = await summarize_chat_ctx(self._chat_ctx, llm)
        except Exception:
            logger.exception("summarizing the task group's conversation failed; keeping it")
