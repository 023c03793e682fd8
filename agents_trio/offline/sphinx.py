"""PocketSphinx as a Trio STT, decoding in a subprocess.

The decoder holds the GIL while it works (PocketSphinx does not release it), so it runs in a
child process of its own: the step of an ``agents_trio.blocking`` worker in process mode
(``_sphinx_decoder.UtteranceDecoder``), fed one frame at a time through bounded queues, so
the Trio loop never waits on the decoder.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import numpy as np
import trio
from livekit import rtc

from .._errors import AgentsTrioError
from ..blocking import BlockingWorker, BlockingWorkerError, open_blocking_worker
from ..io.resample import FrameResampler
from ..io.wav import frame_samples
from ..models import SpeechData, SpeechEvent, SpeechEventType
from ._errors import VOICE_EXTRA, MissingDependency
from ._sphinx_decoder import UtteranceDecoder

RATE = 16000


def check_pocketsphinx() -> None:
    """Raises :class:`MissingDependency` when pocketsphinx is not installed."""
    if importlib.util.find_spec("pocketsphinx") is None:
        raise MissingDependency(f"PocketSphinx is not installed: {VOICE_EXTRA}")


def normalize_phrase(phrase: str) -> str:
    """Lower case words without punctuation (what the recognizer returns)."""
    return " ".join(re.sub(r"[^a-z' ]+", " ", phrase.lower()).split())


def jsgf_grammar(phrases: Sequence[str]) -> str:
    """A JSGF grammar accepting one of ``phrases`` (a grammar that repeats them loses words
    with PocketSphinx's grammar search: an utterance is one phrase)."""
    alternatives = " | ".join(f"( {normalize_phrase(p)} )" for p in phrases if normalize_phrase(p))
    if not alternatives:
        raise ValueError("the grammar needs at least one phrase with words")
    return f"#JSGF V1.0;\ngrammar phrases;\npublic <phrase> = {alternatives} ;\n"


class _Message(msgspec.Struct):
    """A line from the decoder process."""

    type: str
    text: str = ""
    confidence: float = 0.0
    start: float = 0.0
    end: float = 0.0


class SphinxError(AgentsTrioError):
    """The PocketSphinx process failed (its last stderr lines are in the message)."""


class SphinxSTT:
    """Speech to text with PocketSphinx (US English acoustic model shipped with the package).

    Speech detection is strict: PocketSphinx's endpointer at its most aggressive setting
    (``vad_mode=3``) marks speech, an utterance shorter than ``min_speech`` or with no words
    gives no transcript. Each utterance is decoded whole when it ends, and gives
    ``START_OF_SPEECH``, ``FINAL_TRANSCRIPT`` (when words were recognized) and
    ``END_OF_SPEECH`` (no interim transcripts).

    Args:
        phrases: Restrict recognition to these phrases, one per utterance (a JSGF
            grammar): accurate for a known set of sentences (a demo, a test, a command set).
            Words must be in the dictionary.
        keyphrases: Spot these key phrases instead (PocketSphinx keyword search; rough:
            lower ``keyphrase_threshold`` finds more, and more false ones).
        vad_mode: The endpointer's aggressiveness, 0-3.
        min_speech: Shorter utterances give no transcript (seconds).
        language: Reported in the transcripts.

    Raises:
        MissingDependency: pocketsphinx is not installed (``pip install -e '.[voice]'``).
    """

    def __init__(self, *, phrases: Sequence[str] | None = None,
                 keyphrases: Sequence[str] | None = None, vad_mode: int = 3,
                 min_speech: float = 0.2, language: str = "en-US",
                 keyphrase_threshold: float = 1e-30) -> None:
        check_pocketsphinx()
        if phrases and keyphrases:
            raise ValueError("give phrases or keyphrases, not both")
        self.phrases = list(phrases or [])
        self.keyphrases = [normalize_phrase(p) for p in keyphrases or []]
        self.vad_mode = vad_mode
        self.keyphrase_threshold = keyphrase_threshold
        self.min_speech = min_speech
        self.language = language

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[SphinxStream]:
        """A recognition stream on a new decoder process.

        Raises:
            SphinxError: the decoder cannot start (e.g. a phrase has a word missing from the
                dictionary), or its process failed later (raised by the iteration).

        Cancellation: leaving the block (for any reason) stops the process and reaps it.
        """
        with tempfile.TemporaryDirectory(prefix="agents-trio-sphinx-") as tmp:
            jsgf = kws = None
            if self.phrases:
                jsgf = os.path.join(tmp, "phrases.jsgf")
                Path(jsgf).write_text(jsgf_grammar(self.phrases))
            elif self.keyphrases:
                kws = os.path.join(tmp, "keyphrases.txt")
                Path(kws).write_text("".join(f"{k} /{self.keyphrase_threshold:g}/\n"
                                             for k in self.keyphrases))
            factory = functools.partial(UtteranceDecoder, jsgf=jsgf, kws=kws,
                                        vad_mode=self.vad_mode, min_speech=self.min_speech)
            async with open_blocking_worker(factory, mode="process",
                                            max_pending=SphinxStream.max_pending) as worker:
                try:
                    worker.send_nowait(b"")       # raises if the decoder did not start
                except BlockingWorkerError as e:
                    raise SphinxError(f"PocketSphinx did not start: {_cause(e)}") from e
                stream = SphinxStream(worker, self.language)
                yield stream


def _cause(error: BaseException) -> str:
    cause = error.__cause__
    return f"{type(cause).__name__}: {cause}" if cause is not None else str(error)


class SphinxStream:
    """Frames in (``push_frame``, never blocks: at most ``max_pending`` frames of 20 ms wait
    for the decoder, later frames are dropped and counted in ``dropped``), speech events out.
    """

    max_pending = 1500      # 30 s of audio

    def __init__(self, worker: BlockingWorker[bytes, dict[str, object]], language: str
                 ) -> None:
        self._worker = worker
        self._language = language
        self._resampler = FrameResampler(RATE)
        self.dropped = 0

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        for f in self._resampler.push(frame):
            self._send(frame_samples(f))

    def _send(self, samples: np.ndarray) -> None:
        try:
            self._worker.send_nowait(samples.tobytes())
        except trio.WouldBlock:
            self.dropped += 1
        except (trio.ClosedResourceError, BlockingWorkerError):
            pass   # input ended, or the worker failed: the iteration raises it

    def end_input(self) -> None:
        for f in self._resampler.flush():
            self._send(frame_samples(f))
        self._worker.end_input()

    def __aiter__(self) -> AsyncIterator[SpeechEvent]:
        return self._events()

    async def _events(self) -> AsyncIterator[SpeechEvent]:
        while True:
            try:
                msg = await self._worker.receive()
            except trio.EndOfChannel:
                return
            except BlockingWorkerError as e:
                raise SphinxError(f"PocketSphinx failed: {_cause(e)}") from e
            ev = self._event(msgspec.convert(msg, _Message))
            if ev is not None:
                yield ev

    def _event(self, msg: _Message) -> SpeechEvent | None:
        if msg.type == "start":
            return SpeechEvent(type=SpeechEventType.START_OF_SPEECH)
        if msg.type == "end":
            return SpeechEvent(type=SpeechEventType.END_OF_SPEECH)
        if msg.type == "final":
            return SpeechEvent(type=SpeechEventType.FINAL_TRANSCRIPT, alternatives=[SpeechData(
                text=" ".join(msg.text.split()), confidence=msg.confidence,
                language=self._language, start_time=msg.start, end_time=msg.end)])
        return None
