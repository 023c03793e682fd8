from __future__ import annotations

import contextvars

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio.nurseries import SerialWorker


def _worker_tasks(nursery: trio.Nursery) -> list[trio.lowlevel.Task]:
    return [t for t in nursery.child_tasks if t.name == "worker"]


class Recorder:
    """A handler that takes ``cost`` seconds per item and records what it handled."""

    def __init__(self, cost: float = 0.0) -> None:
        self.cost = cost
        self.handled: list[int] = []

    async def __call__(self, item: int) -> None:
        if self.cost:
            await trio.sleep(self.cost)
        self.handled.append(item)


async def test_items_are_handled_one_at_a_time_in_order(autojump_clock):
    log: list[tuple[str, str, float]] = []

    async def handle(item: str) -> None:
        log.append((item, "start", trio.current_time()))
        await trio.sleep(1)
        log.append((item, "end", trio.current_time()))

    async with trio.open_nursery() as nursery:
        worker = SerialWorker(handle, name="worker")
        worker.bind(nursery)
        worker.submit("a")
        worker.submit("b")
        assert worker.waiting == 2
        await trio.sleep(0.5)
        assert worker.waiting == 1  # "a" taken, "b" waits
        worker.submit("c")
        assert len(_worker_tasks(nursery)) == 1
    assert log == [("a", "start", 0), ("a", "end", 1), ("b", "start", 1), ("b", "end", 2),
                   ("c", "start", 2), ("c", "end", 3)]


async def test_no_task_runs_between_items(autojump_clock):
    handle = Recorder(0.1)
    handled = handle.handled

    async with trio.open_nursery() as nursery:
        worker = SerialWorker(handle, name="worker")
        worker.bind(nursery)
        assert _worker_tasks(nursery) == []
        worker.submit(1)
        assert len(_worker_tasks(nursery)) == 1
        await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(1)
        assert handled == [1] and _worker_tasks(nursery) == []
        worker.submit(2)
        await trio.sleep(1)
        assert handled == [1, 2] and _worker_tasks(nursery) == []


async def test_items_submitted_before_bind_start_with_it(autojump_clock):
    handle = Recorder()
    handled = handle.handled

    worker = SerialWorker(handle, name="worker")
    worker.submit(1)
    worker.submit(2)
    async with trio.open_nursery() as nursery:
        worker.bind(nursery)
    assert handled == [1, 2]


async def test_the_worker_runs_in_the_binders_context(autojump_clock):
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: list[str] = []

    async def handle(item: int) -> None:
        seen.append(var.get())

    worker = SerialWorker(handle, name="worker")

    async def submitter() -> None:
        var.set("submitter")
        worker.submit(1)

    async with trio.open_nursery() as nursery:
        var.set("binder")
        worker.bind(nursery)
        nursery.start_soon(submitter)
    assert seen == ["binder"]


async def test_close_refuses_new_items_and_handles_the_queued_ones(autojump_clock):
    handle = Recorder(1)
    handled = handle.handled

    async with trio.open_nursery() as nursery:
        worker = SerialWorker(handle, name="worker")
        worker.bind(nursery)
        worker.submit(1)
        worker.submit(2)
        worker.close()
        assert worker.closed
        with pytest.raises(trio.ClosedResourceError):
            worker.submit(3)
    assert handled == [1, 2]


async def test_cancelling_the_nursery_drops_the_items_not_taken(autojump_clock):
    handle = Recorder(1)
    handled = handle.handled

    async with trio.open_nursery() as nursery:
        worker = SerialWorker(handle, name="worker")
        worker.bind(nursery)
        for i in range(3):
            worker.submit(i)
        await trio.sleep(1.5)
        nursery.cancel_scope.cancel()
    assert handled == [0]
    assert worker.waiting == 1


async def test_an_error_ends_the_worker_into_the_nursery(autojump_clock):
    async def handle(item: int) -> None:
        raise ValueError(item)

    with pytest.RaisesGroup(ValueError):
        async with trio.open_nursery() as nursery:
            worker = SerialWorker(handle, name="worker")
            worker.bind(nursery)
            worker.submit(7)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["submit", "sleep"]),
                          st.floats(0, 0.3, allow_nan=False)), max_size=30),
       st.floats(0, 0.3, allow_nan=False))
def test_every_item_is_handled_once_in_order_never_two_at_once(steps, cost) -> None:
    async def main() -> None:
        handled: list[int] = []
        running = 0

        async def handle(item: int) -> None:
            nonlocal running
            running += 1
            assert running == 1
            await trio.sleep(cost)
            running -= 1
            handled.append(item)

        submitted: list[int] = []
        async with trio.open_nursery() as nursery:
            worker = SerialWorker(handle, name="worker")
            worker.bind(nursery)
            for kind, value in steps:
                if kind == "submit":
                    submitted.append(len(submitted))
                    worker.submit(submitted[-1])
                else:
                    await trio.sleep(value)
                assert len(_worker_tasks(nursery)) <= 1
        assert handled == submitted

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_an_item_submitted_after_the_nursery_closed_is_refused_not_kept():
    """The nursery the worker borrows has closed: the item is refused at ``submit`` (the
    nursery's own error) and not kept queued, where nothing would ever handle it."""
    recorder = Recorder()
    worker = SerialWorker(recorder, name="worker")
    async with trio.open_nursery() as nursery:
        worker.bind(nursery)
        worker.submit(1)
    assert recorder.handled == [1]
    with pytest.raises(RuntimeError, match="closed"):
        worker.submit(2)
    assert worker.waiting == 0
