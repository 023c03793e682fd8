"""LiveKit's ``tts.StreamAdapter``: a TTS spoken sentence by sentence.

``StreamAdapter(tts=my_tts)`` is itself a TTS (this runtime's protocol): the text of a
segment is split into sentences as it arrives (``sentence_tokenizer``, default
``tokenize.basic.SentenceTokenizer()``), and each sentence is synthesized by the wrapped TTS
on its own, one after another, while the next text is still being read. A TTS that only
starts once its text has ended then starts speaking after the first sentence instead of after
the whole reply.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager

import trio
from livekit import rtc

from .model_capabilities import TTSCapabilities
from .models import TTS
from .nurseries import open_unwrapping_nursery
from .tokenize import SentenceStream, SentenceTokenizer, basic

__all__ = ["StreamAdapter"]


class StreamAdapter:
    """The wrapped ``tts``, fed one sentence at a time (see the module).

    Args:
        tts: The TTS to wrap (this runtime's protocol; a LiveKit plugin through
            ``agents_trio.plugins.adapt()`` first).
        sentence_tokenizer: Splits the text (default: LiveKit's basic rules).
        text_pacing: Not supported (must be False).

    Raises:
        TypeError: ``tts`` is not a TTS.
        ValueError: ``text_pacing`` set.
    """

    def __init__(self, *, tts: TTS, sentence_tokenizer: SentenceTokenizer | None = None,
                 text_pacing: object = False) -> None:
        if not isinstance(tts, TTS):
            raise TypeError(f"StreamAdapter wraps a TTS (sample_rate, num_channels, "
                            f"stream(text)), got {tts!r}")
        if text_pacing:
            raise ValueError("text_pacing is not supported by agents_trio's StreamAdapter")
        self.tts = tts
        self.sentence_tokenizer = sentence_tokenizer or basic.SentenceTokenizer()
        self.capabilities = TTSCapabilities(streaming=True)

    @property
    def sample_rate(self) -> int:
        return self.tts.sample_rate

    @property
    def num_channels(self) -> int:
        return self.tts.num_channels

    @asynccontextmanager
    async def stream(self, text: AsyncIterable[str]
                     ) -> AsyncIterator[AsyncIterable[rtc.AudioFrame]]:
        """The audio of ``text``, sentence after sentence (a TTS's ``stream``).

        Cancellation: leaving the block stops reading the text and the synthesis in
        progress.
        """
        sentences = self.sentence_tokenizer.stream()
        async with open_unwrapping_nursery() as nursery:
            nursery.start_soon(_feed, text, sentences)
            yield self._spoken(sentences)
            nursery.cancel_scope.cancel()

    async def _spoken(self, sentences: SentenceStream) -> AsyncIterator[rtc.AudioFrame]:
        async for sentence in sentences:
            async with self.tts.stream(_one(sentence.token)) as audio:
                async for frame in audio:
                    yield frame


async def _feed(text: AsyncIterable[str], sentences: SentenceStream) -> None:
    try:
        async for chunk in text:
            sentences.push_text(chunk)
    finally:
        with trio.CancelScope(shield=True):
            sentences.end_input()


async def _one(text: str) -> AsyncIterator[str]:
    yield text
