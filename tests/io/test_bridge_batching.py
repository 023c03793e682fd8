"""The bridge's loop runs ready asyncio callbacks in bounded batches (issue 13, item 2), and
``executor_jobs_on_loop`` keeps short executor jobs on the loop: order, fairness, errors,
cancellation and closing with work in flight.

These tests write asyncio code on purpose (it is what the bridge runs).
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import trio
import trio.testing

from agents_trio import open_bridge
from agents_trio.io.bridge import CALLBACKS_PER_STEP, executor_jobs_on_loop


# -- batches of callbacks -----------------------------------------------------------------------
async def test_queued_callbacks_run_in_the_order_they_were_scheduled() -> None:
    ran: list[int] = []
    async with open_bridge() as bridge:
        for i in range(5 * CALLBACKS_PER_STEP + 3):
            bridge.loop.call_soon(ran.append, i)
        await bridge.run_sync(lambda: None)
    assert ran == list(range(5 * CALLBACKS_PER_STEP + 3))


async def test_a_chain_of_callbacks_runs_in_one_trio_step() -> None:
    """Each callback schedules the next (as an asyncio hop does): the whole chain runs before
    Trio gets a turn, where trio-asyncio alone gave Trio a turn between each two."""
    steps_seen: list[int] = []
    trio_steps = 0

    async def count_trio_steps() -> None:
        nonlocal trio_steps
        while True:
            trio_steps += 1
            await trio.lowlevel.checkpoint()

    async with open_bridge() as bridge, trio.open_nursery() as nursery:
        nursery.start_soon(count_trio_steps)
        await bridge.run_sync(lambda: None)  # the loop's first turn began before the bridge
        done = trio.Event()

        def link(left: int) -> None:
            steps_seen.append(trio_steps)
            if left:
                bridge.loop.call_soon(link, left - 1)
            else:
                done.set()

        bridge.loop.call_soon(link, 7)
        await done.wait()
        nursery.cancel_scope.cancel()
    assert len(steps_seen) == 8
    assert len(set(steps_seen)) == 1, steps_seen


async def test_asyncio_code_scheduling_itself_leaves_trio_a_turn_every_batch() -> None:
    """A callback that keeps rescheduling itself runs at most CALLBACKS_PER_STEP times per turn
    of the loop's task; another Trio task runs once per scheduler round, and Trio may order the
    two differently from one round to the next, so at most two batches fall between two of its
    turns. Unbounded, all of them would."""
    runs_per_trio_step: dict[int, int] = {}
    trio_steps = 0
    total = 6 * CALLBACKS_PER_STEP

    async def count_trio_steps() -> None:
        nonlocal trio_steps
        while True:
            trio_steps += 1
            await trio.lowlevel.checkpoint()

    async with open_bridge() as bridge, trio.open_nursery() as nursery:
        nursery.start_soon(count_trio_steps)
        done = trio.Event()

        def spin(left: int) -> None:
            runs_per_trio_step[trio_steps] = runs_per_trio_step.get(trio_steps, 0) + 1
            if left:
                bridge.loop.call_soon(spin, left - 1)
            else:
                done.set()

        bridge.loop.call_soon(spin, total - 1)
        await done.wait()
        nursery.cancel_scope.cancel()
    assert sum(runs_per_trio_step.values()) == total
    assert max(runs_per_trio_step.values()) <= 2 * CALLBACKS_PER_STEP
    assert len(runs_per_trio_step) >= total // (2 * CALLBACKS_PER_STEP)


async def test_callbacks_queued_when_the_bridge_closes_still_run() -> None:
    ran: list[int] = []
    async with open_bridge() as bridge:
        for i in range(3 * CALLBACKS_PER_STEP):
            bridge.loop.call_soon(ran.append, i)
    assert ran == list(range(3 * CALLBACKS_PER_STEP))


async def test_timers_still_fire_between_batches(autojump_clock: trio.testing.MockClock
                                                 ) -> None:
    fired: list[float] = []
    async with open_bridge() as bridge:
        bridge.loop.call_later(1.0, lambda: fired.append(bridge.loop.time()))
        t0 = trio.current_time()
        for i in range(2 * CALLBACKS_PER_STEP):
            bridge.loop.call_soon(lambda: None)
        await trio.sleep(2.0)
    assert fired == [pytest.approx(t0 + 1.0)]


# -- executor jobs on the loop ----------------------------------------------------------------
async def test_jobs_of_tasks_created_inside_the_block_run_on_the_loop_thread() -> None:
    async def job_thread() -> str:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, lambda: threading.current_thread().name)

    def start() -> asyncio.Task[str]:
        with executor_jobs_on_loop():
            return asyncio.get_running_loop().create_task(job_thread())

    async with open_bridge() as bridge:
        inside = await bridge.run_sync(start)
        outside = await bridge.run(job_thread)
        on_loop = await bridge.run(lambda: inside)
    assert on_loop == threading.current_thread().name
    assert outside != threading.current_thread().name


async def test_a_job_on_the_loop_keeps_its_order_with_callbacks_and_returns_its_result() -> None:
    order: list[str] = []

    async def work() -> int:
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(None, lambda: order.append("job") or 42)
        loop.call_soon(order.append, "callback after")
        return await future

    def start() -> asyncio.Task[int]:
        with executor_jobs_on_loop():
            return asyncio.get_running_loop().create_task(work())

    async with open_bridge() as bridge:
        task = await bridge.run_sync(start)
        assert await bridge.run(lambda: task) == 42
    assert order == ["job", "callback after"]


async def test_a_failing_job_on_the_loop_raises_its_error_to_the_awaiting_task() -> None:
    def boom() -> None:
        raise ValueError("model failed")

    async def work() -> None:
        await asyncio.get_running_loop().run_in_executor(None, boom)

    def start() -> asyncio.Task[None]:
        with executor_jobs_on_loop():
            return asyncio.get_running_loop().create_task(work())

    async with open_bridge() as bridge:
        task = await bridge.run_sync(start)
        with pytest.raises(ValueError, match="model failed"):
            await bridge.run(lambda: task)
        assert bridge.statistics().loop_errors == 0


async def test_a_job_cancelled_before_its_turn_never_runs() -> None:
    ran: list[str] = []

    def submit_and_cancel() -> None:
        with executor_jobs_on_loop():
            future = asyncio.get_running_loop().run_in_executor(None, ran.append, "job")
        future.cancel()

    async with open_bridge() as bridge:
        await bridge.run_sync(submit_and_cancel)
        await bridge.run_sync(lambda: None)
        assert bridge.statistics().loop_errors == 0
    assert ran == []


# -- call_soon ------------------------------------------------------------------------------------
async def test_call_soon_still_refuses_coroutine_functions_and_coroutines() -> None:
    async def coroutine_function() -> None:
        pass

    def schedule(callback: object) -> None:
        asyncio.get_running_loop().call_soon(callback)  # type: ignore[arg-type]

    async with open_bridge() as bridge:
        with pytest.raises(TypeError, match="coroutine"):
            await bridge.run_sync(schedule, coroutine_function)
        coro = coroutine_function()
        try:
            with pytest.raises(TypeError, match="coroutine"):
                await bridge.run_sync(schedule, coro)
        finally:
            coro.close()


async def test_call_soon_keeps_order_and_context_for_builtin_and_python_callbacks() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    ran: list[object] = []

    def python_callback(tag: str) -> None:
        ran.append((tag, var.get()))

    def schedule() -> None:
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        context.run(var.set, "given")
        loop.call_soon(ran.append, "builtin 1")
        loop.call_soon(python_callback, "python", context=context)
        handle = loop.call_soon(ran.append, "cancelled")
        loop.call_soon(ran.append, "builtin 2")
        handle.cancel()

    async with open_bridge() as bridge:
        await bridge.run_sync(schedule)
        await bridge.run_sync(lambda: None)
    assert ran == ["builtin 1", ("python", "given"), "builtin 2"]


async def test_an_explicit_executor_is_still_used_inside_the_block() -> None:
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="explicit")

    async def work() -> str:
        return await asyncio.get_running_loop().run_in_executor(
            executor, lambda: threading.current_thread().name)

    def start() -> asyncio.Task[str]:
        with executor_jobs_on_loop():
            return asyncio.get_running_loop().create_task(work())

    async with open_bridge() as bridge:
        task = await bridge.run_sync(start)
        name = await bridge.run(lambda: task)
    await trio.to_thread.run_sync(executor.shutdown)
    assert name.startswith("explicit")
