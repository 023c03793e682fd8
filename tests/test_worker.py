"""Worker mode without a server: the job entrypoint adapter, driven by a fake LiveKit job
context on a plain asyncio loop (like LiveKit's job process), runs the Trio entrypoint in its
own thread with its own bridge and room. Registration with a real server is tested in
tests/test_livekit_server.py (needs LIVEKIT_URL)."""

from __future__ import annotations

import asyncio
import pickle
import socket
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from livekit import rtc

pytest.importorskip("livekit.agents", reason="worker mode needs livekit-agents")

from agents_trio import Agent, AgentSession
from agents_trio.io.room import RoomConnectError
from agents_trio.job import JobContext
from agents_trio.testing import FakeRemoteParticipant, open_fake_room
from agents_trio.worker import TrioJobEntrypoint, create_agent_server


class FakeLiveKitJobContext:
    """The part of ``livekit.agents.JobContext`` the adapter uses."""

    def __init__(self, url: str = "wss://fake", token: str = "t") -> None:
        self._info = SimpleNamespace(url=url, token=token, job=SimpleNamespace(id="AJ_test"))
        self.shutdowns: list[str] = []

    def shutdown(self, reason: str = "") -> None:
        self.shutdowns.append(reason)


def run_asyncio(coro: Any) -> Any:
    loop = asyncio.SelectorEventLoop()  # a plain asyncio loop, as in LiveKit's job process
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, 10))
    finally:
        loop.close()


class Recorder(Agent):
    exits: list[str] = []

    def __init__(self) -> None:
        super().__init__(instructions="hi")

    async def on_exit(self) -> None:
        Recorder.exits.append(trio.lowlevel.current_trio_token().__class__.__name__)


results: dict[str, Any] = {}


async def leaving_participant(ctx: JobContext) -> None:
    user = FakeRemoteParticipant("user")
    ctx.bridge.call_soon(ctx.room.join, user)
    await ctx.wait_for_participant()

    async def leave() -> None:
        await trio.sleep(0.05)
        ctx.bridge.call_soon(ctx.room.leave, user, rtc.DisconnectReason.CLIENT_INITIATED)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(leave)
        results["reason"] = await ctx.run_session(AgentSession(), Recorder())
    results["job_id"] = ctx.job_id


def test_a_dispatched_job_runs_the_trio_entrypoint_and_ends_the_job() -> None:
    job = FakeLiveKitJobContext()
    run_asyncio(TrioJobEntrypoint(leaving_participant, open_room_fn=open_fake_room)(job))
    assert results["reason"] == "participant_disconnected"
    assert results["job_id"] == "AJ_test"
    assert job.shutdowns == ["agents_trio entrypoint finished"]


async def session_forever(ctx: JobContext) -> None:
    await ctx.run_session(AgentSession(), Recorder())


def test_livekit_cancelling_the_job_closes_the_trio_session() -> None:
    Recorder.exits.clear()
    job = FakeLiveKitJobContext()

    async def main() -> None:
        task = asyncio.ensure_future(
            TrioJobEntrypoint(session_forever, open_room_fn=open_fake_room)(job))
        await asyncio.sleep(0.3)
        task.cancel()  # what LiveKit does when the job must end
        with pytest.raises(asyncio.CancelledError):
            await task

    run_asyncio(main())
    assert Recorder.exits == ["TrioToken"]  # on_exit ran, on the Trio thread
    assert job.shutdowns == ["agents_trio entrypoint cancelled"]


announce: dict[str, Any] = {}


async def session_announced(ctx: JobContext) -> None:
    """Tells the asyncio side (thread-safely) once the session listens; records its close."""
    session = AgentSession()
    session.on("close", lambda ev: results.__setitem__("close_reason", ev.reason))

    def on_state(ev: Any) -> None:
        if ev.new_state == "listening":
            announce["loop"].call_soon_threadsafe(announce["listening"].set)

    session.on("agent_state_changed", on_state)
    await ctx.run_session(session, Recorder())


def test_livekit_cancelling_the_job_closes_the_session_with_job_shutdown() -> None:
    """Issue 15, item 21: it closed with ``user_initiated``."""
    results.pop("close_reason", None)
    job = FakeLiveKitJobContext()

    async def main() -> None:
        announce["loop"] = asyncio.get_running_loop()
        announce["listening"] = asyncio.Event()
        task = asyncio.ensure_future(
            TrioJobEntrypoint(session_announced, open_room_fn=open_fake_room)(job))
        await announce["listening"].wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_asyncio(main())
    assert results["close_reason"] == "job_shutdown"
    assert job.shutdowns == ["agents_trio entrypoint cancelled"]


def test_a_job_that_cannot_connect_fails_with_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = FakeLiveKitJobContext(url=f"ws://127.0.0.1:{port}")
    with pytest.raises(RoomConnectError, match="unreachable"):
        run_asyncio(TrioJobEntrypoint(session_forever)(job))
    assert len(job.shutdowns) == 1 and "RoomConnectError" in job.shutdowns[0]


def test_the_entrypoint_adapter_pickles_for_the_process_pool() -> None:
    entry = TrioJobEntrypoint("examples/livekit_agent.py:entrypoint")
    clone = pickle.loads(pickle.dumps(entry))
    assert clone.entrypoint == entry.entrypoint
    assert pickle.loads(pickle.dumps(TrioJobEntrypoint(session_forever))).entrypoint is (
        session_forever)


def test_create_agent_server_registers_the_trio_entrypoint() -> None:
    server = create_agent_server("app:entrypoint", agent_name="support", ws_url="wss://x",
                                 api_key="k", api_secret="s")
    assert isinstance(server._entrypoint_fnc, TrioJobEntrypoint)
    assert server._entrypoint_fnc.entrypoint == "app:entrypoint"
    assert server._agent_name == "support"
