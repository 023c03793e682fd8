"""``RunContext.update()``: a tool reports progress and keeps running in the background.

As in LiveKit: the first update answers the call (its templated message is the call's output,
the model replies to it without tools); later updates and the final result are answered as
calls of their own (``{call_id}_update_N``, ``{call_id}_final``) and voiced by a deferred
reply once the agent is idle. Interruption does not cancel a background tool; close does,
and every call stays answered exactly once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from agents_trio import (Agent, AgentSession, FunctionCall, FunctionCallOutput, FunctionToolCall,
                         RunContext, ToolFlag, function_tool)
from agents_trio.background_tools import REPLY_AT_TAIL, UPDATE_TEMPLATE
from agents_trio.testing import FakeActions, FakeLLM, Schedule
from agents_trio.testing.conversation import ConversationRecord, live_tasks, watch_session
from agents_trio.testing.invariants import (close_is_last_event, nothing_left_running,
                                            tool_calls_answered_once,
                                            tool_calls_executed_at_most_once, violations)


def _update_text(message: str, name: str = "search", call_id: str = "s1") -> str:
    return UPDATE_TEMPLATE.format(function_name=name, call_id=call_id, message=message)


def _reply_text(*call_ids: str) -> str:
    return REPLY_AT_TAIL.format(call_ids=list(call_ids))


class Searcher(Agent):
    def __init__(self, *, updates: tuple[str, ...] = ("looking",), silent: bool = False,
                 work: float = 10.0) -> None:
        super().__init__(instructions="search")
        self.updates = updates
        self.silent = silent
        self.work = work
        self.finished = False

    @function_tool
    async def search(self, ctx: RunContext) -> str:
        """Search."""
        for i, message in enumerate(self.updates):
            if i:
                await trio.sleep(self.work)
            await ctx.update(message, silent=self.silent)
        await trio.sleep(self.work)
        self.finished = True
        return "found 3"


def _script(*, first_reply: bool = True, extra: tuple[tuple[str, str], ...] = ()) -> FakeActions:
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="search", arguments="{}", call_id="s1")],
              input="go")
    if first_reply:
        a.add_llm("on it", input=_update_text("looking"))
    for input_text, answer in extra:
        a.add_llm(answer, input=input_text)
    return a


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


def _kinds(events: list[Any]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for ev in events:
        u = ev.update
        if u.type == "tool_call_started":
            out.append((u.type, u.function_call.call_id))
        elif u.type == "tool_call_updated":
            out.append((u.type, u.id, u.message))
        elif u.type == "tool_call_ended":
            out.append((u.type, u.id, u.status, u.message or ""))
        else:
            out.append((u.type, u.status, *u.update_ids))
    return out


@asynccontextmanager
async def _session(agent: Agent, a: FakeActions
                   ) -> AsyncIterator[tuple[AgentSession, FakeLLM, list[Any]]]:
    llm = FakeLLM(a.llm_responses)
    events: list[Any] = []
    async with AgentSession(llm=llm) as session:
        session.on("tool_execution_updated", events.append)
        await session.start(agent)
        yield session, llm, events


async def test_first_update_answers_the_call_and_the_result_comes_later(autojump_clock):
    a = _script(extra=((_reply_text("s1_final"), "three results"),))
    agent = Searcher()
    async with _session(agent, a) as (session, llm, events):
        with trio.fail_after(60):
            await session.run(user_input="go")
            # the turn ended with the update answered; the tool still runs
            assert _history(session) == [("user", "go"), ("call", "s1"), ("output", "s1"),
                                         ("assistant", "on it")]
            assert not agent.finished
            await trio.sleep(20)
            await session.wait_for_idle()
    assert agent.finished
    assert _history(session) == [
        ("user", "go"), ("call", "s1"), ("output", "s1"), ("assistant", "on it"),
        ("call", "s1_final"), ("output", "s1_final"), ("assistant", "three results")]
    outputs = {i.call_id: i for i in session.history.items if isinstance(i, FunctionCallOutput)}
    assert outputs["s1"].output == _update_text("looking")
    assert outputs["s1_final"].output == "found 3"
    calls = [i for i in session.history.items if isinstance(i, FunctionCall)]
    assert calls[0].extra.get("__livekit_agents_tool_non_blocking") is True
    # the reply to a progress report may call no tool; the reply to the result may
    assert [c["tool_choice"] for c in llm.calls[1:]] == ["none", None]
    kinds = _kinds(events)
    assert kinds[:2] == [("tool_call_started", "s1"), ("tool_call_updated", "s1", "looking")]
    assert kinds[2] == ("tool_call_ended", "s1_final", "done", "found 3")
    assert kinds[3:] == [("tool_reply_updated", "scheduled", "s1_final"),
                         ("tool_reply_updated", "completed", "s1_final")]


async def test_later_updates_are_calls_of_their_own_voiced_without_tools(autojump_clock):
    a = _script(extra=((_reply_text("s1_update_1"), "halfway"),
                       (_reply_text("s1_final"), "three results")))
    async with _session(Searcher(updates=("looking", "half done")), a) as (session, llm, events):
        with trio.fail_after(60):
            await session.run(user_input="go")
            await trio.sleep(40)
            await session.wait_for_idle()
    assert _history(session)[4:] == [
        ("call", "s1_update_1"), ("output", "s1_update_1"), ("assistant", "halfway"),
        ("call", "s1_final"), ("output", "s1_final"), ("assistant", "three results")]
    assert [c["tool_choice"] for c in llm.calls[1:]] == ["none", "none", None]
    assert ("tool_call_updated", "s1_update_1", "half done") in _kinds(events)


async def test_a_silent_first_update_asks_for_no_reply(autojump_clock):
    a = _script(first_reply=False, extra=((_reply_text("s1_final"), "three results"),))
    async with _session(Searcher(silent=True), a) as (session, llm, events):
        with trio.fail_after(60):
            await session.run(user_input="go")
            assert _history(session) == [("user", "go"), ("call", "s1"), ("output", "s1")]
            await trio.sleep(20)
            await session.wait_for_idle()
    assert _history(session)[3:] == [("call", "s1_final"), ("output", "s1_final"),
                                     ("assistant", "three results")]
    assert events[1].update.silent is True


async def test_close_cancels_a_background_tool_and_every_call_stays_answered_once(
        autojump_clock):
    a = _script()
    agent = Searcher()
    async with _session(agent, a) as (session, llm, events):
        with trio.fail_after(60):
            await session.run(user_input="go")
            await trio.sleep(2)
    assert not agent.finished
    assert _history(session) == [("user", "go"), ("call", "s1"), ("output", "s1"),
                                 ("assistant", "on it")]
    assert _kinds(events)[-1] == ("tool_call_ended", "s1_final", "cancelled", "")


async def test_interrupting_the_reply_does_not_cancel_the_background_tool(autojump_clock):
    a = _script(extra=((_reply_text("s1_final"), "three results"),))
    agent = Searcher()
    async with _session(agent, a) as (session, llm, events):
        with trio.fail_after(60):
            session.generate_reply(user_input="go")
            await trio.sleep(0.35)  # the call was answered by its update; "on it" generates
            assert [k[0] for k in _kinds(events)] == ["tool_call_started", "tool_call_updated"]
            session.interrupt()
            await trio.sleep(20)
            await session.wait_for_idle()
    assert agent.finished
    history = _history(session)
    assert ("assistant", "on it") not in history
    assert history[:3] == [("user", "go"), ("call", "s1"), ("output", "s1")]
    assert history[-3:] == [("call", "s1_final"), ("output", "s1_final"),
                            ("assistant", "three results")]


class Other(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="other")


class Handing(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="handing")
        self.log: list[str] = []

    @function_tool(flags=ToolFlag.CANCELLABLE)
    async def fetch(self, ctx: RunContext) -> str:
        """Cancellable background work."""
        await ctx.update("fetching")
        try:
            await trio.sleep(100)
        finally:
            self.log.append(f"fetch ended at {trio.current_time():.1f}")
        return "fetched"

    @function_tool
    async def save(self, ctx: RunContext) -> str:
        """Background work that may not be cancelled."""
        await ctx.update("saving")
        await trio.sleep(10)
        self.log.append(f"save ended at {trio.current_time():.1f}")
        return "saved"

    @function_tool
    async def transfer(self, ctx: RunContext) -> Agent:
        """Hand off."""
        await trio.sleep(1)
        return Other()

    async def on_exit(self) -> None:
        self.log.append(f"on_exit at {trio.current_time():.1f}")


async def test_a_handoff_cancels_cancellable_background_tools_and_waits_for_the_rest(
        autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="fetch", arguments="{}", call_id="f1"),
                              FunctionToolCall(name="save", arguments="{}", call_id="s1"),
                              FunctionToolCall(name="transfer", arguments="{}", call_id="t1")],
              input="go")
    agent = Handing()
    async with _session(agent, a) as (session, llm, events):
        with trio.fail_after(60):
            await session.run(user_input="go")
            await trio.sleep(30)
        assert session.current_agent is not agent
        ended = {ev.update.call_id: ev.update for ev in events
                 if ev.update.type == "tool_call_ended"}
        assert ended["f1"].status == "cancelled" and ended["f1"].id == "f1_final"
        assert (ended["s1"].status, ended["s1"].message) == ("done", "saved")
    # fetch was cancelled once the old agent's speeches were done; save ran to its end
    assert agent.log[0].startswith("on_exit")
    assert agent.log[1] == "fetch ended at 1.3"
    assert agent.log[2] == "save ended at 10.3"
    history = _history(session)
    for call_id in ("f1", "s1", "t1", "s1_final"):
        assert history.count(("output", call_id)) == 1


@pytest.mark.parametrize("close_at", [0.2, 0.35, 0.5, 1.0, 5.0, 10.4, 11.0, 30.0])
async def test_closing_at_any_point_leaves_each_call_answered_once_and_nothing_running(
        autojump_clock, close_at):
    a = _script(extra=((_reply_text("s1_update_1"), "halfway"),
                       (_reply_text("s1_final"), "three results")))
    record = ConversationRecord(schedule=Schedule(close_at=close_at))
    session = AgentSession(llm=FakeLLM(a.llm_responses))
    watch_session(session, record)
    before = live_tasks()
    with trio.fail_after(60):
        async with session:
            await session.start(Searcher(updates=("looking", "half done")))
            session.generate_reply(user_input="go")
            await trio.sleep(close_at)
            await session.aclose()
    record.history = list(session.history.items)
    record.leftover_tasks = sorted(t.name for t in live_tasks() - before)
    assert violations(record, (nothing_left_running, tool_calls_answered_once,
                               tool_calls_executed_at_most_once, close_is_last_event)) == []


class QuietSearcher(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="quiet")

    @function_tool
    async def search(self, ctx: RunContext) -> None:
        """Search quietly."""
        await ctx.update("looking", silent=True)
        await trio.sleep(20)


async def test_a_background_tool_holds_the_away_timer_off_until_it_ends(autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="search", arguments="{}", call_id="s1")],
              input="go")
    away_at: list[float] = []
    ended_at: list[float] = []
    async with AgentSession(llm=FakeLLM(a.llm_responses), user_away_timeout=5.0) as session:
        session.on("user_state_changed", lambda ev: away_at.append(trio.current_time())
                   if ev.new_state == "away" else None)
        session.on("tool_execution_updated", lambda ev: ended_at.append(trio.current_time())
                   if ev.update.type == "tool_call_ended" else None)
        await session.start(QuietSearcher())
        with trio.fail_after(60):
            await session.run(user_input="go")
            await trio.sleep(40)
    (end,) = ended_at
    assert away_at and away_at[0] == pytest.approx(end + 5.0)
