from __future__ import annotations

import logging

import trio

from agents_trio.nurseries import EventFanout, FanoutEvent, FanoutStatistics


def test_callbacks_in_registration_order_and_off():
    fanout = EventFanout()
    calls = []
    first = fanout.on("x", lambda ev: calls.append(("first", ev)))

    @fanout.on("x")
    def second(ev):
        calls.append(("second", ev))

    fanout.on("y", lambda ev: calls.append(("y", ev)))
    assert fanout.statistics() == FanoutStatistics(callbacks=3, subscribers=0)
    fanout.emit("x", 1)
    assert calls == [("first", 1), ("second", 1)]
    fanout.off("x", first)
    fanout.off("x", first)  # absent: ignored
    calls.clear()
    fanout.emit("x", 2)
    fanout.emit("z", 3)
    assert calls == [("second", 2)]
    assert second.__name__ == "second"


def test_raising_callback_is_logged_and_isolated(caplog):
    fanout = EventFanout()
    calls = []

    def bad(ev):
        raise RuntimeError("bad callback")

    fanout.on("x", bad)
    fanout.on("x", calls.append)
    with caplog.at_level(logging.ERROR, logger="agents_trio"):
        fanout.emit("x", "ev")
    assert calls == ["ev"]
    [record] = [r for r in caplog.records if r.name == "agents_trio"]
    assert record.exc_info is not None and isinstance(record.exc_info[1], RuntimeError)


def test_changes_during_emit_apply_to_next_emit():
    fanout = EventFanout()
    calls = []

    def late(ev):
        calls.append(("late", ev))

    def first(ev):
        calls.append(("first", ev))
        fanout.on("x", late)
        fanout.off("x", second)

    def second(ev):
        calls.append(("second", ev))

    fanout.on("x", first)
    fanout.on("x", second)
    fanout.emit("x", 1)
    assert calls == [("first", 1), ("second", 1)]
    calls.clear()
    fanout.off("x", first)
    fanout.emit("x", 2)
    assert calls == [("late", 2)]


async def test_subscribers_receive_all_events_in_order_and_close_ends():
    fanout = EventFanout()
    fanout.emit("before", 0)
    received: dict[str, list[FanoutEvent]] = {"a": [], "b": []}

    async def consume(key, subscription):
        async with subscription as events:
            async for ev in events:
                received[key].append(ev)
        received[key].append("ended")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume, "a", fanout.subscribe())
        nursery.start_soon(consume, "b", fanout.subscribe())
        await trio.testing.wait_all_tasks_blocked()
        assert fanout.statistics().subscribers == 2
        for i in range(5):
            fanout.emit("x" if i % 2 else "y", i)
        fanout.close()
        fanout.emit("after", 99)
    expected = [FanoutEvent("x" if i % 2 else "y", i) for i in range(5)] + ["ended"]
    assert received == {"a": expected, "b": expected}
    assert expected[0].name == "y" and expected[0].event == 0
    assert fanout.statistics() == FanoutStatistics(callbacks=0, subscribers=0)
    late = fanout.on("after", received["a"].append)
    fanout.emit("after", 100)
    assert received["a"] == expected and late is not None


async def test_bounded_subscriber_drops_without_blocking():
    fanout = EventFanout()
    calls = []
    fanout.on("x", calls.append)
    async with fanout.subscribe(max_buffer=2) as bounded, fanout.subscribe() as unbounded:
        for i in range(5):
            fanout.emit("x", i)  # sync: would raise/hang if it blocked
        fanout.close()
        assert bounded.dropped == 3
        assert unbounded.dropped == 0
        assert [ev.event async for ev in bounded] == [0, 1]
        assert [ev.event async for ev in unbounded] == [0, 1, 2, 3, 4]
    assert calls == [0, 1, 2, 3, 4]


async def test_events_iterator_unsubscribes_on_break():
    fanout = EventFanout()
    got = []

    async def consume():
        async for ev in fanout.events():
            got.append(ev.event)
            if ev.event == 1:
                break

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.testing.wait_all_tasks_blocked()
        assert fanout.statistics().subscribers == 1
        fanout.emit("x", 0)
        fanout.emit("x", 1)
        fanout.emit("x", 2)
    assert got == [0, 1]
    assert fanout.statistics().subscribers == 0


async def test_events_iterator_ends_on_close_and_subscribe_after_close():
    fanout = EventFanout()
    done = []

    async def consume():
        async for _ in fanout.events():
            pass
        done.append(True)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.testing.wait_all_tasks_blocked()
        fanout.close()
    assert done == [True]
    assert [ev async for ev in fanout.events()] == []


async def test_closing_subscription_unsubscribes():
    fanout = EventFanout()
    subscription = fanout.subscribe()
    assert fanout.statistics().subscribers == 1
    await subscription.aclose()
    assert fanout.statistics().subscribers == 0
    fanout.emit("x", 1)  # must not raise
    assert [ev async for ev in subscription] == []


async def test_an_event_is_wanted_by_a_callback_for_its_name_or_any_subscriber():
    fanout = EventFanout()
    assert not fanout.wanted("x")
    cb = fanout.on("y", lambda ev: None)
    assert not fanout.wanted("x") and fanout.wanted("y")
    fanout.off("y", cb)
    assert not fanout.wanted("y")
    async with fanout.subscribe():
        assert fanout.wanted("x") and fanout.wanted("anything")
    assert not fanout.wanted("x")
    fanout.on("x", lambda ev: None)
    fanout.close()
    assert not fanout.wanted("x")   # closed: nothing is delivered any more
