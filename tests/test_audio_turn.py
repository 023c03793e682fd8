"""The audio turn detector's feed and consultation rules (``agents_trio.audio_turn``), on a
Trio detector of the test's: when a prediction is requested, withdrawn, awaited and flushed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import Agent, AgentSession
from agents_trio.audio_turn import (OPENING_BUFFER_FRAMES, AudioTurnDetector,
                                    AudioTurnDetectorStream, AudioTurnTracker, PendingPrediction,
                                    TurnPrediction, check_vad_silence)
from agents_trio.models import VADEvent, VADEventType
from agents_trio.testing import FakeActions, create_session, run_session


class RecordingStream(AudioTurnDetectorStream):
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.pending: list[PendingPrediction] = []
        self.threshold: float | None = 0.5
        self.languages = {"en"}

    @property
    def prediction_timeout(self) -> float:
        return 1.0

    def push_audio(self, frame: Any) -> None:
        self.calls.append("audio")

    def predict(self) -> PendingPrediction:
        self.calls.append("predict")
        self.pending.append(PendingPrediction())
        return self.pending[-1]

    def cancel_inference(self, *, timed_out: bool = False) -> None:
        self.calls.append("cancel(timed_out)" if timed_out else "cancel")

    def flush(self, reason: str | None = None) -> None:
        self.calls.append(f"flush({reason})")

    async def unlikely_threshold(self, language: str | None) -> float | None:
        return self.threshold

    async def supports_language(self, language: str | None) -> bool:
        return (language or "en") in self.languages


class RecordingDetector(AudioTurnDetector):
    def __init__(self) -> None:
        self.stream_ = RecordingStream()
        self.opened = 0
        self.closed = 0

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[AudioTurnDetectorStream]:
        self.opened += 1
        try:
            yield self.stream_
        finally:
            self.closed += 1


def _inference(*, speech: float = 0.0, silence: float = 0.0) -> VADEvent:
    return VADEvent(type=VADEventType.INFERENCE_DONE, raw_accumulated_speech=speech,
                    raw_accumulated_silence=silence)


async def _tracker(nursery: trio.Nursery, detector: RecordingDetector) -> AudioTurnTracker:
    tracker = AudioTurnTracker(nursery, on_error=lambda e, source: None)
    tracker.use(detector)
    await trio.testing.wait_all_tasks_blocked()
    assert tracker.stream is detector.stream_
    return tracker


async def test_requests_follow_the_raw_silence_and_speech(
        autojump_clock: trio.testing.MockClock) -> None:
    detector = RecordingDetector()
    async with trio.open_nursery() as nursery:
        tracker = await _tracker(nursery, detector)
        stream = detector.stream_
        tracker.on_vad_inference(_inference(silence=0.3), speaking=False)  # not in a speech
        tracker.on_speech_started()
        tracker.on_vad_inference(_inference(silence=0.1), speaking=True)   # too short
        tracker.on_vad_inference(_inference(silence=0.2), speaking=True)   # requested
        tracker.on_vad_inference(_inference(silence=0.3), speaking=True)   # already pending
        tracker.on_vad_inference(_inference(speech=0.03), speaking=True)   # speech again
        tracker.on_vad_inference(_inference(silence=0.25), speaking=True)  # asked again
        tracker.on_turn_ended("turn committed")
        assert stream.calls == ["cancel", "predict", "cancel", "predict",
                                "flush(turn committed)"]
        # after the flush nothing is pending: the decision has no prediction to wait for
        assert not await tracker.end_of_turn_unlikely("en")
        tracker.use(None)  # another agent without the detector: the stream closes
        await trio.testing.wait_all_tasks_blocked()
        assert (detector.opened, detector.closed) == (1, 1) and tracker.stream is None


@pytest.mark.parametrize("probability, unlikely", [(0.2, True), (0.8, False)])
async def test_the_decision_compares_the_answer_with_the_threshold(
        autojump_clock: trio.testing.MockClock, probability: float, unlikely: bool) -> None:
    detector = RecordingDetector()
    async with trio.open_nursery() as nursery:
        tracker = await _tracker(nursery, detector)
        tracker.on_speech_started()
        tracker.on_vad_inference(_inference(silence=0.2), speaking=True)
        (pending,) = detector.stream_.pending

        async def answer() -> None:
            await trio.sleep(0.3)
            pending.resolve(TurnPrediction(end_of_turn_probability=probability))
        nursery.start_soon(answer)
        started = trio.current_time()
        assert await tracker.end_of_turn_unlikely("en") is unlikely
        assert trio.current_time() - started == pytest.approx(0.3)
        tracker.use(None)


async def test_a_late_answer_times_out_and_tells_the_stream(
        autojump_clock: trio.testing.MockClock) -> None:
    detector = RecordingDetector()
    async with trio.open_nursery() as nursery:
        tracker = await _tracker(nursery, detector)
        tracker.on_speech_started()
        tracker.on_vad_inference(_inference(silence=0.2), speaking=True)
        started = trio.current_time()
        assert not await tracker.end_of_turn_unlikely("en")
        assert trio.current_time() - started == pytest.approx(1.0)  # the stream's timeout
        assert detector.stream_.calls[-1] == "cancel(timed_out)"
        # an unsupported language is not waited for at all
        tracker.on_vad_inference(_inference(silence=0.2), speaking=True)
        started = trio.current_time()
        assert not await tracker.end_of_turn_unlikely("fi")
        assert trio.current_time() == started
        tracker.use(None)


async def test_a_stream_that_cannot_open_is_reported(
        autojump_clock: trio.testing.MockClock) -> None:
    class Broken(RecordingDetector):
        @asynccontextmanager
        async def stream(self) -> AsyncIterator[AudioTurnDetectorStream]:
            raise OSError("no gateway")
            yield self.stream_

    errors: list[BaseException] = []
    async with trio.open_nursery() as nursery:
        tracker = AudioTurnTracker(nursery, on_error=lambda e, source: errors.append(e))
        tracker.use(Broken())
        await trio.testing.wait_all_tasks_blocked()
        assert tracker.stream is None
        assert not await tracker.end_of_turn_unlikely("en")  # endpointing delays alone
    assert [type(e) for e in errors] == [OSError]


def test_the_vad_must_wait_longer_than_the_prediction_silence() -> None:
    class VAD:
        def __init__(self, min_silence_duration: float) -> None:
            self.min_silence_duration = min_silence_duration

        def stream(self) -> Any:
            raise AssertionError("never opened")

    detector = RecordingDetector()
    check_vad_silence(detector, VAD(0.25))
    check_vad_silence("vad", VAD(0.1))  # a mode: no audio detector
    with pytest.raises(ValueError, match="min_silence_duration"):
        check_vad_silence(detector, VAD(0.2))
    with pytest.raises(ValueError, match="min_silence_duration"):
        AgentSession(vad=VAD(0.1), turn_handling={"turn_detection": detector})  # type: ignore[arg-type]


class SlowOpeningDetector(RecordingDetector):
    """Its stream takes ``delay`` seconds to open (a connection to make)."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[AudioTurnDetectorStream]:
        await trio.sleep(self.delay)
        async with super().stream() as stream:
            yield stream


async def test_audio_heard_while_the_stream_opens_reaches_it(
        autojump_clock: trio.testing.MockClock) -> None:
    """The session's first frame arrives while the detector's stream is still opening: it is
    kept and pushed once the stream is open, before anything heard later."""
    actions = FakeActions()
    actions.add_user_speech(0.5, 1.5, "I was thinking")
    actions.add_llm("Go on.")
    actions.add_tts(0.5)
    detector = SlowOpeningDetector(0.05)
    session = create_session(actions, turn_handling={"turn_detection": detector})
    await run_session(session, Agent(instructions="x"), drain_delay=2.0)
    calls = detector.stream_.calls
    assert calls.count("audio") == 1  # the one 0.1 s frame the harness pushes at the start
    # the speech's 0.2 s of raw silence asked for a prediction once the stream was open
    assert "predict" in calls and calls.index("audio") < calls.index("predict")


def test_frames_kept_while_opening_are_bounded() -> None:
    """A stream that never opens does not make the tracker hold the whole conversation."""
    async def main() -> int:
        class NeverOpens(RecordingDetector):
            @asynccontextmanager
            async def stream(self) -> AsyncIterator[AudioTurnDetectorStream]:
                await trio.sleep_forever()
                yield self.stream_

        async with trio.open_nursery() as nursery:
            tracker = AudioTurnTracker(nursery, on_error=lambda e, source: None)
            tracker.use(NeverOpens())
            frame = object()
            for _ in range(OPENING_BUFFER_FRAMES * 3):
                tracker.push_audio(frame)
            kept = tracker.frames_kept_while_opening
            nursery.cancel_scope.cancel()
        return kept

    assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) \
        == OPENING_BUFFER_FRAMES


async def test_what_happens_while_the_stream_opens_is_applied_once_it_is_open(
        autojump_clock: trio.testing.MockClock) -> None:
    detector = SlowOpeningDetector(0.5)
    async with trio.open_nursery() as nursery:
        tracker = AudioTurnTracker(nursery, on_error=lambda e, source: None)
        tracker.use(detector)
        tracker.push_audio("old turn")
        tracker.on_turn_ended("turn committed")  # the stream will not hear that turn
        tracker.push_audio("a")
        tracker.on_speech_started()
        tracker.on_vad_inference(_inference(silence=0.2), speaking=True)  # asked while opening
        tracker.push_audio("b")
        assert tracker.stream is None and tracker.frames_kept_while_opening == 2
        # the decision made before the stream opens has nothing to wait for
        assert not await tracker.end_of_turn_unlikely("en")
        await trio.sleep(0.5)  # the stream's open ends at this same instant: let it run
        await trio.testing.wait_all_tasks_blocked()
        assert tracker.stream is detector.stream_ and tracker.frames_kept_while_opening == 0
        tracker.push_audio("c")
        assert detector.stream_.calls == ["audio", "audio", "predict", "audio"]
        # the request made on opening is the one the decision waits for
        (pending,) = detector.stream_.pending
        pending.resolve(TurnPrediction(end_of_turn_probability=0.1))
        assert await tracker.end_of_turn_unlikely("en")
        tracker.use(None)


class GatedDetector(RecordingDetector):
    """Its stream opens when the test sets ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = trio.Event()

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[AudioTurnDetectorStream]:
        await self.gate.wait()
        async with super().stream() as stream:
            yield stream


_STEPS = st.lists(st.sampled_from(["frame", "speech", "silence", "voice", "turn", "open"]),
                  max_size=40)


@settings(max_examples=200, deadline=None)
@given(steps=_STEPS)
def test_the_stream_hears_the_current_turn_in_order_whenever_it_opens(steps: list[str]) -> None:
    """Whatever happens before and after the stream opens: it is given exactly the frames of
    the turn in progress, in the order heard, and a prediction iff one is asked for and not
    withdrawn (the tracker's rules applied as if the stream had been open all along)."""

    async def main() -> None:
        detector = GatedDetector()
        stream = detector.stream_
        heard: list[str] = []      # what an always-open stream would have been given
        asked = False              # a prediction requested and not withdrawn since
        async with trio.open_nursery() as nursery:
            tracker = AudioTurnTracker(nursery, on_error=lambda e, source: None)
            tracker.use(detector)
            for i, step in enumerate(steps + ["open"]):
                if step == "frame":
                    tracker.push_audio(f"f{i}")
                    heard.append(f"f{i}")
                elif step == "speech":
                    tracker.on_speech_started()
                    asked = False
                elif step == "silence":
                    tracker.on_vad_inference(_inference(silence=0.25), speaking=True)
                    asked = True
                elif step == "voice":
                    tracker.on_vad_inference(_inference(speech=0.03), speaking=True)
                    asked = False
                elif step == "turn":
                    tracker.on_turn_ended("turn committed")
                    heard.clear()
                    asked = False
                elif not detector.gate.is_set():  # "open"
                    detector.gate.set()
                    await trio.testing.wait_all_tasks_blocked()
                    assert tracker.stream is stream
                    given = [c for c in stream.calls if c == "audio"]
                    assert len(given) == len(heard)  # every frame of the turn, none older
                    assert ("predict" in stream.calls) == asked
                    assert stream.calls[-1:] == (["predict"] if asked else stream.calls[-1:])
                    assert tracker.frames_kept_while_opening == 0
            tracker.use(None)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
