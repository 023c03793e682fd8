"""SupervisedStream and AudioRecognition attacked: a stream failing at every point (opening,
``push_frame``, ``end_input``, its iteration, its closing), a reopen or the end of the input
at any moment, events produced inline by a push that reopen the stream.

Invariants: a frame reaches at most one incarnation and none after its input ended; no event
is handled after its incarnation ended; each incarnation is closed exactly once; each failure
is reported exactly once, with its own error; after the input ended no restart is waited for.
"""

from __future__ import annotations

import math
from contextlib import asynccontextmanager
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio.recognition import AudioRecognition
from agents_trio.recognition_streams import (RestartPolicy, StreamHooks, StreamState,
                                             SupervisedStream)
from agents_trio.testing.fake_io import FakeAudioInput
from recognition_fakes import ManualRecognizer, final, interim, vad_event
from test_recognition_input import Hooks


class Boom(Exception):
    """A model's failure, tagged with where it happened."""


class Incarnation:
    """One opened stream of a :class:`Model`, strict as LiveKit's: a push after its input
    ended or after it failed raises."""

    def __init__(self, model: Model, number: int) -> None:
        self.model = model
        self.number = number
        self.frames: list[int] = []
        self.frames_after_end: list[int] = []
        self.input_ended = False
        self.failed = False
        self.closed = 0
        self.on_push: list[Any] = []
        self._send, self._recv = trio.open_memory_channel[Any](math.inf)

    def push_frame(self, frame: Any) -> list[Any]:
        if self.closed:
            self.model.violations.append(f"frame pushed to closed incarnation {self.number}")
        if self.input_ended:
            self.frames_after_end.append(frame)
            raise Boom(f"push after end_input ({self.number})")
        if self.failed:
            raise Boom(f"push to a failed stream ({self.number})")
        if self.model.fail_push:
            self.model.fail_push -= 1
            self.failed = True
            raise Boom(f"push ({self.number})")
        self.frames.append(frame)
        events, self.on_push = self.on_push, []
        return events

    def end_input(self) -> None:
        if self.model.fail_end:
            self.model.fail_end -= 1
            self.failed = True
            raise Boom(f"end_input ({self.number})")
        self.input_ended = True
        if self.model.finish_on_end:
            self.finish()

    def finish(self) -> None:
        """No more events."""
        self._send.close()

    def send(self, ev: Any) -> None:
        self._send.send_nowait((self.number, ev))

    def fail(self) -> None:
        self._send.send_nowait(Boom(f"iteration ({self.number})"))

    def __aiter__(self) -> Incarnation:
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self._recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None
        if isinstance(item, BaseException):
            self.failed = True
            raise item
        return item


class Model:
    """A VAD/STT whose failures are set by the test: the next ``fail_open`` openings raise,
    the next ``fail_push`` pushes, ``fail_end`` ends of input, ``fail_close`` closings (each
    after ``close_delay`` seconds)."""

    def __init__(self) -> None:
        self.incarnations: list[Incarnation] = []
        self.fail_open = 0
        self.fail_push = 0
        self.fail_end = 0
        self.fail_close = 0
        self.open_delay = 0.0
        self.close_delay = 0.0
        self.finish_on_end = True   # the stream finishes its events when its input ends
        self.violations: list[str] = []

    @property
    def current(self) -> Incarnation:
        return self.incarnations[-1]

    @asynccontextmanager
    async def stream(self) -> Any:
        await trio.sleep(self.open_delay)
        if self.fail_open:
            self.fail_open -= 1
            raise Boom("open")
        inc = Incarnation(self, len(self.incarnations))
        self.incarnations.append(inc)
        try:
            yield inc
        finally:
            inc.closed += 1
            with trio.CancelScope(shield=True):
                await trio.sleep(self.close_delay)
            if self.fail_close:
                self.fail_close -= 1
                raise Boom(f"close ({inc.number})")


class Report:
    def __init__(self, model: Model) -> None:
        self.model = model
        self.events: list[tuple[int, Any]] = []
        self.errors: list[BaseException] = []
        self.given_up: list[BaseException] = []
        self.lost = 0
        self.on_event_hook: Any = None

    def hooks(self) -> StreamHooks:
        return StreamHooks(on_event=self._on_event, on_lost=self._on_lost,
                           on_error=self.errors.append, on_given_up=self.given_up.append)

    def _on_event(self, ev: tuple[int, Any]) -> None:
        number, payload = ev
        if self.model.incarnations[number].closed:
            self.model.violations.append(f"event {payload} of closed incarnation {number}")
        self.events.append(ev)
        if self.on_event_hook is not None:
            self.on_event_hook(ev)

    def _on_lost(self) -> None:
        self.lost += 1


def _supervised(model: Model, report: Report, **policy: Any) -> SupervisedStream:
    return SupervisedStream(model.stream, hooks=report.hooks(),
                            policy=RestartPolicy(**policy), name="STT")


# -- frames after the end of the input ----------------------------------------------------------
async def test_a_frame_pushed_after_the_end_of_input_reaches_no_stream(autojump_clock):
    model = Model()
    model.finish_on_end = False
    report = Report(model)
    stream = _supervised(model, report)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            model.current.send("before")
            stream.push_frame(1)   # type: ignore[arg-type]
            await trio.sleep(0.1)
            # the stream's input ends, but its events still come (a final transcript)
            stream.end_input()
            stream.push_frame(2)   # type: ignore[arg-type]  # e.g. a flush with silence
            await trio.sleep(0.1)
            assert stream.state is StreamState.OPEN   # still finishing its events
            model.current.send("after")
            model.current.finish()
    assert model.current.frames == [1] and model.current.frames_after_end == []
    assert report.errors == [] and report.lost == 0
    assert [p for _, p in report.events] == ["before", "after"]
    assert len(model.incarnations) == 1 and model.violations == []


async def test_flushing_the_stt_after_the_input_ended_is_no_failure_of_an_stt_node(
        autojump_clock):
    """commit_user_turn with the input detached flushes the STT with silence: when the input
    has ended, the STT's input has ended too and the flush must not reach it (an overridden
    ``stt_node``'s frame channel is closed: a push raises)."""
    heard: list[Any] = []
    events_send, events_recv = trio.open_memory_channel[Any](math.inf)

    async def stt_node(frames):
        async def drain() -> None:
            async for frame in frames:
                heard.append(frame)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain)
            async for ev in events_recv:
                yield ev

    hooks = Hooks()
    audio = FakeAudioInput()
    recognition = AudioRecognition(hooks, vad=None, stt=ManualRecognizer(),  # type: ignore
                                   stt_node=stt_node)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            await recognition.start(nursery, audio)
            audio.push(0.1)
            events_send.send_nowait(interim("hello"))
            await trio.sleep(0.1)
            audio.close()   # the user's track ended: the STT's input ends
            await trio.sleep(0.1)
            assert recognition.input_detached

            async def finalize_later() -> None:
                await trio.sleep(0.3)
                events_send.send_nowait(final("hello there"))

            nursery.start_soon(finalize_later)
            transcript = await recognition.commit_user_turn(
                transcript_timeout=2.0, stt_flush_duration=0.5, skip_reply=True,
                audio_detached=recognition.input_detached)
            nursery.cancel_scope.cancel()
    assert hooks.errors == []
    assert transcript == "hello there"


# -- a failure while closing, and failures that meet ---------------------------------------------
async def test_a_failed_incarnation_being_closed_takes_no_frame_and_keeps_its_own_error(
        autojump_clock):
    model = Model()
    model.close_delay = 1.0   # the failed stream takes a second to close
    report = Report(model)
    stream = _supervised(model, report)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            model.current.fail()
            await trio.sleep(0.5)          # the first incarnation is being closed
            stream.push_frame(1)   # type: ignore[arg-type]
            await trio.sleep(2.0)
            assert stream.state is StreamState.OPEN
            stream.push_frame(2)   # type: ignore[arg-type]
            stream.end_input()
    assert [str(e) for e in report.errors] == ["iteration (0)"]
    assert model.incarnations[0].frames == [] and model.incarnations[1].frames == [2]
    assert [i.closed for i in model.incarnations] == [1, 1]


async def test_a_stream_failing_as_a_reopen_closes_it_is_reported(autojump_clock):
    model = Model()
    model.fail_close = 1
    report = Report(model)
    stream = _supervised(model, report)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            stream.reopen()   # e.g. the user turn cleared: the STT's buffer dropped
            await trio.sleep(2.0)
            assert stream.state is StreamState.OPEN
            stream.end_input()
    assert [str(e) for e in report.errors] == ["close (0)"]
    assert report.lost == 1
    assert len(model.incarnations) == 2


async def test_an_event_that_reopens_the_stream_ends_the_pushs_events(autojump_clock):
    model = Model()
    report = Report(model)
    stream = _supervised(model, report)

    def on_event(ev: tuple[int, Any]) -> None:
        if ev[1] == "clear":
            stream.reopen()   # a handler clears the user turn (restart_stt)

    report.on_event_hook = on_event
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            model.current.on_push = [(0, "clear"), (0, "stale")]
            stream.push_frame(1)   # type: ignore[arg-type]
            await trio.sleep(0.1)
            stream.end_input()
    assert [p for _, p in report.events] == ["clear"]   # "stale" came from the dropped stream
    assert report.errors == [] and len(model.incarnations) == 2


# -- no restart for an ended input ---------------------------------------------------------------
async def test_the_end_of_input_while_a_failed_stream_closes_waits_for_no_restart(
        autojump_clock):
    model = Model()
    model.close_delay = 0.2
    report = Report(model)
    stream = _supervised(model, report)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            model.current.fail()
            await trio.sleep(0.1)   # being closed
            stream.end_input()
        assert trio.current_time() < 0.5   # the run ended without a backoff
    assert [str(e) for e in report.errors] == ["iteration (0)"]
    assert len(model.incarnations) == 1


async def test_the_end_of_input_while_opening_fails_waits_for_no_restart(autojump_clock):
    model = Model()
    model.open_delay = 0.2
    report = Report(model)
    stream = _supervised(model, report)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(stream.run)
            model.current.fail()
            model.fail_open = 1
            await trio.sleep(0.6)   # the restart is opening
            stream.end_input()
        assert trio.current_time() < 1.0   # no second backoff
    assert [str(e) for e in report.errors] == ["iteration (0)", "open"]
    assert len(model.incarnations) == 1


# -- any interleaving ----------------------------------------------------------------------------
ACTIONS = st.lists(st.one_of(
    st.tuples(st.just("push"), st.integers(0, 2)),          # events the push returns
    st.tuples(st.just("send"), st.integers(1, 2)),          # events through the iteration
    st.tuples(st.just("sleep"), st.sampled_from([0.0, 0.05, 0.3, 0.6, 1.5])),
    st.tuples(st.sampled_from(["fail_iter", "fail_push", "fail_end", "fail_open",
                               "fail_close", "reopen", "reopen_inline", "end"]),
              st.just(0)),
), max_size=30)


@settings(max_examples=250, deadline=None)
@given(actions=ACTIONS, open_delay=st.sampled_from([0.0, 0.1]),
       close_delay=st.sampled_from([0.0, 0.1]), max_failures=st.integers(0, 3))
def test_any_interleaving_keeps_the_invariants(actions, open_delay, close_delay,
                                               max_failures) -> None:
    async def main() -> None:
        model = Model()
        model.open_delay, model.close_delay = open_delay, close_delay
        report = Report(model)
        stream = _supervised(model, report, max_failures=max_failures)
        pushed: list[int] = []
        ended_at: int | None = None
        reopen_on_next_event = False

        def on_event(ev: tuple[int, Any]) -> None:
            nonlocal reopen_on_next_event
            if reopen_on_next_event:
                reopen_on_next_event = False
                stream.reopen()

        report.on_event_hook = on_event
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                await nursery.start(stream.run)
                for kind, arg in actions:
                    if kind == "push":
                        frame = len(pushed)
                        pushed.append(frame)
                        if (stream.state is StreamState.OPEN and model.incarnations
                                and not model.current.closed):
                            model.current.on_push = [
                                (model.current.number, f"p{frame}.{i}") for i in range(arg)]
                        stream.push_frame(frame)   # type: ignore[arg-type]
                    elif kind == "send":
                        if model.incarnations and not model.current.closed:
                            for i in range(arg):
                                try:
                                    model.current.send(f"s{i}")
                                except trio.ClosedResourceError:
                                    pass
                    elif kind == "sleep":
                        await trio.sleep(arg)
                    elif kind == "fail_iter":
                        if model.incarnations and not model.current.closed:
                            try:
                                model.current.fail()
                            except trio.ClosedResourceError:
                                pass
                    elif kind == "fail_push":
                        model.fail_push += 1
                    elif kind == "fail_end":
                        model.fail_end += 1
                    elif kind == "fail_open":
                        model.fail_open += 1
                    elif kind == "fail_close":
                        model.fail_close += 1
                    elif kind == "reopen":
                        stream.reopen()
                    elif kind == "reopen_inline":
                        reopen_on_next_event = True
                    elif kind == "end" and ended_at is None:
                        ended_at = len(pushed)
                        stream.end_input()
                if ended_at is None:
                    ended_at = len(pushed)
                    stream.end_input()
                t_end = trio.current_time()
                # bounded: the last incarnation finishes its events and closes; no restart
                # is waited for after the end of the input
                with trio.move_on_after(1.0):
                    while stream.state is not StreamState.ENDED:
                        await trio.sleep(0.01)
                if stream.state is not StreamState.ENDED:
                    nursery.cancel_scope.cancel()
                    raise AssertionError("the stream did not end after the end of its input")
                assert trio.current_time() - t_end < 1.0
        # every frame to at most one incarnation, none after the end of the input
        seen: list[int] = []
        for inc in model.incarnations:
            seen.extend(inc.frames)
            assert inc.frames_after_end == [], (inc.number, inc.frames_after_end)
            assert inc.closed == 1, (inc.number, inc.closed)
        assert len(seen) == len(set(seen))
        assert all(f < ended_at for f in seen)
        assert model.violations == []
        # each failure reported once: errors name distinct failures
        messages = [str(e) for e in report.errors]
        per_incarnation = [m for m in messages if m != "open"]
        assert len(per_incarnation) == len(set(per_incarnation)), messages
        assert report.lost == len(report.errors)
        assert len(report.given_up) <= 1

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


# -- the whole recognition: any interleaving, then the session's close ---------------------------
class RecordingHooks(Hooks):
    def __init__(self) -> None:
        super().__init__()
        self.given_up: list[BaseException] = []

    def on_recognition_given_up(self, error: BaseException, source: object) -> None:
        self.given_up.append(error)


SESSION_ACTIONS = st.lists(st.one_of(
    st.sampled_from(["push", "push", "speech", "silence", "final", "interim", "clear",
                     "close_input", "disable", "enable"]),
    st.tuples(st.sampled_from(["vad", "stt"]),
              st.sampled_from(["fail_iter", "fail_push", "fail_end", "fail_open",
                               "fail_close"])),
    st.sampled_from([0.0, 0.1, 0.7, 2.5]),
), max_size=25)


@settings(max_examples=150, deadline=None)
@given(actions=SESSION_ACTIONS, close_delay=st.sampled_from([0.0, 0.1]),
       attachable=st.booleans())
def test_the_recognition_under_any_interleaving_hears_again_and_closes_cleanly(
        actions, close_delay, attachable) -> None:
    async def main() -> None:
        vad, stt = Model(), Model()
        vad.close_delay = stt.close_delay = close_delay
        stt.finish_on_end = False   # an STT keeps its events coming until closed
        hooks = RecordingHooks()
        audio = FakeAudioInput(attachable=attachable)
        recognition = AudioRecognition(hooks, vad=vad, stt=stt,  # type: ignore[arg-type]
                                       restart_policy=RestartPolicy(max_failures=2))
        input_closed = False
        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                await recognition.start(nursery, audio)
                for action in actions:
                    if isinstance(action, float):
                        await trio.sleep(action)
                    elif isinstance(action, tuple):
                        model = vad if action[0] == "vad" else stt
                        if action[1] == "fail_iter":
                            if model.incarnations and not model.current.closed:
                                try:
                                    model.current._send.send_nowait(Boom("iteration"))
                                except trio.ClosedResourceError:
                                    pass
                        else:
                            setattr(model, action[1], getattr(model, action[1]) + 1)
                    elif action == "push" and not input_closed:
                        audio.push(0.1)
                    elif action in ("speech", "silence") and vad.incarnations:
                        kind = "start_of_speech" if action == "speech" else "end_of_speech"
                        vad.current.on_push = [vad_event(kind, speech=0.1)]
                    elif action in ("final", "interim") and stt.incarnations:
                        ev = final("words") if action == "final" else interim("wor")
                        try:
                            stt.current._send.send_nowait(ev)
                        except trio.ClosedResourceError:
                            pass
                    elif action == "clear":
                        recognition.clear_user_turn(restart_stt=True)
                    elif action == "close_input" and not input_closed:
                        input_closed = True
                        audio.close()
                    elif action in ("disable", "enable"):
                        recognition.set_input_enabled(action == "enable")
                # no deaf agent: once the backoff is over, a stream not given up hears again
                await trio.sleep(6.0)
                recognition.set_input_enabled(True)
                for model in (vad, stt):
                    # a push failure armed by the actions but not met by any push would fail
                    # the probe's own frame: the probe asks about recovery, not a new fault
                    model.fail_push = 0
                if not input_closed:
                    for model, supervised in ((vad, recognition._vad_stream),
                                              (stt, recognition._stt_stream)):
                        assert supervised is not None
                        if supervised.state is not StreamState.ENDED:
                            assert supervised.state is StreamState.OPEN
                    before = [len(m.current.frames) if m.incarnations else 0
                              for m in (vad, stt)]
                    audio.push(0.1)
                    await trio.sleep(0.1)   # a pulled input takes it in its own task
                    for model, supervised, count in ((vad, recognition._vad_stream, before[0]),
                                                     (stt, recognition._stt_stream, before[1])):
                        assert supervised is not None
                        if supervised.state is StreamState.OPEN:
                            assert len(model.current.frames) == count + 1
                # the session closes: the trailing turn, then everything is cancelled
                await recognition.finish_user_turn(1.0)
                nursery.cancel_scope.cancel()
            assert len(nursery.child_tasks) == 0
        for model in (vad, stt):
            assert model.violations == []
            for inc in model.incarnations:
                assert inc.closed == 1
                assert inc.frames_after_end == []
        assert not [e for e in hooks.errors if "after end_input" in str(e)]
        assert len({id(e) for e in hooks.errors}) == len(hooks.errors)   # each once
        assert len(hooks.given_up) <= 2

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
