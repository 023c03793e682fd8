"""SupervisedStream on its own: reopening, the bound, the end of input, cancellation."""

from __future__ import annotations

from contextlib import asynccontextmanager

import trio

from agents_trio import APIError
from agents_trio.recognition_streams import (RestartPolicy, StreamHooks, StreamState,
                                             SupervisedStream)
from agents_trio.io.audio import silence_frame
from recognition_fakes import ManualRecognizer


class Log:
    def __init__(self) -> None:
        self.entries: list[tuple[float, str, object]] = []

    def hooks(self) -> StreamHooks:
        def add(kind):
            return lambda *a: self.entries.append((trio.current_time(), kind, a[0] if a else None))

        return StreamHooks(on_event=add("event"), on_lost=add("lost"), on_error=add("error"),
                           on_given_up=add("given_up"))

    def kinds(self) -> list[str]:
        return [k for _, k, _ in self.entries]


def test_the_backoff_doubles_up_to_its_cap():
    policy = RestartPolicy(first_delay=0.5, max_delay=3.0)
    assert [policy.delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]


async def test_an_error_raised_inside_a_models_nursery_is_reported_unwrapped(autojump_clock):
    class NurseryModel:
        @asynccontextmanager
        async def stream(self):
            async with trio.open_nursery():
                yield Failing()

    class Failing:
        def push_frame(self, frame):
            pass

        def end_input(self):
            pass

        def __aiter__(self):
            return self

        async def __anext__(self):
            await trio.sleep(0.1)
            raise APIError("lost")

    log = Log()
    stream = SupervisedStream(NurseryModel().stream, hooks=log.hooks(),
                              policy=RestartPolicy(max_failures=0), name="STT")
    with trio.fail_after(10):
        await stream.run()
    (error,) = [e for _, k, e in log.entries if k == "error"]
    assert type(error) is APIError and str(error) == "lost"
    assert log.kinds() == ["error", "lost", "given_up"]
    assert stream.state is StreamState.ENDED


async def test_the_end_of_input_during_the_backoff_stops_the_restarts(autojump_clock):
    model = ManualRecognizer()
    log = Log()
    stream = SupervisedStream(model.stream, hooks=log.hooks(), policy=RestartPolicy(),
                              name="VAD")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            model.current.fail(APIError("lost"))
            await trio.sleep(0.1)
            assert stream.state is StreamState.RESTARTING
            stream.end_input()
        assert trio.current_time() < 0.5
    assert len(model.streams) == 1
    assert log.kinds() == ["error", "lost"]


async def test_the_end_of_input_ends_the_open_stream(autojump_clock):
    model = ManualRecognizer()
    stream = SupervisedStream(model.stream, hooks=Log().hooks(), policy=RestartPolicy(),
                              name="VAD")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            stream.push_frame(silence_frame(0.1))
            stream.end_input()
            assert model.current.input_ended
            model.current._send.close()   # the model finishes its events
    assert stream.state is StreamState.ENDED and len(model.streams) == 1


async def test_cancelling_the_owner_reports_nothing(autojump_clock):
    model = ManualRecognizer()
    log = Log()
    stream = SupervisedStream(model.stream, hooks=log.hooks(), policy=RestartPolicy(),
                              name="STT")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            await trio.sleep(1.0)
            nursery.cancel_scope.cancel()
    assert log.entries == []
    assert stream.state is StreamState.ENDED


async def test_a_handler_that_raises_counts_as_a_failure_without_delivery(autojump_clock):
    model = ManualRecognizer()
    errors: list[BaseException] = []
    given_up: list[BaseException] = []

    def broken(ev) -> None:
        raise ValueError("handler bug")

    hooks = StreamHooks(on_event=broken, on_lost=lambda: None, on_error=errors.append,
                        on_given_up=given_up.append)
    stream = SupervisedStream(model.stream, hooks=hooks, policy=RestartPolicy(max_failures=1),
                              name="STT")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            model.current.send("event")
            await trio.sleep(0.6)
            model.current.send("event")
    assert len(errors) == 2 and len(given_up) == 1


async def test_events_returned_by_a_push_are_handled_in_order_by_the_pushing_task(
        autojump_clock):
    model = ManualRecognizer()
    seen: list[tuple[str, object]] = []
    hooks = StreamHooks(
        on_event=lambda ev: seen.append((ev, trio.lowlevel.current_task())),
        on_lost=lambda: None, on_error=lambda e: None, on_given_up=lambda e: None)
    stream = SupervisedStream(model.stream, hooks=hooks, policy=RestartPolicy(), name="VAD")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            model.current.send("queued")
            await trio.sleep(0.1)
            model.current.on_push = ["first", "second"]
            stream.push_frame(silence_frame(0.02))
            me = trio.lowlevel.current_task()
            assert seen[1:] == [("first", me), ("second", me)]
            assert seen[0][0] == "queued" and seen[0][1] is not me
            stream.end_input()
            model.current._send.close()


async def test_a_handler_failing_on_a_pushed_event_restarts_the_stream(autojump_clock):
    model = ManualRecognizer()
    log = Log()
    errors: list[BaseException] = []

    def handle(ev) -> None:
        if ev == "bad":
            raise ValueError("handler bug")
        log.entries.append((trio.current_time(), "event", ev))

    hooks = StreamHooks(on_event=handle, on_lost=lambda: None, on_error=errors.append,
                        on_given_up=errors.append)
    stream = SupervisedStream(model.stream, hooks=hooks, policy=RestartPolicy(max_failures=1),
                              name="VAD")
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            for _ in range(3):   # an event delivered before each failure: never given up
                model.current.on_push = ["good", "bad", "never"]
                stream.push_frame(silence_frame(0.02))
                await trio.sleep(0.1)
                assert stream.state is StreamState.RESTARTING
                await trio.sleep(1.0)
                assert stream.state is StreamState.OPEN
            stream.end_input()
            model.current._send.close()
    assert [type(e) for e in errors] == [ValueError] * 3
    assert [e for _, _, e in log.entries] == ["good"] * 3
    assert len(model.streams) == 4
