"""The hosted job executor on its own (LiveKit's ``JobExecutor`` protocol), on a plain asyncio
loop with an entrypoint that only records: every way a job ends is seen once by ``join`` and
gives a status. The pool with LiveKit's own ``AgentServer`` is in tests/test_worker.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("livekit.agents", reason="hosted jobs need livekit-agents")

from livekit.agents.ipc.job_executor import JobStatus

from agents_trio.hosted_jobs import HostedJob


class Entrypoint:
    def __init__(self, outcome: str) -> None:
        self.outcome = outcome
        self.calls: list[str] = []
        self.cancelled = False

    async def run_hosted(self, info: Any, *, proc: Any, inference_executor: Any) -> None:
        self.calls.append(info.job.id)
        if self.outcome == "raise":
            raise RuntimeError("the entrypoint failed")
        if self.outcome == "wait":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise


def info(job_id: str = "AJ_1") -> Any:
    return SimpleNamespace(job=SimpleNamespace(id=job_id, room=SimpleNamespace(name="room")))


async def launched(entrypoint: Entrypoint, setup: Any = None) -> HostedJob:
    job = HostedJob(entrypoint=entrypoint, setup=setup, inference_executor=None,
                    http_proxy=None, initialize_timeout=5)
    await job.start()
    await job.initialize()
    await job.launch_job(info())
    return job


@pytest.mark.parametrize(("outcome", "status"), [("return", JobStatus.SUCCESS),
                                                 ("raise", JobStatus.FAILED)])
def test_a_job_that_ends_by_itself_is_joined_with_its_status(outcome: str,
                                                             status: JobStatus) -> None:
    async def main() -> None:
        entrypoint = Entrypoint(outcome)
        job = await launched(entrypoint)
        assert job.status is JobStatus.RUNNING and job.running_job is not None
        await asyncio.wait_for(job.join(), 5)
        assert job.status is status and entrypoint.calls == ["AJ_1"]

    asyncio.run(main())


@pytest.mark.parametrize("moment", ["before its first step", "while it runs"])
def test_closing_a_job_at_any_moment_ends_it_once_as_a_shutdown(moment: str) -> None:
    async def main() -> None:
        entrypoint = Entrypoint("wait")
        job = await launched(entrypoint)
        if moment == "while it runs":
            await asyncio.sleep(0)
            assert entrypoint.calls == ["AJ_1"]
        await job.aclose()  # in this task: it cancels before the job's task is stepped
        await asyncio.wait_for(job.join(), 5)
        assert job.status is JobStatus.SUCCESS
        assert entrypoint.cancelled == (moment == "while it runs")
        with pytest.raises(RuntimeError, match="already runs"):
            await job.launch_job(info("AJ_2"))

    asyncio.run(main())


def test_cancelling_the_closer_cancels_only_its_wait() -> None:
    async def main() -> None:
        entrypoint = Entrypoint("wait")
        job = await launched(entrypoint)
        await asyncio.sleep(0)
        closer = asyncio.ensure_future(job.aclose())
        await asyncio.sleep(0)
        closer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closer
        await asyncio.wait_for(job.join(), 5)  # the job still ended
        assert entrypoint.cancelled

    asyncio.run(main())


def test_setup_runs_in_a_worker_thread_and_a_failed_one_leaves_the_job_unlaunchable() -> None:
    import threading

    threads: list[int] = []

    def setup(proc: Any) -> None:
        threads.append(threading.get_ident())
        raise ValueError("no model")

    async def main() -> None:
        job = HostedJob(entrypoint=Entrypoint("return"), setup=setup, inference_executor=None,
                        http_proxy=None, initialize_timeout=5)
        await job.start()
        with pytest.raises(ValueError, match="no model"):
            await job.initialize()
        assert threads and threads[0] != threading.get_ident()
        with pytest.raises(RuntimeError, match="not initialized"):
            await job.launch_job(info())

    asyncio.run(main())
