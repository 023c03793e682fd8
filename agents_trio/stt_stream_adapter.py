"""LiveKit's ``stt.StreamAdapter``: an STT that only recognizes whole recordings, made to
stream by a VAD.

A non-streaming STT (``capabilities.streaming`` False) has ``recognize(buffer)``: the
transcript of a finished piece of audio (:class:`RecognizingSTT`). ``StreamAdapter(stt=,
vad=)`` is a streaming STT of this runtime's protocol: each stream feeds its frames to a
VAD stream and keeps them; at the VAD's start of speech it reports ``START_OF_SPEECH`` and
starts collecting the utterance (from ``prefix_padding`` seconds before the speech the VAD
measured), at its end of speech it reports ``END_OF_SPEECH``, hands the utterance to
``recognize`` and reports a ``FINAL_TRANSCRIPT`` when the text is not empty — LiveKit's
order. Utterances are recognized one after another, in the order they were spoken; there
are no interim transcripts.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol, runtime_checkable

import trio
from livekit import rtc

from .model_capabilities import STTCapabilities
from .models import VAD, SpeechEvent, SpeechEventType, VADEvent, VADEventType, VADStream
from .nurseries import open_unwrapping_nursery
from .stt_context import accepts_keyterms, reads_conversation

__all__ = ["RecognizingSTT", "StreamAdapter"]

logger = logging.getLogger("agents_trio")

#: audio kept from before the VAD's start of speech (the VAD reports it late)
DEFAULT_PREFIX_PADDING = 0.5
#: most audio kept while nobody speaks, beyond what the padding needs
_IDLE_HISTORY = 2.0

#: what the recognizing task is handed: a start of speech, or a finished utterance's frames
_Cut = list[rtc.AudioFrame]
_START: _Cut = []


@runtime_checkable
class RecognizingSTT(Protocol):
    """A speech-to-text model that transcribes a whole recording (LiveKit's ``recognize``):
    ``buffer`` is one frame or a list of frames (LiveKit's ``AudioBuffer``); the result is
    a ``FINAL_TRANSCRIPT`` event (no alternative or empty text: nothing was said)."""

    async def recognize(self, buffer: rtc.AudioFrame | list[rtc.AudioFrame], *,
                        language: str | None = None) -> SpeechEvent:
        """The transcript of ``buffer``.

        Cancellation: the stream adapter cancels it when its stream closes; the transcript
        is then not wanted, and the call must let ``trio.Cancelled`` through.
        """
        ...


class StreamAdapter:
    """``stt`` made streaming by ``vad`` (see the module docstring).

    Args:
        stt: The whole-recording STT (:class:`RecognizingSTT`).
        vad: The VAD that finds the utterances (this runtime's protocol).
        language: Passed to each ``recognize`` (None: the STT's default).
        prefix_padding: Seconds of audio kept from before the speech the VAD measured.

    Raises:
        TypeError: ``stt`` has no ``recognize``, or ``vad`` is no VAD.
        ValueError: A negative ``prefix_padding``.
    """

    def __init__(self, *, stt: RecognizingSTT, vad: VAD, language: str | None = None,
                 prefix_padding: float = DEFAULT_PREFIX_PADDING) -> None:
        if not isinstance(stt, RecognizingSTT):
            raise TypeError(f"StreamAdapter needs an STT with `async recognize(buffer)`, got "
                            f"{stt!r}")
        if not isinstance(vad, VAD):
            raise TypeError(f"StreamAdapter needs a VAD (`stream()`), got {vad!r}")
        if prefix_padding < 0:
            raise ValueError(f"prefix_padding must be >= 0, got {prefix_padding}")
        self.stt = stt
        self.vad = vad
        self.language = language
        self.prefix_padding = prefix_padding
        inner = getattr(stt, "capabilities", None)
        self.capabilities = STTCapabilities(
            streaming=True, interim_results=False, diarization=False,
            keyterms=bool(getattr(inner, "keyterms", False)),
            chat_context=bool(getattr(inner, "chat_context", False)))

    @property
    def wrapped_stt(self) -> RecognizingSTT:
        return self.stt

    def update_session_keyterms(self, keyterms: list[str]) -> None:
        """Passed on to the wrapped STT when it accepts keyterms."""
        if accepts_keyterms(self.stt):
            self.stt.update_session_keyterms(keyterms)  # type: ignore[attr-defined]

    def push_conversation_item(self, event: Any) -> None:  # noqa: ANN401 - the session event
        """Passed on to the wrapped STT when it reads conversation turns."""
        if reads_conversation(self.stt):
            self.stt.push_conversation_item(event)  # type: ignore[attr-defined]

    async def recognize(self, buffer: rtc.AudioFrame | list[rtc.AudioFrame], *,
                        language: str | None = None) -> SpeechEvent:
        """The wrapped STT's transcript of ``buffer``.

        Cancellation: cancels the wrapped STT's recognition.
        """
        return await self.stt.recognize(buffer, language=language or self.language)

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[AdaptedStream]:
        """A streaming recognition (``push_frame``, ``end_input``, speech events out).

        Cancellation: leaving the block closes the VAD stream and cancels a recognition in
        progress; its transcript is not reported.
        """
        send, receive = trio.open_memory_channel[SpeechEvent](64)
        async with self.vad.stream() as vad_stream, open_unwrapping_nursery() as nursery:
            stream = AdaptedStream(self, vad_stream, send, receive)
            nursery.start_soon(stream.run)
            yield stream
            nursery.cancel_scope.cancel()


class AdaptedStream:
    """One stream of a :class:`StreamAdapter`: frames in, speech events out."""

    def __init__(self, adapter: StreamAdapter, vad_stream: VADStream,
                 send: trio.MemorySendChannel[SpeechEvent],
                 receive: trio.MemoryReceiveChannel[SpeechEvent]) -> None:
        self._adapter = adapter
        self._vad = vad_stream
        self._events_out = send
        self._events = receive
        self._recent: collections.deque[rtc.AudioFrame] = collections.deque()
        self._recent_seconds = 0.0
        self._utterance: list[rtc.AudioFrame] | None = None
        # VAD events returned by push_frame (LiveKit's fast path) join the iterated ones here
        self._vad_events_send, self._vad_events = trio.open_memory_channel[VADEvent](
            float("inf"))
        self._ended = False

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        """Give ``frame`` to the VAD and keep it for the utterance. Never blocks."""
        if self._ended:
            return
        self._keep(frame)
        events = self._vad.push_frame(frame)
        for event in events or ():
            try:
                self._vad_events_send.send_nowait(event)
            except trio.ClosedResourceError:
                return  # the VAD stream has ended: nothing more is recognized

    def end_input(self) -> None:
        """No more audio: the last utterance is finished by the VAD, then the events end."""
        if not self._ended:
            self._ended = True
            self._vad.end_input()

    def __aiter__(self) -> AsyncIterator[SpeechEvent]:
        return self._events.__aiter__()

    async def run(self) -> None:
        """Turn VAD events into speech events (see the module docstring).

        VAD events are handled as they come (the utterance is cut from the audio then, not
        after the recognition of the one before); the cut utterances are recognized one at
        a time by a second task, which reports each one's start, end and transcript in turn.

        Cancellation: stops; a recognition in progress is cancelled.
        """
        cut_send, cut_receive = trio.open_memory_channel[_Cut](float("inf"))
        async with open_unwrapping_nursery() as nursery:
            nursery.start_soon(self._pump_vad_events)
            nursery.start_soon(self._recognize_cuts, cut_receive)
            async with cut_send:
                async for event in self._vad_events:
                    cut = self._on_vad_event(event)
                    if cut is not None:
                        cut_send.send_nowait(cut)

    async def _recognize_cuts(self, cuts: trio.MemoryReceiveChannel[_Cut]) -> None:
        async with self._events_out:
            async for cut in cuts:
                if cut is _START:
                    await self._events_out.send(SpeechEvent(
                        type=SpeechEventType.START_OF_SPEECH))
                    continue
                await self._events_out.send(SpeechEvent(type=SpeechEventType.END_OF_SPEECH))
                if not cut:
                    continue
                result = await self._adapter.recognize(rtc.combine_audio_frames(cut))
                if result.alternatives and result.alternatives[0].text:
                    await self._events_out.send(SpeechEvent(
                        type=SpeechEventType.FINAL_TRANSCRIPT,
                        alternatives=[result.alternatives[0]]))

    async def _pump_vad_events(self) -> None:
        async with self._vad_events_send:
            async for event in self._vad:
                self._vad_events_send.send_nowait(event)

    def _keep(self, frame: rtc.AudioFrame) -> None:
        if self._utterance is not None:
            self._utterance.append(frame)
            return
        self._recent.append(frame)
        self._recent_seconds += frame.duration
        limit = self._adapter.prefix_padding + _IDLE_HISTORY
        while self._recent and self._recent_seconds - self._recent[0].duration >= limit:
            self._recent_seconds -= self._recent.popleft().duration

    def _on_vad_event(self, event: VADEvent) -> _Cut | None:
        if event.type is VADEventType.START_OF_SPEECH and self._utterance is None:
            self._utterance = _tail(self._recent, event.speech_duration
                                    + self._adapter.prefix_padding)
            self._recent.clear()
            self._recent_seconds = 0.0
            return _START
        if event.type is VADEventType.END_OF_SPEECH and self._utterance is not None:
            utterance, self._utterance = self._utterance, None
            return utterance
        return None


def _tail(frames: Sequence[rtc.AudioFrame], seconds: float) -> list[rtc.AudioFrame]:
    """The last frames of ``frames`` covering at least ``seconds`` (all if shorter)."""
    kept: list[rtc.AudioFrame] = []
    total = 0.0
    for frame in reversed(frames):
        if total >= seconds:
            break
        kept.append(frame)
        total += frame.duration
    kept.reverse()
    return kept
