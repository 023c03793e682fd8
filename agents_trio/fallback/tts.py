"""TTS FallbackAdapter: several text-to-speech models tried in order, with availability
tracking and recovery probes (LiveKit's ``tts.FallbackAdapter``).

A segment goes to the first available TTS. The text is recorded as it arrives, so when a
TTS fails before it produced any audio, the next one gets the whole text again (replayed,
then live). A TTS that fails after audio went out ends the segment there (the rest of the
text is not spoken twice, as in LiveKit). A retryable failure is first retried on the same
TTS, up to ``max_retry_per_tts`` times. Failing marks the TTS unavailable
(``tts_availability_changed``); every TTS skipped or failed in a segment gets one recovery
probe once the segment's text is complete: it synthesizes that text and, when that works,
the TTS is available again. Probes are tasks of the adapter's nursery (``async with
adapter:``, see ``agents_trio.fallback._base``).

Every TTS's audio is converted to the adapter's ``sample_rate`` (by default the highest of
the TTSs').
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator
from contextlib import AbstractAsyncContextManager, aclosing
from dataclasses import dataclass

import trio
from livekit import rtc

from .._errors import APIConnectionError
from ..io.resample import FrameResampler
from ..models import TTS
from ._base import FallbackBase, label, yield_to_cancellation

logger = logging.getLogger("agents_trio")


@dataclass
class AvailabilityChangedEvent:
    tts: TTS
    available: bool


class _Text:
    """A segment's text as it arrives, readable again from the start by each attempt."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.complete = False
        self._changed = trio.Event()

    async def record(self, text: AsyncIterable[str]) -> None:
        async for part in text:
            self.parts.append(part)
            self._wake()
        self.complete = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def replay(self) -> AsyncIterator[str]:
        """Everything recorded so far, then the rest as it arrives."""
        sent = 0
        while True:
            while sent < len(self.parts):
                sent += 1
                yield self.parts[sent - 1]
            if self.complete:
                return
            await self._changed.wait()


class FallbackAdapter(FallbackBase[TTS]):
    """A TTS made of several TTSs, tried in order (see the module docstring).

    Args:
        tts: The TTSs, most preferred first; they must have the same number of channels.
        max_retry_per_tts: Retries of a retryable failure on the same TTS (before any audio)
            before moving on.
        sample_rate: The rate of the audio out; by default the highest of the TTSs'.

    Raises:
        ValueError: No TTS, different channel counts, or a negative retry count.
    """

    def __init__(self, tts: list[TTS], *, max_retry_per_tts: int = 2,
                 sample_rate: int | None = None) -> None:
        super().__init__(tts, kind="tts", make_event=lambda m, ok: AvailabilityChangedEvent(
            tts=m, available=ok))
        if len({t.num_channels for t in tts}) != 1:
            raise ValueError("all TTS must have the same number of channels")
        if max_retry_per_tts < 0:
            raise ValueError("max_retry_per_tts must not be negative")
        self.max_retry_per_tts = max_retry_per_tts
        self.sample_rate = sample_rate if sample_rate is not None else max(
            t.sample_rate for t in tts)
        self.num_channels = tts[0].num_channels

    def stream(self, text: AsyncIterable[str]
               ) -> AbstractAsyncContextManager[AsyncIterable[rtc.AudioFrame]]:
        """The audio of ``text`` from the first TTS that works, at :attr:`sample_rate`.

        Raises:
            RuntimeError: The adapter is not open (``async with``).
        """
        self.check_open()
        return self._fallback(text)

    @trio.as_safe_channel
    async def _fallback(self, text: AsyncIterable[str]) -> AsyncGenerator[rtc.AudioFrame, None]:
        start = trio.current_time()
        recorded = _Text()
        all_failed = self.all_failed()
        if all_failed:
            logger.error("all TTSs are unavailable, retrying them all")
        to_probe: list[int] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(recorded.record, text)
            try:
                for i, tts in enumerate(self.models):
                    if self.status[i].available or all_failed:
                        played = [False]
                        try:
                            async with aclosing(self._attempt(tts, recorded, played)) as out:
                                async for frame in out:
                                    yield frame
                            return
                        except Exception as e:
                            self.set_available(i, False)
                            if played[0]:
                                logger.warning("%s failed after producing audio; the rest "
                                               "of the segment is dropped: %r", label(tts), e)
                                return
                            logger.warning("%s failed, switching to the next TTS: %r",
                                           label(tts), e)
                    to_probe.append(i)
                raise APIConnectionError(
                    f"all TTSs failed ({[label(m) for m in self.models]}) after "
                    f"{trio.current_time() - start:.1f} seconds")
            finally:
                nursery.cancel_scope.cancel()
                if recorded.complete:  # a probe needs the whole text
                    for i in to_probe:
                        self._start_probe(i, list(recorded.parts))

    async def _attempt(self, tts: TTS, recorded: _Text,
                       played: list[bool]) -> AsyncGenerator[rtc.AudioFrame, None]:
        retries = 0
        resampler = FrameResampler(self.sample_rate)
        while True:
            try:
                async with tts.stream(recorded.replay()) as frames:
                    async for frame in frames:
                        for out in resampler.push(frame):
                            played[0] = True
                            yield out
                for out in resampler.flush():
                    yield out
                return
            except Exception as e:
                await yield_to_cancellation()  # a cancelled caller's echo is no failure
                if retries >= self.max_retry_per_tts or played[0] or not getattr(
                        e, "retryable", False):
                    raise
                retries += 1

    def _start_probe(self, index: int, parts: list[str]) -> None:
        tts = self.models[index]

        async def text() -> AsyncIterator[str]:
            for part in parts:
                yield part

        async def probe() -> bool:
            try:
                async with tts.stream(text()) as frames:
                    async for _ in frames:
                        pass
            except Exception as e:
                logger.warning("%s recovery failed: %r", label(tts), e)
                return False
            logger.info("tts.FallbackAdapter: %s recovered", label(tts))
            return True

        if parts:
            self.start_probe(index, probe)
