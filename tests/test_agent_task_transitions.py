"""AgentTask at its transitions: completed before it is awaited, and completed at the moment
its parent is handed off, the session closes or the user interrupts.

A task completed before it was awaited (``task.complete(x); await task``) raised "was already
awaited": completing and awaiting shared one phase. As in LiveKit, the await runs the task
(its ``on_enter`` and ``on_exit``) and returns the result it was completed with.

The completion racing a handoff, a close or an interruption found nothing; kept as a
regression test.
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, RunContext,
                         ToolError, function_tool)
from agents_trio.session import SessionState
from agents_trio.testing import FakeActions, FakeLLM, create_session


class Logged(AgentTask[str]):
    """Logs its hooks; completes itself ``after`` seconds into on_enter (None: never)."""

    def __init__(self, log: list[str], after: float | None = None) -> None:
        super().__init__(instructions="You ask for a value.", id="task")
        self.log = log
        self.after = after

    async def on_enter(self) -> None:
        self.log.append("task.enter")
        if self.after is not None:
            await trio.sleep(self.after)
            if not self.done():
                self.complete("value")

    async def on_exit(self) -> None:
        self.log.append("task.exit")


class Asker(Agent):
    """Its tool ``ask`` awaits the task ``make_task()`` builds; the outcomes are logged."""

    def __init__(self, log: list[str], make_task: object) -> None:
        super().__init__(instructions="You are the parent.", id="parent")
        self.log = log
        self.make_task = make_task
        self.outcomes: list[str] = []

    async def on_enter(self) -> None:
        self.log.append("parent.enter")

    async def on_exit(self) -> None:
        self.log.append("parent.exit")

    @function_tool
    async def ask(self, ctx: RunContext) -> str:
        """Ask the user for a value."""
        try:
            value = await self.make_task()  # type: ignore[operator]
        except (ToolError, RuntimeError) as e:
            self.outcomes.append(f"error: {e}")
            raise
        self.outcomes.append(value)
        return f"got {value}"


class Other(Agent):
    def __init__(self, log: list[str]) -> None:
        super().__init__(instructions="You are another agent.", id="other")
        self.log = log

    async def on_enter(self) -> None:
        self.log.append("other.enter")

    async def on_exit(self) -> None:
        self.log.append("other.exit")


def _ask_script() -> FakeActions:
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="ask", arguments="{}", call_id="a1")],
              input="go")
    a.add_llm("thanks", input="got value")
    return a


async def test_a_task_completed_before_it_is_awaited_runs_and_returns_its_result(
        autojump_clock) -> None:
    log: list[str] = []

    def completed_early() -> Logged:
        task = Logged(log)
        task.complete("early")
        return task

    parent = Asker(log, completed_early)
    session = AgentSession(llm=FakeLLM(_ask_script().llm_responses))
    async with session:
        await session.start(parent)
        with trio.fail_after(10):
            await session.run(user_input="go")
    assert parent.outcomes == ["early"]
    assert log == ["parent.enter", "task.enter", "task.exit", "parent.exit"]
    handoffs = [(h.old_agent_id, h.new_agent_id) for h in session.history.items
                if h.type == "agent_handoff"]
    assert handoffs == [(None, "parent"), ("parent", "task"), ("task", "parent")]


@settings(database=None, deadline=None, max_examples=60)
@given(after=st.integers(0, 8).map(lambda q: q / 4),
       at=st.integers(0, 8).map(lambda q: q / 4),
       what=st.sampled_from(["handoff", "shutdown", "shutdown-drain", "aclose", "interrupt"]),
       _=st.random_module())
def test_a_task_completing_as_its_parent_is_handed_off_closed_or_interrupted(
        after: float, at: float, what: str, _: object) -> None:
    """The task completes ``after`` seconds into its on_enter; ``at`` seconds after the tool
    started the parent is handed off, the session closes, or the user interrupts: the tool
    gets one outcome, the hooks pair up, and a handoff ends with the new agent current."""
    log: list[str] = []
    parent = Asker(log, lambda: Logged(log, after))
    session = create_session(_ask_script())

    async def main() -> None:
        with trio.fail_after(60):
            async with session:
                await session.start(parent)
                session.generate_reply(user_input="go")
                await trio.sleep(0.4 + at)   # the tool starts at 0.4
                if what == "handoff":
                    other = Other(log)
                    session.update_agent(other)
                    await trio.sleep(5)
                    assert "other.enter" in log, log
                elif what == "interrupt":
                    await session.interrupt()
                    await trio.sleep(5)
                    assert session.current_agent is parent, log
                elif what == "aclose":
                    await session.aclose()
                else:
                    session.shutdown(drain=what == "shutdown-drain")
                    while session.state is not SessionState.CLOSED:
                        await trio.sleep(0.05)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(parent.outcomes) == 1, (log, parent.outcomes)
    for name in ("parent", "task", "other"):
        assert log.count(f"{name}.enter") == log.count(f"{name}.exit") <= 1, log
