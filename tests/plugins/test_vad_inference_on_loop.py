"""The VAD adapter runs the plugin's per-window inference on the loop (issue 13, item 2): the
events are those of the executor path, in order, none lost at the end of input; a model error
in the middle of a batch of frames ends the stream after the events before it; closing with a
batch in flight leaves nothing running. A fake plugin built on LiveKit's ``VADStream`` hands
each frame's "inference" to the loop's default executor, as Silero does."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
import trio

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

from livekit import rtc
from livekit.agents import vad

from agents_trio import APIError, VADEventType, open_bridge
from agents_trio.plugins import VADAdapter, adapt

RATE = 16000


def frames(n: int, ms: int = 32) -> list[rtc.AudioFrame]:
    samples = RATE * ms // 1000
    return [rtc.AudioFrame(np.full(samples, i, dtype=np.int16).tobytes(), RATE, 1, samples)
            for i in range(n)]


class ExecutorVAD(vad.VAD):
    """One INFERENCE_DONE per frame; its probability is 1.0 when the "model" ran in the thread
    that runs Trio (on the loop), 0.0 in another thread; the model raises at ``fail_at``."""

    def __init__(self, *, fail_at: int | None = None) -> None:
        super().__init__(capabilities=vad.VADCapabilities(update_interval=0.032))
        self.fail_at = fail_at
        self.inferences = 0

    def stream(self) -> vad.VADStream:
        return _ExecutorVADStream(self)

    def infer(self, index: int) -> float:
        self.inferences += 1
        if index == self.fail_at:
            raise ValueError(f"model failed at frame {index}")
        return 1.0 if threading.current_thread() is threading.main_thread() else 0.0


class _ExecutorVADStream(vad.VADStream):
    async def _main_task(self) -> None:
        model: ExecutorVAD = self._vad  # type: ignore[assignment]
        loop = asyncio.get_running_loop()
        index = 0
        async for frame in self._input_ch:
            if isinstance(frame, self._FlushSentinel):
                continue
            p = await loop.run_in_executor(None, model.infer, index)
            self._event_ch.send_nowait(vad.VADEvent(
                type=vad.VADEventType.INFERENCE_DONE, samples_index=index, timestamp=index,
                speech_duration=0.0, silence_duration=0.0, probability=p))
            index += 1


async def _all_events(adapter: VADAdapter, pushed: list[rtc.AudioFrame]) -> list[object]:
    async with adapter.stream() as stream:
        for f in pushed:          # one burst: one crossing carries them all
            stream.push_frame(f)
        stream.end_input()
        return [ev async for ev in stream]


async def test_inference_runs_on_the_loop_by_default_and_in_the_executor_when_asked() -> None:
    with trio.fail_after(30):
        async with open_bridge() as bridge:
            on_loop = await _all_events(adapt(ExecutorVAD()), frames(40))
            in_executor = await _all_events(VADAdapter(ExecutorVAD(), inference_on_loop=False),
                                            frames(40))
            assert bridge.statistics().asyncio_tasks == 0
    assert [ev.probability for ev in on_loop] == [1.0] * 40          # type: ignore[attr-defined]
    assert [ev.probability for ev in in_executor] == [0.0] * 40      # type: ignore[attr-defined]


async def test_events_keep_the_frames_order_and_none_is_lost_at_the_end_of_input() -> None:
    model = ExecutorVAD()
    with trio.fail_after(30):
        async with open_bridge():
            events = await _all_events(adapt(model), frames(100))
    assert [ev.type for ev in events] == [VADEventType.INFERENCE_DONE] * 100  # type: ignore
    assert [ev.timestamp for ev in events] == list(range(100))  # type: ignore[attr-defined]
    assert model.inferences == 100


async def test_a_model_error_mid_batch_ends_the_stream_after_the_events_before_it() -> None:
    model = ExecutorVAD(fail_at=5)
    got: list[object] = []
    with trio.fail_after(30):
        async with open_bridge() as bridge:
            with pytest.raises(APIError) as caught:
                async with adapt(model).stream() as stream:
                    for f in frames(20):
                        stream.push_frame(f)
                    async for ev in stream:
                        got.append(ev)
            assert bridge.statistics().loop_errors == 0
    assert isinstance(caught.value.__cause__, ValueError)
    assert [ev.timestamp for ev in got] == [0, 1, 2, 3, 4]  # type: ignore[attr-defined]
    assert model.inferences == 6   # no inference after the failing one


async def test_closing_with_a_batch_in_flight_stops_the_inference_and_leaves_nothing() -> None:
    model = ExecutorVAD()
    with trio.fail_after(30):
        async with open_bridge() as bridge:
            async with adapt(model).stream() as stream:
                for f in frames(200):
                    stream.push_frame(f)
                await trio.lowlevel.checkpoint()   # the batch crossed; inference under way
            ran = model.inferences
            await bridge.run_sync(lambda: None)
            await bridge.run_sync(lambda: None)
            assert model.inferences == ran       # nothing runs once the stream is closed
            assert ran < 200
            assert bridge.statistics().asyncio_tasks == 0
            assert bridge.statistics().loop_errors == 0


def test_inference_on_loop_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="inference_on_loop"):
        VADAdapter(ExecutorVAD(), inference_on_loop="yes")  # type: ignore[arg-type]


async def test_silero_gives_the_same_events_on_the_loop_as_in_its_executor() -> None:
    silero = pytest.importorskip("livekit.plugins.silero", reason="needs the Silero plugin")
    plugin = silero.VAD.load()
    t = np.arange(RATE * 3) / RATE
    tone = (4000 * np.sin(2 * np.pi * 200 * t) * (t > 1.0) * (t < 2.0)).astype(np.int16)
    step = RATE // 50   # 20 ms frames, as a room delivers them
    pushed = [rtc.AudioFrame(tone[i:i + step].tobytes(), RATE, 1, step)
              for i in range(0, len(tone), step)]

    def seen(events: list[object]) -> list[tuple[object, ...]]:
        return [(ev.type, ev.timestamp, ev.speaking, ev.probability,  # type: ignore[attr-defined]
                 ev.speech_duration, ev.silence_duration) for ev in events]  # type: ignore

    with trio.fail_after(60):
        async with open_bridge():
            on_loop = await _all_events(VADAdapter(plugin), pushed)
            in_executor = await _all_events(VADAdapter(plugin, inference_on_loop=False), pushed)
    assert seen(on_loop) == seen(in_executor)
    windows = [ev for ev in on_loop if ev.type is VADEventType.INFERENCE_DONE]  # type: ignore
    assert len(windows) == 3000 // 32


async def test_a_consumer_that_lags_loses_no_event_past_the_adapter_bound() -> None:
    """The adapter's channel holds 256 events; the pump waits while it is full (backpressure)
    and the plugin keeps the rest: a consumer that starts late gets every event, in order."""
    model = ExecutorVAD()
    with trio.fail_after(30):
        async with open_bridge() as bridge, adapt(model).stream() as stream:
            for f in frames(400):
                stream.push_frame(f)
            while model.inferences < 400:
                await bridge.run_sync(lambda: None)
            stream.end_input()
            indexes = [ev.timestamp async for ev in stream]  # type: ignore[attr-defined]
    assert indexes == list(range(400))
