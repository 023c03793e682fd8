"""A hosted job closed twice (LiveKit's termination of the job, then the worker's close of
its pool): the second close waits for the same shutdown, it does not cut the job's grace
short, so the executor ends only once the Trio job did. Real job host, fake room, wall
clock (well under a second)."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import pytest
import trio

pytest.importorskip("livekit.agents", reason="hosted jobs need livekit-agents")

from agents_trio import Agent, AgentSession
from agents_trio.hosted_jobs import HostedJob
from agents_trio.job import JobContext
from agents_trio.job_host import JobHost
from agents_trio.testing import FakeLLM, open_fake_room
from agents_trio.worker import TrioJobEntrypoint

UNWINDING = 0.3  # seconds the entrypoint takes to return once shut down


def info() -> Any:
    return SimpleNamespace(url="wss://fake", token="t",
                           job=SimpleNamespace(id="AJ_1", room=SimpleNamespace(name="room")))


def test_a_second_close_of_a_hosted_job_waits_for_the_same_shutdown() -> None:
    shut_down = threading.Event()
    finished = threading.Event()

    async def entrypoint(ctx: JobContext) -> None:
        ctx.add_shutdown_callback(shut_down.set)
        await ctx.run_session(AgentSession(llm=FakeLLM()), Agent(instructions="Be brief."))
        await trio.sleep(UNWINDING)  # the job's own unwinding, within its grace
        finished.set()

    host = JobHost(name="closed twice")
    host.start()

    async def main() -> None:
        job = HostedJob(entrypoint=TrioJobEntrypoint(entrypoint, open_room_fn=open_fake_room,
                                                     shutdown_grace=5.0, job_host=host),
                        setup=None, inference_executor=None, http_proxy=None,
                        initialize_timeout=5)
        await job.start()
        await job.initialize()
        await job.launch_job(info())
        while host.jobs_running == 0:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)  # the entrypoint runs
        terminating = asyncio.ensure_future(job.aclose())    # LiveKit's termination
        await asyncio.sleep(0.05)
        closing = asyncio.ensure_future(job.aclose())        # the pool's close
        await asyncio.wait_for(asyncio.gather(terminating, closing), 10)
        assert finished.is_set(), "the executor ended while its Trio job still shut down"

    try:
        asyncio.run(main())
    finally:
        host.close(10)
    assert shut_down.is_set()
