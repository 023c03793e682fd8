"""``RunContext.foreground()`` and ``RunContext.with_filler()`` (LiveKit 1.8.9 semantics).

foreground(): waits until the agent is idle (running tools do not count), then holds the floor
so no deferred tool reply, filler or other foreground body starts until it ends.
with_filler(): while its block runs, says the filler after ``delay`` seconds of idle quiet, at
most once without ``interval``, up to ``max_steps`` with it, never after the speech that called
the tool was interrupted."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from agents_trio import (Agent, AgentSession, FunctionCall, FunctionCallOutput, FunctionToolCall,
                         RunContext, SpeechHandle, function_tool)
from agents_trio.background_tools import REPLY_AT_TAIL, REPLY_MAYBE_COVERED, UPDATE_TEMPLATE
from agents_trio.testing import FakeActions, FakeLLM


def _history(session: AgentSession) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in session.history.items:
        if isinstance(item, FunctionCall):
            out.append(("call", item.call_id))
        elif isinstance(item, FunctionCallOutput):
            out.append(("output", item.call_id))
        elif getattr(item, "role", None) in ("user", "assistant"):
            out.append((item.role, item.text_content or ""))
    return out


def _update(name: str, call_id: str, message: str) -> str:
    return UPDATE_TEMPLATE.format(function_name=name, call_id=call_id, message=message)


class Floored(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="floor")
        self.seen_at_entry: list[tuple[str, str]] = []

    @function_tool
    async def book(self, ctx: RunContext) -> str:
        """Book."""
        await trio.sleep(0.1)  # answered after lookup: the speech then replies to both
        await ctx.update("booking")
        async with ctx.foreground():
            self.seen_at_entry = _history(ctx.session)  # type: ignore[arg-type]
            await trio.sleep(5)
            await ctx.session.say("booked, one more thing")  # type: ignore[attr-defined]
        await trio.sleep(5)
        return "confirmation 42"

    @function_tool
    async def lookup(self, ctx: RunContext) -> str:
        """Look up."""
        await ctx.update("looking")
        await trio.sleep(1)
        return "lookup result"

    @function_tool
    async def pause(self, ctx: RunContext) -> str:
        """A blocking tool that speaks in the foreground."""
        async with ctx.foreground():
            await ctx.session.say("one moment")  # type: ignore[attr-defined]
        return "paused"


async def test_foreground_waits_for_the_reply_and_holds_off_deferred_replies(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="book", arguments="{}", call_id="b1"),
                              FunctionToolCall(name="lookup", arguments="{}", call_id="l1")],
              input="go")
    a.add_llm("on it", input=_update("book", "b1", "booking"))  # the last answer
    a.add_llm("lookup summary", input=REPLY_MAYBE_COVERED.format(call_ids=["l1_final"]))
    a.add_llm("booking summary", input=REPLY_AT_TAIL.format(call_ids=["b1_final"]))
    agent = Floored()
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(agent)
        with trio.fail_after(60):
            await session.run(user_input="go")
            await trio.sleep(30)
            await session.wait_for_idle()
    # the body started once the reply to the updates had been generated
    assert ("assistant", "on it") in agent.seen_at_entry
    history = _history(session)
    # lookup's result came at t≈1, but its reply waited for the floor to be released
    said = [text for role, text in history if role == "assistant"]
    assert said == ["on it", "booked, one more thing", "lookup summary", "booking summary"]
    assert history.index(("call", "l1_final")) < history.index(("assistant",
                                                                 "booked, one more thing"))


async def test_foreground_in_a_blocking_tool_does_not_wait_for_the_tool_itself(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="pause", arguments="{}", call_id="p1")],
              input="go")
    a.add_llm("done pausing", input="paused")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Floored())
        with trio.fail_after(60):
            await session.run(user_input="go")
    assert [t for r, t in _history(session) if r == "assistant"] == ["one moment",
                                                                     "done pausing"]


class Filling(Agent):
    def __init__(self, *, work: float, **filler: Any) -> None:
        super().__init__(instructions="fill")
        self.work = work
        self.filler = filler
        self.handles: list[SpeechHandle] = []

    @function_tool
    async def slow(self, ctx: RunContext) -> str:
        """Slow."""
        self.handles.append(ctx.speech_handle)
        async with ctx.with_filler(**self.filler):
            await trio.sleep(self.work)
        return "slow done"


async def _fill(agent: Filling, *, interrupt_at: float | None = None) -> list[str]:
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="slow", arguments="{}", call_id="s1")],
              input="go")
    a.add_llm("finished", input="slow done")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(agent)
        with trio.fail_after(120):
            session.generate_reply(user_input="go")
            if interrupt_at is not None:
                await trio.sleep(interrupt_at)
                agent.handles[0].interrupt()
            await trio.sleep(agent.work + 5)
            await session.wait_for_idle()
    return [t for r, t in _history(session) if r == "assistant"]


async def test_a_filler_is_said_once_after_its_delay(autojump_clock):
    said = await _fill(Filling(work=10, source="hold on", delay=2))
    assert said == ["hold on", "finished"]


async def test_no_filler_when_the_tool_ends_before_the_delay(autojump_clock):
    said = await _fill(Filling(work=1, source="hold on", delay=2))
    assert said == ["finished"]


async def test_interval_repeats_up_to_max_steps(autojump_clock):
    said = await _fill(Filling(work=30, source="hold on", delay=1, interval=3, max_steps=3))
    assert said == ["hold on", "hold on", "hold on", "finished"]


async def test_a_callable_source_gets_the_step_and_may_skip(autojump_clock):
    calls: list[int] = []

    def source(step: int) -> str | None:
        calls.append(step)
        return None if len(calls) == 1 else f"still working ({step})"

    said = await _fill(Filling(work=12, source=source, delay=1, interval=2, max_steps=2))
    assert said == ["still working (0)", "still working (1)", "finished"]
    assert calls[:3] == [0, 0, 1]


async def test_interrupting_the_speech_stops_the_filler(autojump_clock):
    said = await _fill(Filling(work=10, source="hold on", delay=3), interrupt_at=1)
    assert "hold on" not in said


async def test_bad_filler_options_fail_at_entry(autojump_clock):
    class Bad(Agent):
        def __init__(self) -> None:
            super().__init__(instructions="bad")
            self.errors: list[str] = []

        @function_tool
        async def slow(self, ctx: RunContext) -> str:
            """Slow."""
            for kwargs in ({"delay": -1}, {"interval": -1}, {"max_steps": 0}):
                with pytest.raises(ValueError) as info:
                    async with ctx.with_filler("x", **kwargs):
                        pass
                self.errors.append(str(info.value))
            return "ok"

    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="slow", arguments="{}", call_id="s1")],
              input="go")
    agent = Bad()
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(agent)
        with trio.fail_after(60):
            await session.run(user_input="go")
    assert len(agent.errors) == 3


async def test_a_failing_filler_stops_without_failing_the_tool(autojump_clock, caplog):
    def source(step: int) -> str:
        raise RuntimeError("no filler today")

    said = await _fill(Filling(work=10, source=source, delay=1, interval=1))
    assert said == ["finished"]  # the tool still answered "slow done"
    assert any("filler stopped on an error" in r.getMessage() for r in caplog.records)
