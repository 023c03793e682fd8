"""BackgroundAudioPlayer: a sound's handle ends with the sound, whatever ends it.

``await handle`` hung when the player closed while the sound was starting (its file being
decoded, or its task not yet run): the close ended only the sounds already in the mix. A
file that failed to decode crashed the player, and with it the block that opened it. As in
LiveKit, each sound is played by a task that lives as long as it, and whose end ends the
handle: a failure is logged, and the other sounds play on.
"""

from __future__ import annotations

import wave
from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest
import trio
from livekit import rtc

from agents_trio import BackgroundAudioPlayer


class Sink:
    def __init__(self) -> None:
        self.frames = 0

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        self.frames += 1


async def _beep(seconds: float) -> AsyncIterator[rtc.AudioFrame]:
    n = 480
    for _ in range(int(seconds * 100)):
        yield rtc.AudioFrame((np.full(n, 0.5) * 32767).astype(np.int16).tobytes(), 48000, 1, n)


def _wav(path: Path, seconds: float = 0.5) -> str:
    with wave.open(str(path), "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes((np.full(int(16000 * seconds), 8000)).astype(np.int16).tobytes())
    return str(path)


@pytest.mark.parametrize("source", ["stream", "file"])
@pytest.mark.parametrize("close", ["aclose", "leave-block"])
async def test_closing_while_a_sound_starts_ends_its_handle(
        source: str, close: str, tmp_path: Path, autojump_clock: object) -> None:
    async with BackgroundAudioPlayer() as player:
        await player.start(output=Sink())
        handle = player.play(_beep(1.0) if source == "stream" else _wav(tmp_path / "a.wav"))
        if close == "aclose":
            await player.aclose()
    with trio.fail_after(5):
        await handle
    assert handle.done()


async def _broken_source() -> AsyncIterator[rtc.AudioFrame]:
    await trio.sleep(0.1)
    raise OSError("the stream broke")
    yield  # an async generator  # pragma: no cover


async def test_a_sound_that_fails_ends_alone(autojump_clock: object,
                                             caplog: pytest.LogCaptureFixture) -> None:
    sink = Sink()
    async with BackgroundAudioPlayer() as player:
        await player.start(output=sink)
        broken = player.play(_broken_source())
        with trio.fail_after(5):
            await broken
        playing = player.play(_beep(0.5))
        with trio.fail_after(5):
            await playing
    assert sink.frames >= 25   # the second sound played (0.5 s of 20 ms frames)
    assert "the stream broke" in caplog.text
