"""espeak-ng as a Trio TTS: ``espeak-ng --stdout`` per sentence, through ``trio.run_process``."""

from __future__ import annotations

import re
import shutil
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager

import numpy as np
import trio
from livekit import rtc

from ..io.wav import parse_wav, pcm_frames, to_mono
from ._errors import MissingDependency

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")


def espeak_path() -> str:
    """The ``espeak-ng`` executable.

    Raises:
        MissingDependency: it is not installed.
    """
    path = shutil.which("espeak-ng")
    if path is None:
        raise MissingDependency("espeak-ng is not installed: apt-get install espeak-ng "
                                "(Debian/Ubuntu; brew install espeak-ng on macOS)")
    return path


class EspeakTTS:
    """Text to speech with espeak-ng (22050 Hz mono). Text is synthesized one sentence at a
    time as it arrives, each sentence by one ``espeak-ng --stdout`` process; frames are
    ``frame_duration`` long.

    Args:
        voice: An espeak-ng voice (``espeak-ng --voices``).
        speed: Words per minute.
        pitch: 0-99.

    Raises:
        MissingDependency: espeak-ng is not installed (checked when the TTS is made).
    """

    sample_rate = 22050
    num_channels = 1

    def __init__(self, *, voice: str = "en-us", speed: int = 165, pitch: int = 50,
                 frame_duration: float = 0.02) -> None:
        self.executable = espeak_path()
        self.voice, self.speed, self.pitch = voice, speed, pitch
        self.frame_duration = frame_duration

    async def synthesize(self, text: str) -> rtc.AudioFrame:
        """All of ``text`` as one frame.

        Cancellation: the espeak-ng process is terminated (killed if it lingers, as
        ``trio.run_process`` does) and reaped; nothing is kept, and the TTS stays usable.
        """
        result = await trio.run_process(
            [self.executable, "--stdout", "--stdin", "-v", self.voice, "-s", str(self.speed),
             "-p", str(self.pitch)],
            stdin=text.encode(), capture_stdout=True, capture_stderr=True)
        samples, rate, channels = parse_wav(result.stdout)
        samples = to_mono(samples, channels)
        return rtc.AudioFrame(samples.tobytes(), rate, 1, len(samples))

    @asynccontextmanager
    async def stream(self, text: AsyncIterable[str]
                     ) -> AsyncIterator[AsyncIterator[rtc.AudioFrame]]:
        """One segment: reads ``text`` and yields its audio, sentence by sentence.

        Cancellation: cancels the running espeak-ng process (it is killed and reaped).
        """
        yield self._frames(text)

    async def _frames(self, text: AsyncIterable[str]) -> AsyncIterator[rtc.AudioFrame]:
        pending = ""
        async for chunk in text:
            pending += chunk
            *sentences, pending = _SENTENCE_END.split(pending)
            for sentence in sentences:
                async for frame in self._sentence(sentence):
                    yield frame
        async for frame in self._sentence(pending):
            yield frame

    async def _sentence(self, sentence: str) -> AsyncIterator[rtc.AudioFrame]:
        if not sentence.strip():
            return
        whole = await self.synthesize(sentence.strip())
        pcm = np.frombuffer(whole.data, dtype=np.int16)
        for frame in pcm_frames(pcm, whole.sample_rate, frame_duration=self.frame_duration):
            yield frame
