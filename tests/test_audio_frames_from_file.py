"""``utils.audio.audio_frames_from_file``: a file decoded into frames on Trio (decoding in a
thread): the asked format, the whole file. (LiveKit's own decoder, run on asyncio in a thread,
hung in the full suite, so it is not compared here; run alone it gave the same audio minus
up to ~0.1 s of the resampler's tail.)"""

from __future__ import annotations

import array
import math
import wave
from contextlib import aclosing
from pathlib import Path

import pytest

from agents_trio.utils.audio import audio_frames_from_file

pytest.importorskip("av")


def _write_tone(path: Path, *, rate: int, channels: int, seconds: float) -> None:
    n = int(rate * seconds)
    samples = array.array("h", (int(8000 * math.sin(2 * math.pi * 440 * i / rate))
                                for i in range(n) for _ in range(channels)))
    with wave.open(str(path), "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())


@pytest.mark.parametrize("rate, channels", [(48000, 1), (16000, 2), (24000, 1)])
async def test_frames_have_the_asked_format_and_livekits_length(tmp_path: Path, rate: int,
                                                                channels: int) -> None:
    path = tmp_path / "tone.wav"
    _write_tone(path, rate=22050, channels=2, seconds=1.5)
    total = 0
    async with aclosing(audio_frames_from_file(str(path), rate, channels)) as frames:
        async for frame in frames:
            assert frame.sample_rate == rate and frame.num_channels == channels
            total += frame.samples_per_channel
    assert abs(total - int(1.5 * rate)) <= rate // 100   # the whole file, within 10 ms


async def test_stopping_early_closes_the_file_and_bad_input_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tone.wav"
    _write_tone(path, rate=16000, channels=1, seconds=3.0)
    async with aclosing(audio_frames_from_file(str(path), 16000)) as frames:
        first = await frames.__anext__()
    assert first.samples_per_channel > 0
    with pytest.raises(FileNotFoundError):
        async for _ in audio_frames_from_file(str(tmp_path / "missing.wav")):
            pass
    with pytest.raises(ValueError, match="num_channels"):
        async for _ in audio_frames_from_file(str(path), num_channels=3):
            pass
