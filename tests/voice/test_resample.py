"""TTS audio is converted to the sample rate its output declares (issue 11 item 2)."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager

import numpy as np
import pytest
from livekit import rtc

from agents_trio import Agent, AgentSession
from agents_trio.io.resample import FrameResampler, resample_frames
from agents_trio.testing.fake_io import FakeAudioOutput, FakeTextOutput

TONE_HZ = 440.0


def tone_frames(rate: int, seconds: float, frame_s: float = 0.02) -> list[rtc.AudioFrame]:
    n = int(rate * seconds)
    t = np.arange(n) / rate
    pcm = (0.5 * 32767 * np.sin(2 * np.pi * TONE_HZ * t)).astype(np.int16)
    step = int(rate * frame_s)
    return [rtc.AudioFrame(pcm[i:i + step].tobytes(), rate, 1, len(pcm[i:i + step]))
            for i in range(0, n, step)]


def dominant_hz(frames: list[rtc.AudioFrame]) -> float:
    pcm = np.concatenate([np.frombuffer(f.data, dtype=np.int16) for f in frames]).astype(float)
    spectrum = np.abs(np.fft.rfft(pcm))
    return float(np.argmax(spectrum) * frames[0].sample_rate / len(pcm))


class ToneTTS:
    """A 24 kHz TTS: 1.5 s of a 440 Hz tone per segment."""

    sample_rate = 24000
    num_channels = 1

    @asynccontextmanager
    async def stream(self, text: AsyncIterable[str]) -> AsyncIterator[AsyncIterator[rtc.AudioFrame]]:
        async def frames() -> AsyncIterator[rtc.AudioFrame]:
            async for _ in text:
                pass
            for frame in tone_frames(self.sample_rate, 1.5):
                yield frame
        yield frames()


class RecordingOutput(FakeAudioOutput):
    def __init__(self, sample_rate: int | None) -> None:
        super().__init__(sample_rate=24000)
        self.sample_rate = sample_rate
        self.frames: list[rtc.AudioFrame] = []

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        self.frames.append(frame)
        await super().capture_frame(frame)


@pytest.mark.parametrize("out_rate", [48000, 16000, 24000, None])
async def test_session_converts_tts_audio_to_the_output_rate(out_rate: int | None,
                                                             autojump_clock: object) -> None:
    output = RecordingOutput(out_rate)
    session = AgentSession(tts=ToneTTS(), aec_warmup_duration=None)
    session.output.audio = output
    session.output.transcription = FakeTextOutput()
    async with session:
        await session.start(Agent(instructions=""))
        handle = session.say("one tone")
        await handle.wait_for_playout()
        await session.aclose()
    expect_rate = out_rate or 24000
    assert output.frames
    assert {f.sample_rate for f in output.frames} == {expect_rate}
    total = sum(f.samples_per_channel for f in output.frames)
    assert abs(total / expect_rate - 1.5) < 0.005   # the same duration, nothing lost
    assert abs(dominant_hz(output.frames) - TONE_HZ) < 2.0  # the same pitch
    ev = output.playback_finished_events[-1]
    assert not ev.interrupted and abs(ev.playback_position - 1.5) < 0.005


def test_frame_resampler_switches_rates_and_flushes() -> None:
    r = FrameResampler(48000)
    out = []
    for f in tone_frames(24000, 0.5) + tone_frames(16000, 0.5):
        out += r.push(f)
    out += r.flush()
    assert {f.sample_rate for f in out} == {48000}
    assert abs(sum(f.samples_per_channel for f in out) - 48000) <= 48


async def test_resample_frames_none_passes_frames_through() -> None:
    frames = tone_frames(22050, 0.2)

    async def source() -> AsyncIterator[rtc.AudioFrame]:
        for f in frames:
            yield f

    got = [f async for f in resample_frames(source(), None)]
    assert got == frames
    got = [f async for f in resample_frames(source(), 22050)]
    assert got == frames


async def test_an_output_taking_any_rate_gets_the_tts_frames_themselves() -> None:
    """No wrapper per frame, and closing what the session iterates closes the TTS node."""
    closed: list[bool] = []

    async def source() -> AsyncIterator[rtc.AudioFrame]:
        try:
            for f in tone_frames(24000, 0.2):
                yield f
        finally:
            closed.append(True)

    frames = source()
    assert resample_frames(frames, None) is frames
    converting = resample_frames(source(), 48000)
    await converting.__anext__()
    await converting.aclose()  # type: ignore[attr-defined]
    assert closed == [True]
