from __future__ import annotations

import pytest
import trio

from agents_trio.nurseries import TaskOwner, open_owner


async def _host(grace: float = 5.0, *, task_status=trio.TASK_STATUS_IGNORED):
    async with open_owner(grace=grace, name="host") as owner:
        task_status.started(owner)
        await trio.sleep_forever()


async def test_start_returns_started_value():
    async def child(x, *, task_status=trio.TASK_STATUS_IGNORED):
        task_status.started(x * 2)
        await trio.sleep(1)

    async with open_owner() as owner:
        assert await owner.start(child, 21) == 42
        assert not owner.closed
    assert owner.closed


async def test_normal_exit_waits_for_children(autojump_clock):
    done = []

    async def child():
        await trio.sleep(5)
        done.append(trio.current_time())

    async with open_owner() as owner:
        owner.start_soon(child, name="child")
    assert done == [pytest.approx(5)]
    assert owner.closed


async def test_aclose_runs_awaiting_shielded_cleanup(autojump_clock):
    log = []

    async def child(owner: TaskOwner):
        try:
            await trio.sleep_forever()
        finally:
            with owner.cleanup_scope():
                await trio.sleep(1)
                log.append(("cleaned", trio.current_time()))

    async with trio.open_nursery() as outer:
        owner = await outer.start(_host)
        owner.start_soon(child, owner)
        await trio.sleep(3)
        await owner.aclose()
        assert owner.closed
        assert log == [("cleaned", pytest.approx(4))]
        assert trio.current_time() == pytest.approx(4)


async def test_cleanup_is_bounded_by_grace(autojump_clock):
    log = []

    async def child(owner: TaskOwner):
        try:
            await trio.sleep_forever()
        finally:
            with owner.cleanup_scope():
                try:
                    await trio.sleep(100)
                    log.append("finished")
                finally:
                    log.append(("gave up", trio.current_time()))

    async with trio.open_nursery() as outer:
        owner = await outer.start(_host, 2)
        owner.start_soon(child, owner)
        await trio.sleep(1)
        await owner.aclose()
        assert log == [("gave up", pytest.approx(3))]
        assert trio.current_time() == pytest.approx(3)


async def test_aclose_and_cancel_idempotent_and_wait_closed():
    woke = []
    async with trio.open_nursery() as outer:
        owner = await outer.start(_host)

        async def waiter():
            await owner.wait_closed()
            woke.append(owner.closed)

        outer.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert woke == []
        owner.cancel()
        owner.cancel()
        await owner.aclose()
        await owner.aclose()
    assert woke == [True]


async def test_aclose_from_inside_raises_runtime_error():
    errors = []

    async def child(owner: TaskOwner):
        try:
            await owner.aclose()
        except RuntimeError as exc:
            errors.append(exc)
        async with trio.open_nursery() as inner:  # a grandchild is inside too
            inner.start_soon(grandchild, owner)

    async def grandchild(owner: TaskOwner):
        with pytest.raises(RuntimeError):
            await owner.aclose()
        errors.append("grandchild")

    async with open_owner() as owner:
        owner.start_soon(child, owner)
        await trio.testing.wait_all_tasks_blocked()
        with trio.CancelScope(shield=True), trio.fail_after(1):
            with pytest.raises(RuntimeError):
                await owner.aclose()  # from the body
        errors.append("body")
    assert len(errors) == 3 and isinstance(errors[0], RuntimeError)
    assert errors[1:] == ["grandchild", "body"]


async def test_aclose_from_nursery_nested_in_body_raises():
    errors = []

    async def nested(owner: TaskOwner):
        with pytest.raises(RuntimeError):
            await owner.aclose()
        errors.append("nested")

    async with open_owner() as owner:
        async with trio.open_nursery() as inner:
            inner.start_soon(nested, owner)
    assert errors == ["nested"]


async def test_aclose_from_task_of_enclosing_nursery_is_allowed():
    async with trio.open_nursery() as outer:
        async with open_owner() as owner:
            outer.start_soon(owner.aclose)
            await trio.sleep_forever()
    assert owner.closed


async def test_body_error_cancels_children():
    cancelled = []

    async def child():
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            cancelled.append(True)
            raise

    with pytest.RaisesGroup(ValueError):
        async with open_owner() as owner:
            owner.start_soon(child)
            await trio.testing.wait_all_tasks_blocked()
            raise ValueError("boom")
    assert cancelled == [True]
    assert owner.closed


async def test_child_error_propagates_as_group_and_cancels_body():
    reached = []

    async def child():
        raise KeyError("child")

    with pytest.RaisesGroup(KeyError):
        async with open_owner() as owner:
            owner.start_soon(child)
            await trio.sleep_forever()
            reached.append(True)
    assert reached == []
    assert owner.closed
