"""A job's room and session at their transitions: the room dropping while the session's I/O is
being linked or the session starts, the job shutting down as the session closes; in virtual
time against a fake room (the agent's audio output is the SDK's, so the linking awaits it)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing
from livekit import rtc

from agents_trio import Agent, AgentSession
from agents_trio.job import JobContext, run_job
from agents_trio.llm import Toolset
from agents_trio.testing import FakeLLM, FakeRemoteParticipant, FakeRoom
from agents_trio.testing.fake_room import FakeLocalParticipant


class Entering(Agent):
    def __init__(self, *tools: Toolset) -> None:
        super().__init__(instructions="Be brief.", tools=list(tools))
        self.entered = 0

    async def on_enter(self) -> None:
        self.entered += 1


class DroppingWhilePublishing(FakeLocalParticipant):
    """The room drops while the agent's track is being published (the SDK's reply lost)."""

    async def publish_track(self, track: rtc.Track,
                            options: rtc.TrackPublishOptions | None = None) -> Any:
        """Record the track, then drop the room. Cancellation: never waits."""
        publication = await super().publish_track(track, options)
        self._room.drop()
        return publication


def room_opener(room: FakeRoom) -> Any:
    @asynccontextmanager
    async def open_room(url: str, token: str, **_: object) -> AsyncIterator[FakeRoom]:
        try:
            yield room
        finally:
            room.connected = False
    return open_room


async def test_the_room_dropping_while_the_session_is_linked_ends_the_job_unstarted(
        autojump_clock: trio.testing.MockClock) -> None:
    room = FakeRoom()
    room.local_participant = DroppingWhilePublishing(room, "agent")
    agent = Entering()

    async def entrypoint(ctx: JobContext) -> str | None:
        return await ctx.run_session(AgentSession(llm=FakeLLM()), agent)

    with trio.fail_after(5):
        reason = await run_job(entrypoint, url="wss://fake", token="t",
                               open_room_fn=room_opener(room))
    assert reason == "job_shutdown"
    assert agent.entered == 0


async def test_the_room_dropping_while_a_job_session_starts_closes_it_at_once(
        autojump_clock: trio.testing.MockClock) -> None:
    setup_began = trio.Event()

    class SlowSetup(Toolset):
        async def setup(self) -> Toolset:
            setup_began.set()
            await trio.sleep_forever()
            return self

    agent = Entering(SlowSetup(id="slow"))

    async def drop_in_setup(ctx: JobContext) -> None:
        await setup_began.wait()
        ctx.bridge.call_soon(ctx.room.drop)

    async def entrypoint(ctx: JobContext) -> tuple[str | None, float]:
        ctx.shutdown_grace = 3.0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drop_in_setup, ctx)
            began = trio.current_time()
            reason = await ctx.run_session(AgentSession(llm=FakeLLM()), agent)
            return reason, trio.current_time() - began

    with trio.fail_after(10):
        result = await run_job(entrypoint, url="wss://fake", token="t",
                               open_room_fn=room_opener(FakeRoom()))
    assert result is not None, "the entrypoint was cancelled after the grace"
    reason, seconds = result
    assert reason == "job_shutdown" and seconds < 1.0
    assert agent.entered == 0


async def test_a_shutdown_as_the_user_leaves_closes_the_session_once_and_calls_back_once(
        autojump_clock: trio.testing.MockClock) -> None:
    """``ctx.shutdown()`` in the same moment the user leaves: one close (the first reason
    wins), one run of the shutdown callbacks."""
    closes: list[str] = []
    called: list[str] = []
    user = FakeRemoteParticipant("user")

    async def entrypoint(ctx: JobContext) -> str | None:
        ctx.add_shutdown_callback(lambda reason: called.append(reason))
        session = AgentSession(llm=FakeLLM())
        session.on("close", lambda ev: closes.append(str(ev.reason)))
        ctx.bridge.call_soon(ctx.room.join, user)
        await ctx.wait_for_participant()

        async def leave_and_shut_down() -> None:
            await trio.sleep(1.0)
            ctx.bridge.call_soon(ctx.room.leave, user, rtc.DisconnectReason.CLIENT_INITIATED)
            await ctx.bridge.run_sync(lambda: None)   # the leave is on its way to the room I/O
            ctx.shutdown()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(leave_and_shut_down)
            return await ctx.run_session(session, Entering())

    with trio.fail_after(10):
        reason = await run_job(entrypoint, url="wss://fake", token="t",
                               open_room_fn=room_opener(FakeRoom()))
    assert len(closes) == 1 and closes == [reason]
    assert called == ["job_shutdown"]
