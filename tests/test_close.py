"""Closing a session at any moment unwinds the tree from the leaves up (issue: part 2, close).

Each test drives the example agent of ``examples/research_agent.py`` to one point and closes
there. The asyncio runtime deadlocked or leaked the parent activity in several of these places
(close while on_enter awaits a task, close during a tool awaiting a task, nested tasks whose
on_exit never ran); here the structure makes them impossible.
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest
import trio

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeActions, FakeLLM

_spec = importlib.util.spec_from_file_location(
    "research_agent", pathlib.Path(__file__).parents[1] / "examples" / "research_agent.py")
research = importlib.util.module_from_spec(_spec)
sys.modules["research_agent"] = research
_spec.loader.exec_module(research)

GRACE = 5.0


async def _close_after(inputs: list[str], *, extra_wait: float = 0.0, background: str | None = None):
    """Run the example through ``inputs``, optionally start ``background`` without waiting,
    then close; returns the journal, the events and how long aclose took."""
    journal = research.Journal()
    session, assistant = research.create(journal)
    events: list[str] = []
    session.on("function_tools_executed", lambda ev: journal(
        "tools: " + ", ".join(f"{c.name} -> {o.output!r}" for c, o in ev.zipped())))
    for name in ("close", "agent_state_changed", "conversation_item_added",
                 "function_tools_executed"):
        session.on(name, lambda ev, name=name: events.append(name))
    with trio.fail_after(60):
        async with session:
            await session.start(assistant)
            for text in inputs:
                await session.run(user_input=text)
            if background is not None:
                session.generate_reply(user_input=background)
            await trio.sleep(extra_wait)
            started = trio.current_time()
            await session.aclose()
            took = trio.current_time() - started
    return journal.entries, events, took


def _once_each(entries: list[str], *names: str) -> None:
    for name in names:
        assert entries.count(name) == 1, (name, entries)


async def test_close_during_a_slow_tool_cancels_it_instead_of_waiting(autojump_clock):
    entries, events, took = await _close_after([], background="weather in Oslo", extra_wait=1.0)
    # the cancelled call is answered in the history (an error output), with no reply;
    # on_exit runs first, while the agent can still say goodbye (as LiveKit's close:
    # interrupt, on_exit, then the tools are cancelled)
    assert entries == ["assistant.on_enter", "assistant.on_exit", "lookup_weather.finally",
                       "tools: lookup_weather -> 'the tool call was cancelled because the "
                       "session closed'"]
    assert took < 0.01
    assert events[-1] == "close"


async def test_close_during_a_task_awaited_by_a_tool_answers_the_tool_with_an_error(
        autojump_clock):
    entries, events, took = await _close_after(["research tides"])
    assert entries == [
        "assistant.on_enter", "research.on_enter", "research.on_exit",
        "research_topic.error: AgentTask research_task is cancelled",
        "tools: research_topic -> 'AgentTask research_task is cancelled'",
        "assistant.on_exit"]
    assert took < GRACE
    assert events[-1] == "close"


async def test_close_during_nested_tasks_runs_every_on_exit_innermost_first(autojump_clock):
    entries, events, took = await _close_after(["research tides", "go deeper"])
    exits = [e for e in entries if e.endswith("on_exit")]
    assert exits == ["deep.on_exit", "research.on_exit", "assistant.on_exit"]
    _once_each(entries, "deep.on_enter", "research.on_enter", "assistant.on_enter")
    assert "tools: go_deeper -> 'AgentTask deep_research_task is cancelled'" in entries
    assert took < GRACE
    assert events[-1] == "close"


async def test_close_during_a_task_whose_on_enter_sleeps_cancels_the_sleep(autojump_clock):
    entries, events, took = await _close_after([], background="start the slow task",
                                               extra_wait=1.0)
    assert entries == ["assistant.on_enter", "slow.on_enter", "slow.work_ended", "slow.on_exit",
                       "tools: start_slow_task -> 'AgentTask slow_task is cancelled'",
                       "assistant.on_exit"]
    assert took < 0.01
    assert events[-1] == "close"


class SlowEnter(Agent):
    def __init__(self, journal: list[str]) -> None:
        super().__init__(instructions="slow")
        self.journal = journal

    async def on_enter(self) -> None:
        self.journal.append("on_enter")
        try:
            await trio.sleep(10)
        finally:
            self.journal.append("on_enter.finally")

    async def on_exit(self) -> None:
        self.journal.append("on_exit")


async def test_close_during_on_enter_runs_on_exit_once(autojump_clock):
    journal: list[str] = []
    closes = []
    async with AgentSession(llm=FakeLLM()) as session:
        session.on("close", closes.append)
        await session.start(SlowEnter(journal))
        await trio.sleep(1)
    assert journal == ["on_enter", "on_enter.finally", "on_exit"]
    assert len(closes) == 1


class Talker(Agent):
    def __init__(self, name: str, journal: list[str]) -> None:
        super().__init__(instructions=name, id=name)
        self.journal = journal

    async def on_enter(self) -> None:
        self.journal.append(f"{self.id}.on_enter")
        self.session.generate_reply(instructions=f"{self.id} greets")

    async def on_exit(self) -> None:
        self.journal.append(f"{self.id}.on_exit")


async def test_close_during_a_handoff_never_exits_an_agent_that_did_not_enter(autojump_clock):
    a = FakeActions()
    a.add_llm("a long greeting from a", input="a greets", ttft=0.1, duration=5.0)
    a.add_llm("hello from b", input="b greets")
    journal: list[str] = []
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Talker("a", journal))
        await trio.sleep(0.5)
        session.update_agent(Talker("b", journal))
        await trio.sleep(0.5)  # a is draining: its greeting is still being generated
        assert journal == ["a.on_enter", "a.on_exit"]
    assert journal == ["a.on_enter", "a.on_exit"]


@pytest.mark.parametrize("close_at", [0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 3.0])
async def test_close_at_any_time_of_a_nested_conversation_is_clean(autojump_clock, close_at):
    journal = research.Journal()
    session, assistant = research.create(journal)
    closes = []
    session.on("close", closes.append)
    with trio.fail_after(60):
        async with session:
            await session.start(assistant)
            async with trio.open_nursery() as nursery:
                async def converse() -> None:
                    with pytest.raises(RuntimeError, match="session closed"):
                        await session.run(user_input="research tides")
                        await session.run(user_input="go deeper")
                        await trio.sleep_forever()

                async def close() -> None:
                    await trio.sleep(close_at)
                    await session.aclose()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(converse)
                nursery.start_soon(close)
    enters = [e.split(".")[0] for e in journal.entries if e.endswith(".on_enter")]
    exits = [e.split(".")[0] for e in journal.entries if e.endswith(".on_exit")]
    assert exits == list(reversed(enters))
    assert len(closes) == 1
