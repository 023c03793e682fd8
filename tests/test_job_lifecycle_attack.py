"""A job's own transitions: shutdown callbacks added or a shutdown asked for while the
callbacks run, a session started twice at once or after the shutdown; in virtual time
against a fake room."""

from __future__ import annotations

import functools

import pytest

import trio
import trio.testing

from agents_trio import Agent, AgentSession
from agents_trio.job import JobContext, run_job
from agents_trio.testing import FakeLLM, open_fake_room


class Entering(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Be brief.")
        self.entered = 0

    async def on_enter(self) -> None:
        self.entered += 1


async def test_a_shutdown_callback_added_while_the_callbacks_run_runs_too(
        autojump_clock: trio.testing.MockClock) -> None:
    called: list[str] = []

    async def late(reason: str) -> None:
        called.append(f"late {reason}")

    async def entrypoint(ctx: JobContext) -> None:
        async def first(reason: str) -> None:
            called.append(f"first {reason}")
            ctx.add_shutdown_callback(late)

        ctx.add_shutdown_callback(first)

    with trio.fail_after(5):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert called == ["first entrypoint returned", "late entrypoint returned"]


async def test_a_shutdown_callback_added_after_the_callbacks_ran_is_refused(
        autojump_clock: trio.testing.MockClock) -> None:
    contexts: list[JobContext] = []

    async def entrypoint(ctx: JobContext) -> None:
        contexts.append(ctx)

    await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    with pytest.raises(RuntimeError, match="already ran"):
        contexts[0].add_shutdown_callback(lambda: None)


async def test_a_shutdown_asked_for_by_a_shutdown_callback_changes_nothing(
        autojump_clock: trio.testing.MockClock) -> None:
    called: list[str] = []

    async def entrypoint(ctx: JobContext) -> str:
        def first(reason: str) -> None:
            called.append(reason)
            ctx.shutdown("from a callback")

        ctx.add_shutdown_callback(first)
        ctx.add_shutdown_callback(lambda reason: called.append(reason))
        return "done"

    with trio.fail_after(5):
        result = await run_job(entrypoint, url="wss://fake", token="t",
                               open_room_fn=open_fake_room)
    assert result == "done"
    assert called == ["entrypoint returned", "entrypoint returned"]


async def test_a_session_started_in_a_room_after_the_shutdown_is_not_started(
        autojump_clock: trio.testing.MockClock) -> None:
    agent = Entering()

    async def entrypoint(ctx: JobContext) -> object:
        ctx.shutdown()
        session = AgentSession(llm=FakeLLM())
        return await session.start(agent, room=ctx.room)

    with trio.fail_after(5):
        result = await run_job(entrypoint, url="wss://fake", token="t",
                               open_room_fn=open_fake_room)
    assert result is None and agent.entered == 0


async def test_one_session_started_twice_at_once_in_a_job_runs_once(
        autojump_clock: trio.testing.MockClock) -> None:
    """As LiveKit's ``start`` under its lock: the second call waits for the first and
    returns None; the agent enters once and the session closes once."""
    agent = Entering()
    closes: list[str] = []
    results: list[object] = []

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession(llm=FakeLLM())
        session.on("close", lambda ev: closes.append(str(ev.reason)))

        async def start() -> None:
            results.append(await session.start(agent, room=ctx.room))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(start)
            nursery.start_soon(start)
        assert agent.entered == 1
        await trio.sleep(1)
        ctx.shutdown()

    with trio.fail_after(5):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert results == [None, None]
    assert agent.entered == 1 and closes == ["job_shutdown"]


async def test_a_shutdown_between_two_sessions_starting_closes_both(
        autojump_clock: trio.testing.MockClock) -> None:
    agents = [Entering(), Entering()]
    closes: list[str] = []

    async def entrypoint(ctx: JobContext) -> None:
        sessions = [AgentSession(llm=FakeLLM()), AgentSession(llm=FakeLLM())]
        for s in sessions:
            s.on("close", lambda ev: closes.append(str(ev.reason)))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(sessions[0].start, agents[0], room=ctx.room))
            await trio.lowlevel.checkpoint()
            ctx.shutdown()
            nursery.start_soon(functools.partial(sessions[1].start, agents[1], room=ctx.room))

    with trio.fail_after(5):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert agents[1].entered == 0
    assert closes in ([], ["job_shutdown"])


async def test_a_hanging_on_session_end_is_given_up_after_its_timeout(
        autojump_clock: trio.testing.MockClock) -> None:
    """As LiveKit's ``session_end_timeout`` (300 s by default): the job ends, and its
    shutdown callbacks run, even though ``on_session_end`` never returns."""
    called: list[str] = []

    async def hang(ctx: JobContext) -> None:
        await trio.sleep_forever()

    async def entrypoint(ctx: JobContext) -> str:
        ctx.on_session_end = hang
        ctx.add_shutdown_callback(lambda reason: called.append(reason))
        return "done"

    with trio.fail_after(1000):
        began = trio.current_time()
        result = await run_job(entrypoint, url="wss://fake", token="t",
                               open_room_fn=open_fake_room)
    assert result == "done" and called == ["entrypoint returned"]
    assert trio.current_time() - began == pytest.approx(300.0, abs=1.0)
