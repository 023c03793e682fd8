"""An activity's state only moves forward: a close that comes while ``drain()`` runs the
agent's ``on_exit`` leaves the activity CLOSED, not DRAINING once ``on_exit`` returns.

Before, ``drain()`` set DRAINING after ``on_exit`` whatever had happened meanwhile: a
``session.drain()`` awaited by the user's own task (which the close does not cancel) left a
closed activity reading DRAINING for good, where a forced tool reply is still accepted.
"""

from __future__ import annotations

import trio

from agents_trio import Agent, AgentSession
from agents_trio.activity import ActivityState
from agents_trio.testing import FakeLLM


class SlowExit(Agent):
    def __init__(self, exiting: trio.Event, release: trio.Event) -> None:
        super().__init__(instructions="x")
        self._exiting, self._release = exiting, release

    async def on_exit(self) -> None:
        self._exiting.set()
        with trio.CancelScope(shield=True):   # an on_exit that finishes what it does
            await self._release.wait()


async def test_a_close_while_drain_runs_on_exit_leaves_the_activity_closed(autojump_clock):
    exiting, release = trio.Event(), trio.Event()
    drained = trio.Event()
    async with trio.open_nursery() as nursery:
        session = AgentSession(llm=FakeLLM([]))
        async with session:
            await session.start(SlowExit(exiting, release))
            activity = session.activity

            async def drain() -> None:   # the user's task: the close does not cancel it
                await session.drain()
                drained.set()

            nursery.start_soon(drain)
            await exiting.wait()
            nursery.start_soon(session.aclose)
            await trio.sleep(1.0)
            assert activity.state is ActivityState.CLOSED
            release.set()
            with trio.fail_after(10):
                await drained.wait()
        assert activity.state is ActivityState.CLOSED
