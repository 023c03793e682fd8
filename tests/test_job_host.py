"""The job host: one Trio run in its own thread that runs jobs submitted from asyncio loops of
other threads (LiveKit's job threads). These tests drive it from plain asyncio loops, as
LiveKit's job threads do; worker-level tests with LiveKit's AgentServer are in
tests/test_worker.py."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
import trio

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

from agents_trio.io.bridge import plain_asyncio_in_this_thread
from agents_trio.job_host import JobHost, JobHostError, LoopUtilisation


def run_asyncio(main: Callable[[], Coroutine[Any, Any, Any]], timeout: float = 20) -> Any:
    loop = asyncio.SelectorEventLoop()  # a plain asyncio loop, as in LiveKit's job threads
    try:
        return loop.run_until_complete(asyncio.wait_for(main(), timeout))
    finally:
        loop.close()


@pytest.fixture
def host() -> Any:
    h = JobHost(name="test job host")
    h.start()
    yield h
    h.close(10)


async def where() -> tuple[object, int]:
    await trio.lowlevel.checkpoint()
    return trio.lowlevel.current_trio_token(), threading.get_ident()


def test_jobs_from_many_threads_share_one_trio_run(host: JobHost) -> None:
    seen: list[tuple[object, int]] = []
    asyncio_threads: set[int] = set()
    all_alive = threading.Barrier(4)  # the four threads live at once (distinct idents)

    def job_thread() -> None:
        async def main() -> None:
            asyncio_threads.add(threading.get_ident())
            for _ in range(3):
                seen.append(await host.run(where))
        run_asyncio(main)
        all_alive.wait(30)

    threads = [threading.Thread(target=job_thread) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(seen) == 12 and len(asyncio_threads) == 4
    assert {token for token, _ in seen} == {host.run_token}
    assert len({ident for _, ident in seen}) == 1
    assert not {ident for _, ident in seen} & asyncio_threads
    assert host.jobs_started == 12 and host.jobs_running == 0


def test_a_failing_job_fails_its_caller_only(host: JobHost) -> None:
    async def fail() -> None:
        await trio.sleep(0.01)
        raise ValueError("boom")

    async def steady(release: trio.Event) -> str:
        await release.wait()
        return "done"

    async def main() -> None:
        release = trio.Event()
        other = asyncio.ensure_future(host.run(steady, release))
        with pytest.raises(ValueError, match="boom"):
            await host.run(fail)
        assert not other.done()
        # the failure did not disturb the run: a later job runs, then the steady one ends
        assert (await host.run(where))[0] is host.run_token
        assert host.run_token is not None
        trio_token = host.run_token
        assert isinstance(trio_token, trio.lowlevel.TrioToken)
        trio_token.run_sync_soon(release.set)
        assert await other == "done"

    run_asyncio(main)


def test_cancelling_one_caller_cancels_that_job_alone(host: JobHost) -> None:
    events: list[str] = []

    async def forever(name: str) -> None:
        try:
            await trio.sleep_forever()
        finally:
            events.append(f"{name} unwound")

    async def finishes(release: trio.Event) -> str:
        await release.wait()
        return "finished"

    async def main() -> None:
        release = trio.Event()
        doomed = asyncio.ensure_future(host.run(forever, "doomed"))
        kept = asyncio.ensure_future(host.run(finishes, release))
        while host.jobs_running < 2:
            await asyncio.sleep(0.01)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        assert events == ["doomed unwound"]  # waited for: the job had finished
        assert not kept.done()
        token = host.run_token
        assert isinstance(token, trio.lowlevel.TrioToken)
        token.run_sync_soon(release.set)
        assert await kept == "finished"

    run_asyncio(main)


def test_closing_the_host_ends_its_running_jobs() -> None:
    host = JobHost()
    host.start()
    unwound: list[bool] = []

    async def forever() -> None:
        try:
            await trio.sleep_forever()
        finally:
            unwound.append(True)

    async def main() -> None:
        job = asyncio.ensure_future(host.run(forever))
        while host.jobs_running < 1:
            await asyncio.sleep(0.01)
        await asyncio.get_running_loop().run_in_executor(None, host.close, 10.0)
        with pytest.raises(JobHostError, match="closed while the job ran"):
            await job
        with pytest.raises(JobHostError, match="closed"):
            await host.run(where)

    run_asyncio(main)
    assert unwound == [True] and host.closed


def test_a_host_closed_before_it_started_refuses_jobs() -> None:
    host = JobHost()
    host.close()
    with pytest.raises(JobHostError, match="closed"):
        host.start()


class ManualClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_utilisation_is_the_busy_share_of_the_window() -> None:
    clock = ManualClock()
    meter = LoopUtilisation(window=2.0, clock=clock)
    # 0.3 s busy, 0.7 s waiting for I/O, three times
    for _ in range(3):
        clock.now += 0.3
        meter.before_io_wait(1.0)
        clock.now += 0.7
        meter.after_io_wait(1.0)
        assert meter.load() == pytest.approx(0.3)
    # a long stretch without a wait (a blocked loop) counts as busy while it lasts
    clock.now += 2.0
    assert meter.load() == pytest.approx(1.0, abs=0.05)
    # then idle: the busy stretch leaves the window
    meter.before_io_wait(1.0)
    clock.now += 4.0
    assert meter.load() < 0.5
    clock.now += 4.0
    assert meter.load() == pytest.approx(0.0)


def test_utilisation_rejects_a_bad_window() -> None:
    with pytest.raises(ValueError, match="window"):
        LoopUtilisation(window=0)


def test_the_host_load_rises_while_its_loop_is_busy() -> None:
    host = JobHost(load_window=0.5)
    assert host.load() == 0.0  # not started
    host.start()
    try:
        async def spin(stop: trio.Event) -> None:
            while not stop.is_set():  # runnable all the time: the loop never idles
                await trio.lowlevel.checkpoint()

        async def main() -> tuple[float, float]:
            await asyncio.sleep(0.6)
            idle = host.load()
            stop = trio.Event()
            spinning = asyncio.ensure_future(host.run(spin, stop))
            await asyncio.sleep(0.6)
            busy = host.load()
            token = host.run_token
            assert isinstance(token, trio.lowlevel.TrioToken)
            token.run_sync_soon(stop.set)
            await spinning
            return idle, busy

        idle, busy = run_asyncio(main)
    finally:
        host.close(10)
    assert idle < 0.5 < busy


def test_plain_asyncio_in_this_thread_keeps_new_loops_plain() -> None:
    import trio_asyncio

    made: dict[str, type] = {}

    def thread(name: str, prepare: bool) -> None:
        if prepare:
            plain_asyncio_in_this_thread()
        loop = asyncio.new_event_loop()
        made[name] = type(loop)
        loop.close()

    for name, prepare in (("prepared", True), ("unprepared", False)):
        t = threading.Thread(target=thread, args=(name, prepare))
        t.start()
        t.join(10)
    assert not issubclass(made["prepared"], trio_asyncio.BaseTrioEventLoop)
    assert issubclass(made["unprepared"], trio_asyncio.BaseTrioEventLoop)


def _hold_the_start(monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, threading.Event]:
    """Hold every host's run after it began and before it takes jobs: ``(entered, release)``."""
    from contextlib import asynccontextmanager

    import agents_trio.job_host as job_host_module

    entered, release = threading.Event(), threading.Event()
    real_open_bridge = job_host_module.open_bridge

    @asynccontextmanager
    async def held_open_bridge() -> Any:
        entered.set()
        await trio.to_thread.run_sync(release.wait)
        async with real_open_bridge() as bridge:
            yield bridge

    monkeypatch.setattr(job_host_module, "open_bridge", held_open_bridge)
    return entered, release


def _wait_closed(host: JobHost, seconds: float = 10.0) -> bool:
    """Whether ``host`` ends within ``seconds`` without being told again (a thread test: its
    run is in a thread of its own, on the wall clock)."""
    ended = threading.Event()

    def watch() -> None:
        while not host.closed and not ended.is_set():
            ended.wait(0.01)
        ended.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    watcher.join(seconds)
    ended.set()
    return host.closed


def test_closing_while_the_host_starts_ends_it(monkeypatch: pytest.MonkeyPatch) -> None:
    entered, release = _hold_the_start(monkeypatch)
    host = JobHost()
    start_errors: list[BaseException] = []

    def start() -> None:
        try:
            host.start()
        except JobHostError as e:
            start_errors.append(e)

    starter = threading.Thread(target=start, daemon=True)
    starter.start()
    assert entered.wait(10)
    host.close(timeout=0)  # the run has begun and has nothing to cancel yet
    release.set()
    starter.join(10)
    assert _wait_closed(host), "the host closed while starting kept running"
    assert len(start_errors) == 1 and "closed" in str(start_errors[0])


def test_a_job_submitted_while_the_host_closes_is_refused_unrun() -> None:
    host = JobHost()
    host.start()
    ran: list[str] = []

    async def record(name: str) -> None:
        ran.append(name)
        await trio.sleep_forever()

    async def main() -> None:
        token = host.run_token
        assert isinstance(token, trio.lowlevel.TrioToken)
        closing = trio.Event()

        async def hold_the_close() -> None:
            # keeps the host's nursery open, cancelled, while the late job arrives
            try:
                await trio.sleep_forever()
            finally:
                closing.set()
                with trio.CancelScope(shield=True):
                    await trio.sleep(0.5)

        holder = asyncio.ensure_future(host.run(hold_the_close, name="holder"))
        while host.jobs_running < 1:
            await asyncio.sleep(0.01)
        closer = asyncio.get_running_loop().run_in_executor(None, host.close, 10.0)
        while not closing.is_set():
            await asyncio.sleep(0.01)
        with pytest.raises(JobHostError, match="closed"):
            await host.run(record, "late")
        await closer
        with pytest.raises(JobHostError):
            await holder

    run_asyncio(main)
    assert ran == [] and host.closed


async def fails_as_it_is_cancelled() -> None:
    """A job whose cancellation meets an error of its own: it ends with both (as a job with
    a nursery does when a child fails during the shutdown)."""
    try:
        await trio.sleep_forever()
    except trio.Cancelled as cancelled:
        raise BaseExceptionGroup("cancelled, and failed", [cancelled, RuntimeError("boom")])


def test_a_job_failing_as_its_caller_cancels_it_fails_alone(host: JobHost) -> None:
    async def main() -> None:
        doomed = asyncio.ensure_future(host.run(fails_as_it_is_cancelled))
        while host.jobs_running < 1:
            await asyncio.sleep(0.01)
        doomed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await doomed
        # the host runs on: its other jobs, and new ones
        assert (await host.run(where))[0] is host.run_token

    run_asyncio(main)
    assert host.started and host.jobs_running == 0


def test_a_job_failing_as_the_host_closes_hands_its_error_to_its_caller(
        caplog: pytest.LogCaptureFixture) -> None:
    host = JobHost(gc_young_threshold=None)
    host.start()

    async def main() -> None:
        job = asyncio.ensure_future(host.run(fails_as_it_is_cancelled))
        while host.jobs_running < 1:
            await asyncio.sleep(0.01)
        await asyncio.get_running_loop().run_in_executor(None, host.close, 10.0)
        with pytest.raises(RuntimeError, match="boom"):
            await job

    run_asyncio(main)
    assert host.closed
    assert "run failed" not in caplog.text  # the job's error ended the job, not the host
