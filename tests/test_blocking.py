"""agents_trio.blocking: blocking models in a worker thread or process, bounded queues.

These tests use real threads and processes, so they run on the real clock; every wait is
bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
import trio

from agents_trio.blocking import BlockingWorkerError, open_blocking_worker, run_blocking

MODES = ["thread", "process"]


def spin(seconds: float) -> None:
    """Hold the CPU (and the GIL, in pure Python) for ``seconds``."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Doubler:
    """A stateful step: doubles items, counts them, reports where it ran."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, item: int) -> list[tuple[int, int, int]]:
        if item < 0:
            raise ValueError(f"negative item {item}")
        self.count += 1
        return [(item * 2, os.getpid(), threading.get_ident())]

    def finish(self) -> list[tuple[int, int, int]]:
        return [(-self.count, os.getpid(), threading.get_ident())]


def make_doubler() -> Doubler:
    return Doubler()


def make_spinner() -> object:
    def step(seconds: float) -> list[float]:
        spin(seconds)
        return [seconds]
    return step


# A step that blocks until the test releases it (thread mode; in a child process the event is
# the child's own and is never set, so the step never ends there).
STARTED, RELEASE, FINISHED = threading.Event(), threading.Event(), threading.Event()


def make_blocker() -> object:
    def step(item: object) -> list[object]:
        STARTED.set()
        RELEASE.wait()
        FINISHED.set()
        return [item]
    return step


def make_broken() -> object:
    raise RuntimeError("no model weights")


def make_exiter() -> object:
    def step(item: int) -> list[int]:
        os._exit(3)
    return step


@pytest.mark.parametrize("mode", MODES)
async def test_items_in_order_then_finish_off_the_loop(mode: str) -> None:
    with trio.fail_after(30):
        async with open_blocking_worker(make_doubler, mode=mode) as worker:  # type: ignore[arg-type]
            for i in range(5):
                await worker.send(i)
            worker.end_input()
            results = [r async for r in worker]
    assert [r[0] for r in results] == [0, 2, 4, 6, 8, -5]
    # Structure: the step ran in the worker, never in the loop's thread.
    if mode == "thread":
        assert {r[2] for r in results}.isdisjoint({threading.get_ident()})
        assert {r[1] for r in results} == {os.getpid()}
    else:
        assert os.getpid() not in {r[1] for r in results}


@pytest.mark.parametrize("mode", MODES)
async def test_cpu_bound_step_does_not_stall_the_loop(mode: str) -> None:
    """A step holding the CPU for 0.6 s: the loop keeps ticking (generous bound)."""
    gaps: list[float] = []

    async def ticker(task_status: trio.TaskStatus[None]) -> None:
        last = time.perf_counter()
        task_status.started()
        while True:
            await trio.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    with trio.fail_after(30):
        async with open_blocking_worker(make_spinner, mode=mode) as worker:  # type: ignore[arg-type]
            async with trio.open_nursery() as nursery:
                await nursery.start(ticker)
                await worker.send(0.6)
                assert await worker.receive() == 0.6
                nursery.cancel_scope.cancel()
    assert len(gaps) > 20  # the loop ran all along
    # A thread holding the GIL still lets the loop in every switch interval (5 ms); a process
    # takes nothing from it. The bound is generous: CPUs are shared with other test runs.
    assert max(gaps) < 0.25, max(gaps)


@pytest.mark.parametrize("mode", MODES)
async def test_step_error_surfaces_after_earlier_outputs(mode: str) -> None:
    with trio.fail_after(30):
        async with open_blocking_worker(make_doubler, mode=mode) as worker:  # type: ignore[arg-type]
            await worker.send(1)
            await worker.send(-1)
            assert (await worker.receive())[0] == 2
            with pytest.raises(BlockingWorkerError) as info:
                await worker.receive()
            assert isinstance(info.value.__cause__, ValueError)
            assert "negative item -1" in str(info.value.__cause__)
            with pytest.raises(BlockingWorkerError):
                await worker.send(2)


@pytest.mark.parametrize("mode", MODES)
async def test_factory_error_surfaces(mode: str) -> None:
    with trio.fail_after(30):
        async with open_blocking_worker(make_broken, mode=mode) as worker:  # type: ignore[arg-type]
            with pytest.raises(BlockingWorkerError) as info:
                await worker.receive()
    assert "no model weights" in repr(info.value.__cause__)


async def test_dead_process_surfaces() -> None:
    with trio.fail_after(30):
        async with open_blocking_worker(make_exiter, mode="process") as worker:  # type: ignore[arg-type]
            await worker.send(1)
            with pytest.raises(BlockingWorkerError, match="died"):
                await worker.receive()


@pytest.mark.parametrize("mode", MODES)
async def test_backpressure_bounded_queue(mode: str) -> None:
    """The consumer does not receive: the worker stops after max_results outputs, the queue
    fills to max_pending, and send waits."""
    with trio.fail_after(30):
        async with open_blocking_worker(make_doubler, mode=mode, max_pending=3,  # type: ignore[arg-type]
                                        max_results=2) as worker:
            sent = 0
            with trio.move_on_after(1.5):
                while True:
                    await worker.send(sent)
                    sent += 1
            # 2 outputs buffered + 1 item in the worker's hands + 3 queued.
            assert sent == 6
            assert worker.pending == 3
            with pytest.raises(trio.WouldBlock):
                worker.send_nowait(99)
            assert (await worker.receive())[0] == 0
            assert (await worker.receive())[0] == 2
            with trio.fail_after(10):
                await worker.send(sent)  # room again


async def test_cancelling_a_thread_step_waits_for_it() -> None:
    """Cancelling mid-step in thread mode: a thread cannot be interrupted, so leaving the block
    waits for the step to end (the step ended before the block was left)."""
    for event in (STARTED, RELEASE, FINISHED):
        event.clear()

    async def release_once_everything_waits() -> None:
        await trio.testing.wait_all_tasks_blocked()
        RELEASE.set()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as scope:
                async with open_blocking_worker(make_blocker) as worker:  # type: ignore[arg-type]
                    await worker.send("item")
                    await trio.to_thread.run_sync(STARTED.wait)
                    nursery.start_soon(release_once_everything_waits)
                    scope.cancel()
                    await worker.receive()
            assert FINISHED.is_set()
    assert scope.cancelled_caught


async def test_cancelling_a_process_step_kills_the_child() -> None:
    """Cancelling while the child runs a step that never ends: the child is terminated, so the
    block is left at all, and nothing outlives it."""
    import multiprocessing
    with trio.fail_after(30):
        with trio.CancelScope() as scope:
            async with open_blocking_worker(make_blocker, mode="process") as worker:  # type: ignore[arg-type]
                await worker.send("item")
                scope.cancel()
                await worker.receive()
    assert scope.cancelled_caught
    assert not [p for p in multiprocessing.active_children() if p.is_alive()]


async def test_cancelled_send_and_receive_are_checkpoints() -> None:
    with trio.fail_after(30):
        async with open_blocking_worker(make_doubler, max_pending=0) as worker:  # type: ignore[arg-type]
            with trio.CancelScope() as scope:
                scope.cancel()
                await worker.receive()
            with trio.move_on_after(0.05):
                await worker.receive()
            await worker.send(1)
            assert (await worker.receive())[0] == 2


@pytest.mark.parametrize("mode", MODES)
async def test_run_blocking(mode: str) -> None:
    with trio.fail_after(30):
        assert await run_blocking(pow, 2, 10, mode=mode) == 1024  # type: ignore[arg-type]
        with pytest.raises(BlockingWorkerError) as info:
            await run_blocking(int, "x", mode=mode)  # type: ignore[arg-type]
    assert isinstance(info.value.__cause__, ValueError)
