"""A close that arrives while ``session.start()`` is still starting the agent.

Starting awaits things that can take time (a toolset's or MCP server's set-up, the realtime
model's connection). A ``shutdown()`` or ``aclose()`` from another task in that window (the
job shutting down, the caller giving up) must close the session: it used to be dropped (the
session was not yet running), so the session ran on until something cancelled it and then
closed with the wrong reason, or, for ``aclose()``, was marked closed while its start went on
and made it run again.
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import Agent, CloseReason
from agents_trio.llm import Toolset
from agents_trio.session import SessionState
from agents_trio.testing import FakeActions, create_session


class SlowToolset(Toolset):
    """A toolset whose set-up waits until the test lets it go (a slow MCP server, say)."""

    def __init__(self) -> None:
        super().__init__(id="slow")
        self.setup_began = trio.Event()
        self.release = trio.Event()
        self.setups_cancelled = 0

    async def setup(self) -> Toolset:
        self.setup_began.set()
        try:
            await self.release.wait()
        except trio.Cancelled:
            self.setups_cancelled += 1
            raise
        return self


class Greeter(Agent):
    def __init__(self, toolset: SlowToolset) -> None:
        super().__init__(instructions="You greet.", tools=[toolset])
        self.entered = 0

    async def on_enter(self) -> None:
        self.entered += 1


async def _start_and_close_during(close: str, autojump_clock: trio.testing.MockClock
                                  ) -> tuple[Greeter, SlowToolset, list, list, float]:
    toolset = SlowToolset()
    agent = Greeter(toolset)
    session = create_session(FakeActions())
    closes: list = []
    session.on("close", closes.append)
    returned: list = []
    with trio.fail_after(60):
        async with session:
            async with trio.open_nursery() as nursery:
                async def start() -> None:
                    returned.append(await session.start(agent))
                nursery.start_soon(start)
                await toolset.setup_began.wait()
                await trio.sleep(1.0)   # the start is held up in the set-up
                asked = trio.current_time()
                if close == "shutdown":
                    session.shutdown(drain=False, reason=CloseReason.JOB_SHUTDOWN)
                else:
                    await session.aclose()
                with trio.move_on_after(5.0):
                    while session.state is not SessionState.CLOSED:
                        await trio.sleep(0.01)
                closed_after = trio.current_time() - asked
                toolset.release.set()   # too late to matter: nothing may start now
                await trio.sleep(1.0)
            assert returned == [None]  # start() returned (as LiveKit's does) to a closed session
    return agent, toolset, closes, [session.state], closed_after


async def test_shutdown_while_the_agent_starts_closes_the_session(autojump_clock) -> None:
    agent, toolset, closes, states, closed_after = await _start_and_close_during(
        "shutdown", autojump_clock)
    assert states == [SessionState.CLOSED]
    assert closed_after < 1.0                     # at once: the start was cancelled
    assert [c.reason for c in closes] == [CloseReason.JOB_SHUTDOWN]
    assert toolset.setups_cancelled == 1
    assert agent.entered == 0                     # the agent never entered


async def test_aclose_while_the_agent_starts_closes_the_session(autojump_clock) -> None:
    agent, toolset, closes, states, closed_after = await _start_and_close_during(
        "aclose", autojump_clock)
    assert states == [SessionState.CLOSED]
    assert closed_after < 1.0
    assert [c.reason for c in closes] == [CloseReason.USER_INITIATED]
    assert toolset.setups_cancelled == 1
    assert agent.entered == 0


class TimedToolset(Toolset):
    def __init__(self, seconds: float) -> None:
        super().__init__(id="timed")
        self.seconds = seconds

    async def setup(self) -> Toolset:
        await trio.sleep(self.seconds)
        return self


class Hooked(Agent):
    def __init__(self, setup_seconds: float) -> None:
        super().__init__(instructions="You greet.", tools=[TimedToolset(setup_seconds)])
        self.hooks: list[str] = []

    async def on_enter(self) -> None:
        self.hooks.append("enter")
        self.session.say("Hello there.")

    async def on_exit(self) -> None:
        self.hooks.append("exit")


@settings(database=None, deadline=None, max_examples=150)
@given(close=st.sampled_from(["shutdown", "shutdown-drain", "aclose"]),
       close_at=st.integers(0, 12).map(lambda q: q / 4),
       setup_seconds=st.sampled_from([0.0, 0.5, 1.0, 2.0]),
       _=st.random_module())
def test_a_close_at_any_moment_of_the_start_closes_once_and_pairs_the_hooks(
        close: str, close_at: float, setup_seconds: float, _: object) -> None:
    """A close from another task at any moment from ``start()`` on: the session closes once,
    ``start()`` never fails, the agent enters at most once (never when the close came before
    its set-up ended) and exits if it entered, and nothing is left running."""
    agent = Hooked(setup_seconds)
    actions = FakeActions()
    actions.add_tts(1.0, input="Hello there.")
    session = create_session(actions)
    closes: list = []
    session.on("close", closes.append)
    start_errors: list[BaseException] = []

    async def main() -> None:
        with trio.fail_after(60):
            async with session:
                async with trio.open_nursery() as nursery:
                    async def start() -> None:
                        try:
                            await session.start(agent)
                        except BaseException as error:  # noqa: BLE001 - recorded, checked
                            start_errors.append(error)
                            raise
                    nursery.start_soon(start)
                    # (a shutdown() before start() is ignored, as LiveKit's is)
                    while session.state is SessionState.ENTERED:
                        await trio.lowlevel.checkpoint()
                    await trio.sleep(close_at)
                    if close == "aclose":
                        await session.aclose()
                    else:
                        session.shutdown(drain=close == "shutdown-drain")
                        with trio.fail_after(10):
                            while session.state is not SessionState.CLOSED:
                                await trio.sleep(0.05)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert start_errors == []
    assert len(closes) == 1
    assert session.state is SessionState.CLOSED
    assert agent.hooks in ([], ["enter", "exit"]), agent.hooks
    if close_at < setup_seconds:
        assert agent.hooks == []
