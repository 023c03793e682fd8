"""A parent agent that awaits a prebuilt task from a tool, and scripted-LLM shortcuts."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from agents_trio import Agent, FunctionToolCall, RunContext, ToolError, function_tool
from agents_trio.agent_task import AgentTask
from agents_trio.testing import FakeActions


class Parent(Agent):
    """Calls ``start`` to await the task ``make()`` builds; the result lands in ``results``."""

    def __init__(self, make: Callable[[], AgentTask[Any]]) -> None:
        super().__init__(instructions="You are the parent.")
        self.make = make
        self.results: list[object] = []

    @function_tool
    async def start(self, ctx: RunContext) -> str:
        """Start the capture."""
        try:
            result = await self.make()
        except ToolError as e:
            self.results.append(e)
            return f"failed: {e.message}"
        self.results.append(result)
        return "captured"


def call(name: str, call_id: str, **arguments: object) -> list[FunctionToolCall]:
    return [FunctionToolCall(name=name, arguments=json.dumps(arguments), call_id=call_id)]


def start_actions() -> FakeActions:
    a = FakeActions()
    a.add_llm("", tool_calls=call("start", "s1"), input="go")
    a.add_llm("done", input="captured")
    return a
