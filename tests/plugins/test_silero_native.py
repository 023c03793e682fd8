"""agents_trio.offline.SileroVAD against LiveKit's Silero plugin (run by asyncio) on the same
real speech: the same events, field by field, at the input rates and options that take the
plugin's different paths (resampling, the 8 kHz model, a speech buffer that fills, options
changed mid-stream, a flush). Real model inference: real clock, bounded."""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest
import trio

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")
silero = pytest.importorskip("livekit.plugins.silero", reason="needs livekit-plugins-silero")

from livekit import rtc  # noqa: E402
from speech_audio import ESPEAK, padded_sentence, speech_bounds  # noqa: E402

from agents_trio import (AgentSession, SpeechEventType, VADEvent, VADEventType,  # noqa: E402
                         open_bridge)
from agents_trio.offline import SileroVAD  # noqa: E402

pytestmark = pytest.mark.skipif(ESPEAK is None, reason="needs espeak-ng (apt install espeak-ng)")


def _frames(pcm: np.ndarray, rate: int, ms: int = 20) -> list[rtc.AudioFrame]:
    step = rate * ms // 1000
    return [rtc.AudioFrame(pcm[i:i + step].tobytes(), rate, 1, len(pcm[i:i + step]))
            for i in range(0, len(pcm), step)]


def _at_rate(pcm: np.ndarray, rate: int, to: int) -> np.ndarray:
    """Linear interpolation: any audio will do, both sides get the same."""
    n = int(len(pcm) * to / rate)
    x = np.linspace(0, len(pcm) - 1, n)
    return np.interp(x, np.arange(len(pcm)), pcm.astype(np.float64)).astype(np.int16)


def _plugin_events(load_kwargs: dict, frames: list[rtc.AudioFrame], actions: dict[int, object],
                   windows_before: dict[int, int]) -> list[object]:
    """LiveKit's plugin as LiveKit runs it: plain asyncio (in a worker thread here), the
    inference in the loop's executor. An option change waits until the plugin has inferred
    as many windows as the native stream had at that frame, so both change at the same
    point of the audio; a flush goes through the plugin's input in order anyway."""

    async def main() -> list[object]:
        vad = silero.VAD.load(**load_kwargs)
        stream = vad.stream()
        events: list[object] = []

        async def collect() -> None:
            async for ev in stream:
                events.append(ev)

        collector = asyncio.get_running_loop().create_task(collect())
        for i, frame in enumerate(frames):
            action = actions.get(i)
            if action == "flush":
                stream.flush()
            elif isinstance(action, dict):
                async with asyncio.timeout(30):
                    while sum(_kind(e) == "inference_done" for e in events) < windows_before[i]:
                        await asyncio.sleep(0.002)
                vad.update_options(**action)
            stream.push_frame(frame)
        stream.end_input()
        async with asyncio.timeout(60):
            await collector
        await stream.aclose()
        return events

    return asyncio.run(main())


def _kind(ev: object) -> str:
    kind = ev.type  # type: ignore[attr-defined]
    return str(getattr(kind, "value", kind))


async def _native_events(load_kwargs: dict, frames: list[rtc.AudioFrame],
                         actions: dict[int, object], windows_before: dict[int, int]
                         ) -> list[VADEvent]:
    vad = await trio.to_thread.run_sync(lambda: SileroVAD.load(**load_kwargs))
    events: list[VADEvent] = []
    async with vad.stream() as stream:
        for i, frame in enumerate(frames):
            action = actions.get(i)
            if action is not None:
                windows_before[i] = sum(e.type is VADEventType.INFERENCE_DONE for e in events)
            if action == "flush":
                stream.flush()
            elif isinstance(action, dict):
                vad.update_options(**action)
            events.extend(stream.push_frame(frame))
        stream.end_input()
        async for ev in stream:
            events.append(ev)  # every event was returned by push_frame: none come here
    return events


def _same(native: list[VADEvent], plugin: list) -> None:
    assert [e.type.value for e in native] == [_kind(e) for e in plugin]
    for mine, theirs in zip(native, plugin):
        assert mine.samples_index == theirs.samples_index
        assert mine.speaking is theirs.speaking
        for field in ("timestamp", "speech_duration", "silence_duration",
                      "raw_accumulated_silence", "raw_accumulated_speech"):
            assert getattr(mine, field) == pytest.approx(getattr(theirs, field), abs=1e-9), field
        assert mine.probability == pytest.approx(theirs.probability, abs=1e-5)
        assert [(f.sample_rate, f.samples_per_channel, bytes(f.data)) for f in mine.frames] == \
            [(f.sample_rate, f.samples_per_channel, bytes(f.data)) for f in theirs.frames]


CASES = {
    "16 kHz input, no resampling": ({}, 16000, {}),
    "16 kHz input in 7 ms frames": ({}, 16000, {"frame_ms": 7}),
    "16 kHz input in 100 ms frames": ({}, 16000, {"frame_ms": 100}),
    "8 kHz model, 8 kHz input": ({"sample_rate": 8000}, 8000, {}),
    "short buffer, long padding": ({"max_buffered_speech": 0.4, "prefix_padding_duration": 0.7,
                                    "min_silence_duration": 0.3}, 16000, {}),
    "options changed, then a flush": (
        {"min_speech_duration": 0.2}, 16000,
        {60: {"activation_threshold": 0.7, "min_silence_duration": 0.25,
              "max_buffered_speech": 2.0, "prefix_padding_duration": 0.1},
         130: "flush"}),
}
# LiveKit's resampler (soxr) dithers: two runs on the same audio differ in the last bit, so the
# model's probabilities differ slightly, run to run, on either side
RESAMPLED = {
    "espeak's 22050 Hz for the 16 kHz model": ({}, None),
    "48 kHz for the 8 kHz model": ({"sample_rate": 8000}, 48000),
}


async def _both(load_kwargs: dict, rate: int | None, actions: dict[int | str, object]
                ) -> tuple[list[VADEvent], list, list[rtc.AudioFrame]]:
    pcm, espeak_rate, _, _ = padded_sentence()
    if rate is not None:
        pcm = _at_rate(pcm, espeak_rate, rate)
    actions = dict(actions)
    frames = _frames(pcm, rate or espeak_rate, ms=int(actions.pop("frame_ms", 20)))
    windows_before: dict[int, int] = {}
    with trio.fail_after(120):
        native = await _native_events(load_kwargs, frames, actions, windows_before)
        plugin = await trio.to_thread.run_sync(
            _plugin_events, load_kwargs, frames, actions, windows_before)
    return native, plugin, frames


@pytest.mark.parametrize("case", list(CASES))
async def test_the_same_events_as_the_plugin(case: str) -> None:
    load_kwargs, rate, actions = CASES[case]
    native, plugin, _ = await _both(load_kwargs, rate, actions)
    assert sum(e.type is VADEventType.START_OF_SPEECH for e in native) >= 1
    _same(native, plugin)


@pytest.mark.parametrize("case", list(RESAMPLED))
async def test_resampled_input_gives_the_plugins_events_up_to_its_dither(case: str) -> None:
    load_kwargs, rate = RESAMPLED[case]
    native, plugin, frames = await _both(load_kwargs, rate, {})
    done = [e for e in native if e.type is VADEventType.INFERENCE_DONE]
    theirs = [e for e in plugin if _kind(e) == "inference_done"]
    assert [e.samples_index for e in done] == [e.samples_index for e in theirs]
    # the input audio each window covers: not resampled, so exactly the plugin's
    assert [bytes(e.frames[0].data) for e in done] == [bytes(e.frames[0].data) for e in theirs]
    gaps = [abs(a.probability - b.probability) for a, b in zip(done, theirs)]
    assert sum(gaps) / len(gaps) < 0.01 and max(gaps) < 0.2, max(gaps)
    # one utterance on each side, its bounds within a window of each other
    bounds = [[(e.type.value if isinstance(e, VADEvent) else _kind(e), e.samples_index)
               for e in events if (e.type.value if isinstance(e, VADEvent) else _kind(e))
               != "inference_done"] for events in (native, plugin)]
    assert [k for k, _ in bounds[0]] == [k for k, _ in bounds[1]] == [
        "start_of_speech", "end_of_speech"]
    window = 512 if not load_kwargs else 256
    for (_, mine), (_, their) in zip(*bounds):
        assert abs(mine - their) <= window


async def test_speech_bounds_on_real_speech_and_no_task_per_frame() -> None:
    pcm, rate, true_start, true_end = padded_sentence()
    vad = await trio.to_thread.run_sync(SileroVAD.load)
    events: list[VADEvent] = []
    async with vad.stream() as stream:
        for frame in _frames(pcm, rate):
            events.extend(e for e in stream.push_frame(frame)
                          if e.type is not VADEventType.INFERENCE_DONE)
    assert [e.type for e in events] == [VADEventType.START_OF_SPEECH,
                                        VADEventType.END_OF_SPEECH]
    start, end = speech_bounds(events)
    assert start == pytest.approx(true_start, abs=0.3)
    assert end == pytest.approx(true_end, abs=0.3)


def test_bad_options_fail_at_load_before_the_model_is_loaded() -> None:
    with pytest.raises(ValueError, match="8000 or 16000"):
        SileroVAD.load(sample_rate=44100)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_silence_duration"):
        SileroVAD.load(min_silence_duration=-1)
    with pytest.raises(ValueError, match="activation_threshold"):
        SileroVAD.load(activation_threshold=1.5)
    with pytest.raises(ValueError, match="deactivation_threshold"):
        SileroVAD.load(deactivation_threshold=0)
    with pytest.raises(FileNotFoundError):
        SileroVAD.load(onnx_file_path="/nonexistent/silero.onnx")


async def test_a_frame_at_another_rate_is_dropped_with_an_error(caplog) -> None:
    vad = await trio.to_thread.run_sync(SileroVAD.load)
    async with vad.stream() as stream:
        stream.push_frame(rtc.AudioFrame(bytes(640), 16000, 1, 320))
        with caplog.at_level(logging.ERROR, logger="agents_trio.offline.silero"):
            assert stream.push_frame(rtc.AudioFrame(bytes(960), 24000, 1, 480)) == ()
        assert "24000 Hz dropped" in caplog.text


async def test_a_session_takes_it_as_its_vad() -> None:
    vad = await trio.to_thread.run_sync(SileroVAD.load)
    session = AgentSession(vad=vad)
    assert session.vad is vad


def test_porting_is_an_import_change() -> None:
    from agents_trio.plugins import silero as native

    vad = native.VAD.load(min_silence_duration=0.4)
    assert isinstance(vad, SileroVAD)
    assert vad.options.min_silence_duration == 0.4
    assert vad.options.deactivation_threshold == pytest.approx(0.35)  # the plugin's default
    # the plugin's deprecated name still works, as there
    assert native.VAD.load(padding_duration=0.2).options.prefix_padding_duration == 0.2


async def test_it_segments_a_non_streaming_livekit_stt() -> None:
    """LiveKit's own StreamAdapter takes LiveKit VADs only: with a Trio VAD the session wraps
    the plugin's ``recognize`` in agents_trio's StreamAdapter, segmented by that VAD."""
    from agents_trio.plugins import RecognizingSTTAdapter
    from agents_trio.stt import StreamAdapter
    from agents_trio.testing.livekit_fakes import FakePluginSTT

    vad = await trio.to_thread.run_sync(SileroVAD.load)
    plugin_stt = FakePluginSTT("the quick brown fox", streaming=False)
    session = AgentSession(stt=plugin_stt, vad=vad)
    assert isinstance(session.stt, StreamAdapter)
    assert isinstance(session.stt.stt, RecognizingSTTAdapter) and session.stt.vad is vad
    from agents_trio.plugins import STTAdapter, adapt
    assert isinstance(adapt(FakePluginSTT(streaming=False), vad=vad), StreamAdapter)
    assert isinstance(adapt(FakePluginSTT(), vad=vad), STTAdapter)  # it streams: no VAD needed

    pcm, rate, _, _ = padded_sentence()
    finals = []
    with trio.fail_after(60):
        async with open_bridge() as bridge, session.stt.stream() as stream:
            for frame in _frames(pcm, rate):
                stream.push_frame(frame)
            stream.end_input()
            async for ev in stream:
                if ev.type is SpeechEventType.FINAL_TRANSCRIPT:
                    finals.append(ev.alternatives[0].text)
        assert bridge.statistics().asyncio_tasks == 0
    assert finals == ["the quick brown fox"]  # one utterance, recognized once
    assert plugin_stt.utterances == ["the quick brown fox"]
