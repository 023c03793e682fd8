"""Positive witnesses for the room I/O tests: wait for an event that proves the thing happened,
never a sleep (the tests that need the real SDK's audio run on the wall clock, bounded by
``trio.fail_after``; the others on the autojump clock)."""

from __future__ import annotations

from collections.abc import Callable

import trio
import trio.testing

from agents_trio import AgentSession, AsyncioBridge


async def room_events_handled(bridge: AsyncioBridge) -> None:
    """Every room event scheduled on the asyncio side so far has been handled: one round trip
    through the asyncio loop (what was scheduled before it ran), then quiescence (every Trio
    task, the room I/O's event reader among them, is blocked)."""
    await bridge.run_sync(lambda: None)
    await trio.testing.wait_all_tasks_blocked()


async def session_until(session: AgentSession, predicate: Callable[[], object], *,
                        deadline: float = 60.0) -> None:
    """Wait until ``predicate()`` holds, re-checked on every event the session emits (history
    items, agent and user states, ...); a deadlock fails after ``deadline`` seconds."""
    events = session.events()   # subscribed before the first check: no event is missed
    with trio.fail_after(deadline):
        if predicate():
            await trio.lowlevel.checkpoint()
            return
        async for _ in events:
            if predicate():
                return
    raise AssertionError("the session closed before the awaited state was reached")


async def agent_state_reaches(session: AgentSession, state: str) -> None:
    """Wait until ``session.agent_state == state`` (an ``agent_state_changed`` is the witness)."""
    await session_until(session, lambda: session.agent_state == state)
