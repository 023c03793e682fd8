from __future__ import annotations

import logging

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio.nurseries import EventFanout, FanoutEvent, FanoutStatistics, Subscription


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


async def test_a_subscription_made_during_an_emit_starts_with_the_next_event():
    """A callback that subscribes (to wait for what happens next) must not be handed the
    event it is reacting to: registrations changed during an emit take effect from the next
    emit, and a subscription receives what is emitted after it was created."""
    fanout = EventFanout()
    made: list[tuple[int, object]] = []
    fanout.on("x", lambda ev: made.append((ev, fanout.subscribe())))
    fanout.emit("x", 1)
    fanout.emit("x", 2)
    fanout.close()
    received = {}
    for ev, sub in made:
        received[ev] = [item.event async for item in sub]
    assert received == {1: [2], 2: []}


async def test_subscribers_see_a_nested_emit_after_the_emit_that_caused_it():
    """A callback that emits (a state change causing another): a subscriber receives the
    events in the order their emits began, cause before consequence."""
    fanout = EventFanout()
    subscription = fanout.subscribe()
    fanout.on("cause", lambda ev: fanout.emit("consequence", ev + 1))
    fanout.emit("cause", 1)
    fanout.close()
    assert [(item.name, item.event) async for item in subscription] == [
        ("cause", 1), ("consequence", 2)]


async def test_a_callback_closing_the_fanout_still_lets_subscribers_have_the_event():
    """The event being emitted when a callback closes the fan-out was emitted before the
    close: subscribers get it, then their iteration ends; later emits reach no one."""
    fanout = EventFanout()
    subscription = fanout.subscribe()
    fanout.on("x", lambda ev: fanout.close())
    fanout.emit("x", 1)
    fanout.emit("x", 2)
    assert [item.event async for item in subscription] == [1]


class _Watched:
    """A subscription the model follows: emits begun before it was made, and how it ended."""

    def __init__(self, subscription: Subscription, made_after: int) -> None:
        self.subscription = subscription
        self.made_after = made_after
        self.last: int | None = None   # the fan-out closed after this emit
        self.discarded = False         # the subscription itself was closed


_REACTIONS = st.sampled_from(["subscribe", "unsubscribe", "emit", "close", "raise", "nothing"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), _REACTIONS, st.integers(0, 5)),
                max_size=6),
       st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 9)), min_size=1,
                max_size=8),
       st.integers(0, 2))
def test_re_entrant_callbacks_never_change_what_a_subscriber_receives(reactions, emits,
                                                                      subscribed_first):
    """Callbacks that subscribe, close a subscription, emit or close the fan-out while an
    emit runs: each subscription receives exactly the events whose emit began after it was
    made, in the order those emits began; closing it discards what it held, closing the
    fan-out lets it drain what was emitted before."""
    async def main() -> None:
        fanout = EventFanout()
        emitted: list[int] = []          # each emit's number, in the order the emits began
        count = [0]
        subscriptions: list[_Watched] = []
        depth = [0]

        def emit(name: str) -> None:
            if depth[0] > 3:
                return
            depth[0] += 1
            count[0] += 1
            if not fanout.closed:
                emitted.append(count[0])
            fanout.emit(name, count[0])
            depth[0] -= 1

        def subscribe() -> None:
            subscriptions.append(_Watched(fanout.subscribe(), count[0]))

        for _ in range(subscribed_first):
            subscribe()
        for name, reaction, k in reactions:
            def callback(_: object, reaction: str = reaction, k: int = k) -> None:
                if reaction == "subscribe":
                    subscribe()
                elif reaction == "unsubscribe" and subscriptions:
                    entry = subscriptions[k % len(subscriptions)]
                    entry.discarded = True
                    entry.subscription.close()
                elif reaction == "emit":
                    emit("b" if k % 2 else "a")
                elif reaction == "close":
                    fanout.close()
                    for entry in subscriptions:
                        if entry.last is None:
                            entry.last = count[0]  # drains what was emitted up to here
                elif reaction == "raise":
                    raise RuntimeError("a callback fails")
            fanout.on(name, callback)
        for name, _ in emits:
            emit(name)
        fanout.close()
        for entry in subscriptions:
            got = [item.event async for item in entry.subscription]
            last = count[0] if entry.last is None else entry.last
            expected = [] if entry.discarded else [
                n for n in emitted if entry.made_after < n <= last]
            assert got == expected

    logging.disable(logging.CRITICAL)  # the raising callbacks are logged
    try:
        trio.run(main)
    finally:
        logging.disable(logging.NOTSET)
