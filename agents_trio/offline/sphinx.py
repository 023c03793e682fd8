"""PocketSphinx as a Trio STT, decoding in a subprocess.

The decoder holds the GIL while it works (PocketSphinx does not release it), so it runs in a
child process of its own (``_sphinx_worker.py``): audio goes to it through a pipe, results
come back as JSON lines, and the Trio loop never waits on the decoder.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import msgspec
import numpy as np
import trio
from livekit import rtc

from .._errors import AgentsTrioError
from ..io.resample import FrameResampler
from ..io.wav import frame_samples
from ..models import SpeechData, SpeechEvent, SpeechEventType
from ._errors import VOICE_EXTRA, MissingDependency

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

RATE = 16000
_WORKER = Path(__file__).with_name("_sphinx_worker.py")


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


_decode = msgspec.json.Decoder(_Message).decode


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

        Cancellation: leaving the block (for any reason) kills the process and reaps it.
        """
        with tempfile.TemporaryDirectory(prefix="agents-trio-sphinx-") as tmp:
            args = [sys.executable, str(_WORKER), "--vad-mode", str(self.vad_mode),
                    "--min-speech", str(self.min_speech)]
            if self.phrases:
                path = os.path.join(tmp, "phrases.jsgf")
                Path(path).write_text(jsgf_grammar(self.phrases))
                args += ["--jsgf", path]
            elif self.keyphrases:
                path = os.path.join(tmp, "keyphrases.txt")
                Path(path).write_text("".join(f"{k} /{self.keyphrase_threshold:g}/\n"
                                              for k in self.keyphrases))
                args += ["--kws", path]
            process = await trio.lowlevel.open_process(
                args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            stream = SphinxStream(process, self.language)
            try:
                await stream.wait_ready()
                async with _unwrapping_nursery() as nursery:
                    nursery.start_soon(stream.run)
                    yield stream
                    nursery.cancel_scope.cancel()
            finally:
                with trio.CancelScope(shield=True):
                    if process.returncode is None:
                        process.kill()
                    await process.wait()


@asynccontextmanager
async def _unwrapping_nursery() -> AsyncIterator[trio.Nursery]:
    """A nursery from which a single error escapes unwrapped."""
    try:
        async with trio.open_nursery() as nursery:
            yield nursery
    except BaseExceptionGroup as group:
        exc: BaseException = group
        while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
            exc = exc.exceptions[0]
        raise exc from exc.__cause__


class SphinxStream:
    """Frames in (``push_frame``, never blocks: at most ``max_backlog`` seconds of audio wait
    for the decoder, older frames are dropped and counted in ``dropped``), speech events out.
    """

    max_backlog = 30.0

    def __init__(self, process: trio.Process, language: str) -> None:
        self._process = process
        self._language = language
        self._resampler = FrameResampler(RATE)
        self._audio_send, self._audio_recv = trio.open_memory_channel[bytes](
            math.ceil(self.max_backlog / 0.01))
        self._events_send, self._events_recv = trio.open_memory_channel[SpeechEvent](math.inf)
        self._stderr = b""
        self._stdout = b""
        self._draining = False
        self._stderr_done = trio.Event()
        self.dropped = 0

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        for f in self._resampler.push(frame):
            self._send(frame_samples(f))

    def _send(self, samples: np.ndarray) -> None:
        try:
            self._audio_send.send_nowait(samples.tobytes())
        except trio.WouldBlock:
            self.dropped += 1
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def end_input(self) -> None:
        for f in self._resampler.flush():
            self._send(frame_samples(f))
        self._audio_send.close()

    def __aiter__(self) -> AsyncIterator[SpeechEvent]:
        return self._events_recv.__aiter__()

    async def wait_ready(self) -> None:
        """Wait for the decoder's ``ready`` line.

        Raises:
            SphinxError: the process ended first (its stderr is in the message).
        """
        line = await self._next_line()
        if line is None or _decode(line).type != "ready":
            raise SphinxError(await self._failure())

    async def run(self) -> None:
        self._draining = True
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._drain_stderr)
            nursery.start_soon(self._write)
            await self._read()

    async def _write(self) -> None:
        stdin = self._process.stdin
        assert stdin is not None
        try:
            async for data in self._audio_recv:
                await stdin.send_all(data)
            await stdin.aclose()
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass   # the process ended; _read reports it

    async def _drain_stderr(self) -> None:
        stderr = self._process.stderr
        assert stderr is not None
        try:
            async for chunk in stderr:
                self._stderr = (self._stderr + chunk)[-4000:]
        finally:
            self._stderr_done.set()

    async def _next_line(self) -> bytes | None:
        stdout = self._process.stdout
        assert stdout is not None
        while b"\n" not in self._stdout:
            chunk = await stdout.receive_some()
            if not chunk:
                return None
            self._stdout += chunk
        line, self._stdout = self._stdout.split(b"\n", 1)
        return line

    async def _failure(self) -> str:
        code = await self._process.wait()
        with trio.move_on_after(1.0):
            if self._draining:       # the drain task reads stderr to its end
                await self._stderr_done.wait()
            else:
                await self._drain_stderr()
        tail = self._stderr.decode(errors="replace").strip().splitlines()[-5:]
        return f"the PocketSphinx process exited with {code}: " + " | ".join(tail)

    async def _read(self) -> None:
        async with self._events_send:
            while (line := await self._next_line()) is not None:
                ev = self._event(_decode(line))
                if ev is not None:
                    self._events_send.send_nowait(ev)
            if await self._process.wait() != 0:
                raise SphinxError(await self._failure())

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
