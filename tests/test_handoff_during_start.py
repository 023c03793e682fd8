"""A handoff asked for while ``session.start()`` is still starting the first agent.

``update_agent()`` from another task in that window (the start held up by a slow toolset's
set-up) used to be dropped: the session was not running yet, so it only renamed
``current_agent`` while the first agent's activity started and ran on. The handoff is now
served once the first agent has entered, as one made right after the start: the first agent
runs ``on_enter`` then ``on_exit``, then the new agent enters.
"""

from __future__ import annotations

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import Agent
from agents_trio.llm import Toolset
from agents_trio.session import SessionState
from agents_trio.testing import FakeActions, create_session


class TimedToolset(Toolset):
    """A toolset whose set-up takes ``seconds`` (a slow MCP server, say)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(id="timed")
        self.seconds = seconds
        self.setup_began = trio.Event()

    async def setup(self) -> Toolset:
        self.setup_began.set()
        await trio.sleep(self.seconds)
        return self


class Hooked(Agent):
    def __init__(self, name: str, log: list[str], *, setup_seconds: float | None = None) -> None:
        tools = [TimedToolset(setup_seconds)] if setup_seconds is not None else []
        super().__init__(instructions=f"You are {name}.", id=name, tools=tools)
        self.log = log

    async def on_enter(self) -> None:
        self.log.append(f"{self.id}.enter")

    async def on_exit(self) -> None:
        self.log.append(f"{self.id}.exit")


async def test_update_agent_while_the_session_starts_hands_off_once_started(
        autojump_clock) -> None:
    log: list[str] = []
    first = Hooked("first", log, setup_seconds=2.0)
    second = Hooked("second", log)
    session = create_session(FakeActions())
    with trio.fail_after(30):
        async with session:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.start, first)
                await first.tools[0].setup_began.wait()
                assert session.state is SessionState.STARTING
                session.update_agent(second)
            assert session.current_agent is second
            while session.activity is None or session.activity.agent is not second:
                await trio.sleep(0.1)
            await session.wait_for_idle()
    assert log == ["first.enter", "first.exit", "second.enter", "second.exit"]
    handoffs = [(h.old_agent_id, h.new_agent_id) for h in session.history.items
                if h.type == "agent_handoff"]
    assert handoffs == [(None, "first"), ("first", "second")]


@settings(database=None, deadline=None, max_examples=60)
@given(asked_at=st.integers(0, 12).map(lambda q: q / 4),
       setup_seconds=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
       _=st.random_module())
def test_update_agent_at_any_moment_of_the_start_ends_on_the_new_agent(
        asked_at: float, setup_seconds: float, _: object) -> None:
    """From ``start()`` on, wherever the handoff falls: the new agent ends up running (and
    ``current_agent``), every agent that entered exits once, and the first agent never
    exits without having entered."""
    log: list[str] = []
    first = Hooked("first", log, setup_seconds=setup_seconds)
    second = Hooked("second", log)
    session = create_session(FakeActions())

    async def main() -> None:
        with trio.fail_after(60):
            async with session:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(session.start, first)
                    while session.state is SessionState.ENTERED:
                        await trio.lowlevel.checkpoint()
                    await trio.sleep(asked_at)
                    session.update_agent(second)
                while session.activity is None or session.activity.agent is not second:
                    await trio.sleep(0.05)
                assert session.current_agent is second

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert log == ["first.enter", "first.exit", "second.enter", "second.exit"]
