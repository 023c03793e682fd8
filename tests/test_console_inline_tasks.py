"""The console waits for the rest of an ``on_enter`` that awaited an AgentTask.

An agent's ``on_enter`` awaits a task (``await AskName()``, or a TaskGroup): the task takes
the floor and the console sends it the user's lines. When the task completes, the floor comes
back to the agent, whose ``on_enter`` carries on (stores the result, says goodbye). The end of
the piped input must wait for that, as it waits for a reply in progress; it used to count the
agent as waiting for the user (its ``on_enter`` had "handed the floor" once) and close the
session, cancelling the awaiting ``on_enter`` (``ToolError: AgentTask … is cancelled``)."""

from __future__ import annotations

import io
from typing import Any

import trio
import trio.testing

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, JobContext,
                         function_tool)
from agents_trio.console import TextConsole, run_console
from agents_trio.testing import FakeLLM
from agents_trio.testing.actions import FakeLLMResponse


class _AskName(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask the caller's name.")

    @function_tool
    async def record_name(self, name: str) -> None:
        """Record the caller's name.

        Args:
            name: The caller's name
        """
        self.complete(name)


class _Front(Agent):
    def __init__(self, log: list[str]) -> None:
        super().__init__(instructions="Greet the caller.")
        self.log = log

    async def on_enter(self) -> None:
        name = await _AskName()
        await trio.sleep(2.0)  # e.g. storing the answer somewhere
        self.log.append(name)
        await self.session.say(f"Thanks, {name}.")


def _lines(lines: list[str]) -> Any:  # noqa: ANN401 - a LineSource
    pending = list(lines)

    async def next_line() -> str | None:
        await trio.sleep(0)
        return pending.pop(0) if pending else None

    return next_line


async def test_end_of_input_waits_for_the_on_enter_an_agent_task_returned_to(
        autojump_clock: trio.testing.MockClock) -> None:
    out = io.StringIO()
    log: list[str] = []
    llm = FakeLLM([
        FakeLLMResponse(input="I'm Sam", content="", ttft=0.1, duration=0.1, tool_calls=[
            FunctionToolCall(name="record_name", arguments='{"name": "Sam"}', call_id="c1")]),
    ])

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession(llm=llm)
        await session.start(_Front(log), room=ctx.room)

    console = TextConsole(lines=_lines(["I'm Sam"]), out=out, interrupt=False)
    with trio.fail_after(30):
        await run_console(entrypoint, console)
    assert log == ["Sam"]
    assert out.getvalue().splitlines()[-1] == "agent: Thanks, Sam."


class _Teller(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Tell stories.")

    async def on_enter(self) -> None:
        self.session.generate_reply()


async def test_piped_lines_wait_for_a_realtime_models_reply(
        autojump_clock: trio.testing.MockClock) -> None:
    # with a realtime model the server owns the turn, so the session counts the agent as
    # waiting for the user while a reply plays; the console still waits for each reply
    # before the next line, and for the last one before closing
    from agents_trio.testing.livekit_fakes import FakePluginRealtimeModel

    out = io.StringIO()

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession(llm=FakePluginRealtimeModel())
        await session.start(_Teller(), room=ctx.room)

    console = TextConsole(lines=_lines(["go on"]), out=out, interrupt=False)
    with trio.fail_after(30):
        await run_console(entrypoint, console)
    assert out.getvalue().splitlines() == [
        "agent: hello from realtime", "user: go on", "agent: hello from realtime"]
