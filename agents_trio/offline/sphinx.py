"""PocketSphinx as a Trio STT, decoding in a subprocess.

The decoder holds the GIL while it works (PocketSphinx does not release it), so it runs in a
child process of its own (``_sphinx_worker.py``): audio goes to it through a pipe, results
come back as JSON lines, and the Trio loop never waits on the decoder.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import numpy as np
import trio
from livekit import rtc

from .._errors import AgentsTrioError
from ..io.resample import FrameResampler
from ..io.wav import frame_samples
from ..models import SpeechData, SpeechEvent, SpeechEventType
from ._errors import VOICE_EXTRA, MissingDependency

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
        keyphrases: Spot these key phrases instead (PocketSphinx keyword search).
        vad_mode: The endpointer's aggressiveness, 0-3.
        min_speech: Shorter utterances give no transcript (seconds).
        language: Reported in the transcripts.

    Raises:
        MissingDependency: pocketsphinx is not installed (``pip install -e '.[voice]'``).
    """

    def __init__(self, *, phrases: Sequence[str] | None = None,
                 keyphrases: Sequence[str] | None = None, vad_mode: int = 3,
                 min_speech: float = 0.2, language: str = "en-US") -> None:
        check_pocketsphinx()
        if phrases and keyphrases:
            raise ValueError("give phrases or keyphrases, not both")
        self.phrases = list(phrases or [])
        self.keyphrases = [normalize_phrase(p) for p in keyphrases or []]
        self.vad_mode = vad_mode
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
                Path(path).write_text("".join(f"{k} /1e-20/\n" for k in self.keyphrases))
                args += ["--kws", path]
            async with trio.open_nursery() as nursery:
                process = await trio.lowlevel.open_process(
                    args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE)
                stream = SphinxStream(process, self.language)
                try:
                    await nursery.start(stream.run)
                    yield stream
                finally:
                    nursery.cancel_scope.cancel()
                    with trio.CancelScope(shield=True):
                        if process.returncode is None:
                            process.kill()
                        await process.wait()


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

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._drain_stderr)
            await nursery.start(self._read)
            task_status.started()
            nursery.start_soon(self._write)

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
        assert self._process.stderr is not None
        async for chunk in self._process.stderr:
            self._stderr = (self._stderr + chunk)[-4000:]

    async def _read(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        buffer = b""
        started = False
        async with self._events_send:
            async for chunk in stdout:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    msg = json.loads(line)
                    if msg["type"] == "ready":
                        started = True
                        task_status.started()
                        continue
                    ev = self._event(msg)
                    if ev is not None:
                        self._events_send.send_nowait(ev)
            code = await self._process.wait()
            if code != 0 or not started:
                tail = self._stderr.decode(errors="replace").strip().splitlines()[-5:]
                raise SphinxError(f"the PocketSphinx process exited with {code}: "
                                  + " | ".join(tail))

    def _event(self, msg: dict[str, object]) -> SpeechEvent | None:
        kind = msg["type"]
        if kind == "start":
            return SpeechEvent(type=SpeechEventType.START_OF_SPEECH)
        if kind == "end":
            return SpeechEvent(type=SpeechEventType.END_OF_SPEECH)
        if kind == "final":
            return SpeechEvent(type=SpeechEventType.FINAL_TRANSCRIPT, alternatives=[SpeechData(
                text=str(msg["text"]), confidence=float(msg["confidence"]),  # type: ignore[arg-type]
                language=self._language, start_time=float(msg["start"]),  # type: ignore[arg-type]
                end_time=float(msg["end"]))])  # type: ignore[arg-type]
        return None
