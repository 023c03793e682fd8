"""Microphone and speaker I/O against a stubbed sounddevice (issue 11 item 5): PortAudio's
callbacks are driven by the test from a worker thread, as PortAudio would call them."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import pytest
import trio

from agents_trio.io import local_audio
from agents_trio.io.local_audio import (LocalAudioUnavailable, MicrophoneInput, SoundPlayer,
                                        SpeakerOutput, device_available)
from agents_trio.io.wav import frame_samples, pcm_frames, rms


class FakeStream:
    def __init__(self, *, samplerate: int, channels: int, dtype: str, callback: Any,
                 blocksize: int = 0, device: Any = None, finished_callback: Any = None) -> None:
        assert dtype == "int16"
        self.samplerate, self.channels, self.callback = samplerate, channels, callback
        self.blocksize = blocksize or 320
        self.started = self.closed = False
        FAKE.streams.append(self)

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.started = False

    def close(self) -> None:
        self.closed = True

    def pull(self, frames: int) -> np.ndarray:
        """An output callback: what the device would play next."""
        out = np.full((frames, self.channels), 12345, np.int16)
        self.callback(out, frames, None, None)
        return out

    def push(self, block: np.ndarray) -> None:
        """An input callback with ``block`` as the captured audio."""
        self.callback(block.reshape(-1, 1), len(block), None, None)


class FakeSoundDevice(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("sounddevice")
        self.streams: list[FakeStream] = []
        self.InputStream = FakeStream
        self.OutputStream = FakeStream

    def query_devices(self, kind: str) -> dict[str, Any]:
        return {"name": "fake", "max_output_channels": 2, "max_input_channels": 1}


FAKE = FakeSoundDevice()


@pytest.fixture
def fake_sd(monkeypatch: pytest.MonkeyPatch) -> FakeSoundDevice:
    FAKE.streams.clear()
    monkeypatch.setitem(sys.modules, "sounddevice", FAKE)
    return FAKE


def tone(seconds: float, rate: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (8000 * np.sin(2 * np.pi * 440 * t)).astype(np.int16)


def test_missing_sounddevice_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sounddevice", None)
    with pytest.raises(LocalAudioUnavailable) as info:
        local_audio.import_sounddevice()
    assert "pip install -e '.[voice]'" in str(info.value)
    assert "libportaudio2" in str(info.value)
    assert not device_available("output")


async def test_microphone_delivers_the_captured_blocks(fake_sd: FakeSoundDevice) -> None:
    audio = tone(0.1, 16000)
    async with MicrophoneInput(sample_rate=16000) as mic:
        (stream,) = fake_sd.streams
        assert stream.started and stream.blocksize == 320

        def capture() -> None:
            for i in range(0, len(audio), 320):
                stream.push(audio[i:i + 320])
        await trio.to_thread.run_sync(capture)
        got = []
        for _ in range(5):
            frame = await mic.__anext__()
            assert frame.sample_rate == 16000
            got.append(frame_samples(frame))
    assert stream.closed
    assert np.array_equal(np.concatenate(got), audio)
    with pytest.raises(StopAsyncIteration):
        await mic.__anext__()


async def test_speaker_plays_segments_and_clear_drops_the_rest(fake_sd: FakeSoundDevice) -> None:
    async with SpeakerOutput(sample_rate=16000) as speaker:
        (stream,) = fake_sd.streams
        started: list[object] = []
        speaker.on("playback_started", started.append)
        # 0.1 s at 24 kHz, converted to the speaker's 16 kHz, played to its end
        for frame in pcm_frames(tone(0.1, 24000), 24000):
            await speaker.capture_frame(frame)
        speaker.flush()
        played = []
        async with trio.open_nursery() as nursery:
            result: list[Any] = []

            async def wait() -> None:
                result.append(await speaker.wait_for_playout())
            nursery.start_soon(wait)
            await trio.sleep(0.05)
            assert not result              # nothing consumed by the device yet

            def device() -> None:
                for _ in range(6):
                    played.append(stream.pull(320)[:, 0].copy())
            await trio.to_thread.run_sync(device)
        (ev,) = result
        assert not ev.interrupted and ev.playback_position == pytest.approx(0.1, abs=0.002)
        heard = np.concatenate(played)
        assert rms(heard[:1500]) > 4000 and rms(heard[1700:]) == 0    # then silence
        # 1 s pushed, the device takes 0.04 s, then a clear
        for frame in pcm_frames(tone(1.0, 16000), 16000):
            await speaker.capture_frame(frame)
        speaker.flush()
        await trio.to_thread.run_sync(lambda: [stream.pull(320) for _ in range(2)])
        await trio.sleep(0)
        ev = speaker.clear_buffer()
        assert ev is not None and ev.interrupted
        assert ev.playback_position == pytest.approx(0.04)
        assert rms(stream.pull(320)) == 0       # the rest was dropped
        assert speaker.clear_buffer() is None
        assert len(started) == 2
    assert stream.closed


async def test_sound_player_plays_what_is_written(fake_sd: FakeSoundDevice) -> None:
    player = SoundPlayer(sample_rate=16000, channels=2)
    player.start()
    (stream,) = fake_sd.streams
    player.write(np.ones((100, 2), np.int16))
    out = stream.pull(160)
    assert (out[:100] == 1).all() and (out[100:] == 0).all()
    await player.aclose()
    assert stream.closed


async def test_voice_demo_monitor_plays_the_recording_behind_real_time(
        autojump_clock: object) -> None:
    """Without --out the voice demo plays user (left) and agent (right) through the speaker,
    MONITOR_LAG behind what is being recorded."""
    from agents_trio.demo_voice import MONITOR_LAG, VoiceDemo
    from agents_trio.io.audio import capture_frames
    from agents_trio.io.wav import WavInput, WavOutput

    class Player:
        def __init__(self) -> None:
            self.chunks: list[np.ndarray] = []

        def write(self, samples: np.ndarray) -> None:
            self.chunks.append(samples)

    demo = VoiceDemo(out=None)  # type: ignore[arg-type]
    demo.origin = trio.current_time()
    demo.user = WavInput(keep_open=True, origin=demo.origin)
    demo.agent = WavOutput(origin=demo.origin)
    player = Player()
    demo.user.play(tone(0.5, 16000))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(demo.monitor, player)

        async def consume() -> None:
            async for _ in demo.user:
                pass
        nursery.start_soon(consume)
        await trio.sleep(1.0)
        await capture_frames(demo.agent, pcm_frames(tone(0.5, 16000), 16000), timeout=None)
        await trio.sleep(1.5)
        nursery.cancel_scope.cancel()
    played = np.concatenate(player.chunks)
    assert played.shape[1] == 2
    assert abs(len(played) / 16000 - (2.5 - MONITOR_LAG)) < 0.06
    user, agent = played[:, 0], played[:, 1]
    assert rms(user[:8000]) > 4000 and rms(user[8400:]) == 0
    assert rms(agent[:15900]) == 0 and rms(agent[16100:23900]) > 4000
    assert rms(agent[24100:]) == 0


@pytest.mark.parametrize("opener", ["microphone", "speaker", "player"])
async def test_leaving_by_cancellation_still_closes_the_device(
        fake_sd: FakeSoundDevice, opener: str) -> None:
    """A device left by a cancellation (its ``async with`` exited in a cancelled scope, or
    ``aclose`` in a cancelled task's ``finally``) is stopped and closed, not forgotten."""
    with trio.CancelScope() as scope:
        if opener == "microphone":
            async with MicrophoneInput():
                scope.cancel()
                await trio.sleep(1)
        elif opener == "speaker":
            async with SpeakerOutput():
                scope.cancel()
                await trio.sleep(1)
        else:
            player = SoundPlayer(sample_rate=16000, channels=2)
            player.start()
            try:
                scope.cancel()
                await trio.sleep(1)
            finally:
                await player.aclose()
    assert scope.cancelled_caught
    [stream] = fake_sd.streams
    assert stream.closed and not stream.started
