"""STT FallbackAdapter: several speech-to-text models tried in order, with availability
tracking and recovery probes (LiveKit's ``stt.FallbackAdapter``).

A stream goes to the first available STT. When that STT's stream fails (it cannot be opened
within ``attempt_timeout``, or it raises), the STT is retried ``max_retry_per_stt`` times
after ``retry_interval`` when the error is retryable, then marked unavailable (a
``stt_availability_changed`` event) and the audio that follows goes to a stream of the next
STT (what was said during the failure is not replayed, as in LiveKit). When every STT is
unavailable, all are tried again.

Each unavailable STT reached by a stream gets one recovery probe: a stream of that STT fed
the same live audio; it recovers (another event) when it produces a non-empty final
transcript. Probes are tasks of the adapter's nursery (``async with adapter:``, see
``agents_trio.fallback._base``); a probe's input ends with the stream that feeds it, so it
never outlives it by more than its STT's closing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio
from livekit import rtc

from .._errors import APIConnectionError
from ..model_capabilities import STTCapabilities
from ..models import STT, VAD, SpeechEvent, SpeechEventType, STTStream
from ..stt_context import accepts_keyterms, reads_conversation
from ..stt_stream_adapter import StreamAdapter
from ._base import FallbackBase, label, yield_to_cancellation

logger = logging.getLogger("agents_trio")


@dataclass
class AvailabilityChangedEvent:
    stt: STT
    available: bool


class _Feed:
    """The live audio of one request, copied to its current stream and its probes."""

    def __init__(self) -> None:
        self.main: STTStream | None = None
        self.probes: list[STTStream] = []
        self.ended = False
        # frames pushed while no stream serves (it is opening): given to the next one
        self.pending: list[rtc.AudioFrame] = []

    def serve_with(self, stream: STTStream) -> None:
        self.main = stream
        pending, self.pending = self.pending, []
        for frame in pending:
            stream.push_frame(frame)
        if self.ended:
            stream.end_input()

    def targets(self) -> list[STTStream]:
        return ([self.main] if self.main is not None else []) + self.probes

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        if self.main is None:
            self.pending.append(frame)
        for stream in self.targets():
            try:
                stream.push_frame(frame)
            except Exception:
                logger.exception("an STT stream refused a frame")

    def end_input(self) -> None:
        self.ended = True
        for stream in self.targets():
            try:
                stream.end_input()
            except Exception:
                logger.exception("an STT stream refused the end of its input")


class FallbackSTTStream:
    """What :meth:`FallbackAdapter.stream` yields: frames in (``push_frame``, non-blocking),
    the events of whichever STT serves out."""

    def __init__(self, feed: _Feed, events: trio.MemoryReceiveChannel[SpeechEvent | BaseException]) -> None:
        self._feed = feed
        self._events = events

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        self._feed.push_frame(frame)

    def end_input(self) -> None:
        self._feed.end_input()

    def __aiter__(self) -> AsyncIterator[SpeechEvent]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[SpeechEvent]:
        async for event in self._events:
            if isinstance(event, BaseException):
                raise event
            yield event


class FallbackAdapter(FallbackBase[STT]):
    """An STT made of several STTs, tried in order (see the module docstring).

    Args:
        stt: The STTs, most preferred first.
        vad: Segments the audio for an STT that does not stream (``capabilities.streaming``
            False, ``recognize(buffer)``): such an STT is wrapped in ``stt.StreamAdapter``
            with it, as LiveKit does.
        attempt_timeout: Seconds an STT's stream may take to open.
        max_retry_per_stt: Retries of a retryable failure on the same STT before moving on.
        retry_interval: Seconds between those retries.

    Raises:
        ValueError: No STT, or a non-positive timeout, a negative retry count or interval,
            or an STT that does not stream and no ``vad``.
    """

    def __init__(self, stt: list[STT], *, vad: VAD | None = None, attempt_timeout: float = 10.0,
                 max_retry_per_stt: int = 1, retry_interval: float = 5) -> None:
        stt = [_streaming(model, vad) for model in stt]
        super().__init__(stt, kind="stt", make_event=lambda m, ok: AvailabilityChangedEvent(
            stt=m, available=ok))
        if attempt_timeout <= 0 or max_retry_per_stt < 0 or retry_interval < 0:
            raise ValueError("attempt_timeout must be positive, max_retry_per_stt and "
                             "retry_interval not negative")
        self.vad = vad
        self.attempt_timeout = attempt_timeout
        self.max_retry_per_stt = max_retry_per_stt
        self.retry_interval = retry_interval

    @property
    def capabilities(self) -> STTCapabilities:
        """As LiveKit's: streaming; interim results when every STT has them; ``keyterms``
        and ``chat_context`` when any STT takes them (each is given what it takes)."""
        def every(name: str) -> bool:
            return all(getattr(getattr(m, "capabilities", None), name, False)
                       for m in self.models)
        return STTCapabilities(
            streaming=True, interim_results=every("interim_results"),
            diarization=every("diarization"), manual_flush=every("manual_flush"),
            keyterms=any(accepts_keyterms(m) for m in self.models),
            chat_context=any(reads_conversation(m) for m in self.models))

    def update_session_keyterms(self, keyterms: list[str]) -> None:
        """The session's keyterms, to every STT that takes them."""
        for model in self.models:
            if accepts_keyterms(model):
                model.update_session_keyterms(keyterms)  # type: ignore[attr-defined]

    def push_conversation_item(self, event: Any) -> None:  # noqa: ANN401 - the session event
        """A conversation turn, to every STT that reads them."""
        for model in self.models:
            if reads_conversation(model):
                model.push_conversation_item(event)  # type: ignore[attr-defined]

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[FallbackSTTStream]:
        """A recognition stream served by the first STT that works.

        Raises:
            RuntimeError: The adapter is not open (``async with``).

        Cancellation: leaving the block (or cancelling it) closes the serving STT's stream
        and ends the input of the probes it fed.
        """
        self.check_open()
        feed = _Feed()
        send, receive = trio.open_memory_channel[SpeechEvent | BaseException](256)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._serve, feed, send)
            try:
                yield FallbackSTTStream(feed, receive)
            finally:
                feed.end_input()  # the probes fed by this stream finish with it
                nursery.cancel_scope.cancel()

    async def _serve(self, feed: _Feed, send: trio.MemorySendChannel[SpeechEvent | BaseException]) -> None:
        async with send:
            start = trio.current_time()
            all_failed = self.all_failed()
            if all_failed:
                logger.error("all STTs are unavailable, retrying them all")
            for i, stt in enumerate(self.models):
                if self.status[i].available or all_failed:
                    try:
                        await self._attempt(stt, feed, send)
                        return
                    except Exception as e:
                        logger.warning("%s failed, switching to the next STT: %r", label(stt), e)
                        self.set_available(i, False)
                self._start_probe(i, feed)
            await send.send(APIConnectionError(
                f"all STTs failed ({[label(m) for m in self.models]}) after "
                f"{trio.current_time() - start:.1f} seconds"))

    async def _attempt(self, stt: STT, feed: _Feed,
                       send: trio.MemorySendChannel[SpeechEvent | BaseException]) -> None:
        retries = 0
        while True:
            try:
                # the deadline covers opening the stream only (then it is lifted); a scope
                # around the whole block keeps the STT's own scopes nested inside it
                with trio.CancelScope(deadline=trio.current_time() + self.attempt_timeout
                                      ) as opening:
                    async with stt.stream() as stream:
                        opening.deadline = math.inf
                        feed.serve_with(stream)
                        try:
                            async for event in stream:
                                await send.send(event)
                        finally:
                            feed.main = None
                if opening.cancelled_caught:
                    raise trio.TooSlowError(f"{label(stt)} did not open its stream in time")
                return
            except Exception as e:
                await yield_to_cancellation()  # a cancelled caller's echo is no failure
                retryable = isinstance(e, trio.TooSlowError) or bool(
                    getattr(e, "retryable", False))
                if retries >= self.max_retry_per_stt or not retryable:
                    raise
                retries += 1
                await trio.sleep(self.retry_interval)

    def _start_probe(self, index: int, feed: _Feed) -> None:
        stt = self.models[index]
        if feed.ended:
            return  # no more audio to probe with

        async def probe() -> bool:
            try:
                async with stt.stream() as stream:
                    feed.probes.append(stream)
                    try:
                        async for event in stream:
                            if (event.type is SpeechEventType.FINAL_TRANSCRIPT
                                    and event.alternatives and event.alternatives[0].text):
                                logger.info("stt.FallbackAdapter: %s recovered", label(stt))
                                return True
                    finally:
                        feed.probes.remove(stream)
            except Exception as e:
                logger.warning("%s recovery failed: %r", label(stt), e)
            return False

        self.start_probe(index, probe)


def _streaming(model: STT, vad: VAD | None) -> STT:
    """``model``, or ``model`` made streaming by ``vad`` when it says it does not stream."""
    if getattr(getattr(model, "capabilities", None), "streaming", True):
        return model
    if vad is None:
        raise ValueError(f"{label(model)} does not stream: give FallbackAdapter a vad= to "
                         "segment the audio for it (or wrap it in stt.StreamAdapter)")
    return StreamAdapter(stt=model, vad=vad)  # type: ignore[arg-type]
