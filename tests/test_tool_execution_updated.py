"""The ``tool_execution_updated`` session event (LiveKit's ``ToolExecutionUpdatedEvent``):
one ``ToolCallStarted`` when a call starts running, one ``ToolCallEnded`` when it ends
(``done`` / ``error`` / ``cancelled``); calls that never run (a refused duplicate, an
unknown tool) report nothing, as in LiveKit."""

from __future__ import annotations

from typing import Any

import trio

from agents_trio import (Agent, AgentSession, FunctionToolCall, RunContext, StopResponse,
                         ToolCallEnded, ToolCallStarted, ToolError,
                         ToolExecutionUpdatedEvent, ToolFlag, function_tool)
from agents_trio import voice
from agents_trio.testing import FakeActions, FakeLLM


class Tools(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="tools")

    @function_tool
    async def weather(self, ctx: RunContext, city: str) -> str:
        """Weather.

        Args:
            city: Where
        """
        return f"sunny in {city}"

    @function_tool
    async def broken(self, ctx: RunContext) -> str:
        """Fails."""
        raise ToolError("no signal")

    @function_tool
    async def crash(self, ctx: RunContext) -> str:
        """Crashes."""
        raise RuntimeError("boom")

    @function_tool
    async def quiet(self, ctx: RunContext) -> None:
        """Says nothing."""

    @function_tool
    async def stop(self, ctx: RunContext) -> str:
        """Stops."""
        raise StopResponse()

    @function_tool
    async def slow(self, ctx: RunContext) -> str:
        """Slow."""
        await trio.sleep(100)
        return "late"

    @function_tool(on_duplicate="reject")
    async def single(self, ctx: RunContext) -> str:
        """One at a time."""
        await trio.sleep(1)
        return "once"


def _call(name: str, call_id: str, arguments: str = "{}") -> FunctionToolCall:
    return FunctionToolCall(name=name, arguments=arguments, call_id=call_id)


async def _run(calls: list[FunctionToolCall]) -> tuple[list[Any], list[str]]:
    a = FakeActions()
    a.add_llm("", tool_calls=calls, input="go")
    session = AgentSession(llm=FakeLLM(a.llm_responses))
    events: list[Any] = []
    order: list[str] = []
    session.on("tool_execution_updated", events.append)
    session.on("tool_execution_updated", lambda ev: order.append(ev.update.type))
    session.on("function_tools_executed", lambda ev: order.append("function_tools_executed"))
    async with session:
        await session.start(Tools())
        with trio.fail_after(60):
            await session.run(user_input="go")
    return events, order


def _ended(events: list[Any]) -> dict[str, ToolCallEnded]:
    return {ev.update.call_id: ev.update for ev in events
            if isinstance(ev.update, ToolCallEnded)}


def test_exported_like_livekit() -> None:
    assert voice.ToolExecutionUpdatedEvent is ToolExecutionUpdatedEvent
    ev = ToolExecutionUpdatedEvent(update=ToolCallEnded(id="c", call_id="c", status="done"))
    assert ev.type == "tool_execution_updated"
    assert ev.update.type == "tool_call_ended" and ev.update.message is None


async def test_started_then_ended_before_function_tools_executed(autojump_clock):
    events, order = await _run([_call("weather", "w1", '{"city": "Oslo"}')])
    assert order == ["tool_call_started", "tool_call_ended", "function_tools_executed"]
    started, ended = events
    assert isinstance(started, ToolExecutionUpdatedEvent)
    assert isinstance(started.update, ToolCallStarted)
    assert started.update.function_call.call_id == "w1"
    assert started.update.function_call.name == "weather"
    assert ended.update == ToolCallEnded(id="w1", call_id="w1", message="sunny in Oslo",
                                         status="done")
    assert ended.created_at >= started.created_at


async def test_ended_status_and_message_follow_how_the_tool_ended(autojump_clock):
    events, _ = await _run([_call("broken", "b"), _call("crash", "c"), _call("quiet", "q"),
                            _call("stop", "s")])
    ended = _ended(events)
    assert (ended["b"].status, ended["b"].message) == ("error", "no signal")
    assert (ended["c"].status, ended["c"].message) == ("error", "boom")
    assert (ended["q"].status, ended["q"].message) == ("done", None)
    assert (ended["s"].status, ended["s"].message) == ("done", None)


async def test_calls_that_never_run_report_nothing(autojump_clock):
    events, _ = await _run([_call("single", "one"), _call("single", "two"),
                            _call("nosuchtool", "x")])
    assert [(type(ev.update).__name__, ev.update.call_id if isinstance(ev.update, ToolCallEnded)
             else ev.update.function_call.call_id) for ev in events] == [
        ("ToolCallStarted", "one"), ("ToolCallEnded", "one")]


async def test_a_tool_cancelled_by_close_ends_cancelled_once(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("slow", "s1")], input="go")
    session = AgentSession(llm=FakeLLM(a.llm_responses))
    events: list[Any] = []
    session.on("tool_execution_updated", events.append)
    async with session:
        await session.start(Tools())
        session.generate_reply(user_input="go")
        await trio.sleep(5)
        assert [ev.update.type for ev in events] == ["tool_call_started"]
        await session.aclose()
    assert [ev.update.type for ev in events] == ["tool_call_started", "tool_call_ended"]
    assert events[1].update == ToolCallEnded(id="s1", call_id="s1", status="cancelled")


class Replacing(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="replace")

    @function_tool(on_duplicate="replace", flags=ToolFlag.CANCELLABLE)
    async def fetch(self, ctx: RunContext, n: int) -> str:
        """Fetch.

        Args:
            n: Which
        """
        await trio.sleep(5)
        return f"fetched {n}"


async def test_a_replaced_call_ends_cancelled_before_its_replacement_starts(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[_call("fetch", "f1", '{"n": 1}'), _call("fetch", "f2", '{"n": 2}')],
              input="go")
    session = AgentSession(llm=FakeLLM(a.llm_responses))
    seen: list[tuple[str, str, str | None]] = []
    session.on("tool_execution_updated", lambda ev: seen.append(
        ("started", ev.update.function_call.call_id, None) if isinstance(ev.update, ToolCallStarted)
        else ("ended", ev.update.call_id, ev.update.status)))
    async with session:
        await session.start(Replacing())
        with trio.fail_after(60):
            await session.run(user_input="go")
    assert seen == [("started", "f1", None), ("ended", "f1", "cancelled"),
                    ("started", "f2", None), ("ended", "f2", "done")]
