"""Sample-rate conversion of the agent's voice to the rate its audio output declares.

An output declares its rate the way LiveKit's ``AudioOutput`` does: a ``sample_rate``
attribute (or property); ``None`` means it takes any rate. The session passes the TTS frames
through :func:`resample_frames` on their way to the output, so a TTS at 24 kHz plays on an
output at 48 kHz (or 16 kHz) with the same duration.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from livekit import rtc


def output_sample_rate(output: object) -> int | None:
    """The rate ``output`` declares (``sample_rate``), or None when it takes any rate."""
    rate = getattr(output, "sample_rate", None)
    return int(rate) if rate else None


class FrameResampler:
    """Converts frames of any rate to ``sample_rate`` (LiveKit's ``rtc.AudioResampler``, a
    synchronous call). Keeps one resampler per input rate and channel count; when the input
    changes, what the previous one still holds is flushed first. Frames already at
    ``sample_rate`` pass unchanged.
    """

    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self._resampler: rtc.AudioResampler | None = None
        self._key: tuple[int, int] | None = None

    def passes(self, frame: rtc.AudioFrame) -> bool:
        """Whether ``frame`` goes to the output as it is: it is at ``sample_rate`` and nothing
        converted is held back (then ``push`` would return ``[frame]``, at more cost)."""
        return self._resampler is None and frame.sample_rate == self.sample_rate

    def push(self, frame: rtc.AudioFrame) -> list[rtc.AudioFrame]:
        key = (frame.sample_rate, frame.num_channels)
        out: list[rtc.AudioFrame] = []
        if key != self._key:
            out.extend(self.flush())
            if frame.sample_rate != self.sample_rate:
                self._resampler = rtc.AudioResampler(
                    frame.sample_rate, self.sample_rate, num_channels=frame.num_channels,
                    quality=rtc.AudioResamplerQuality.MEDIUM)
            self._key = key
        if self._resampler is None:
            out.append(frame)
        else:
            out.extend(f for f in self._resampler.push(frame) if f.samples_per_channel)
        return out

    def flush(self) -> list[rtc.AudioFrame]:
        """What the resampler still holds (the end of the stream); resets it."""
        resampler, self._resampler, self._key = self._resampler, None, None
        if resampler is None:
            return []
        frames = [f for f in resampler.flush() if f.samples_per_channel]
        del resampler
        return frames


def resample_frames(frames: AsyncIterator[rtc.AudioFrame], sample_rate: int | None
                    ) -> AsyncIterator[rtc.AudioFrame]:
    """``frames`` at ``sample_rate``; None returns ``frames`` itself, so an output that takes
    any rate costs nothing per frame and closing the result closes ``frames`` directly.
    Converting, closing the result closes ``frames`` (if it can be closed).

    Cancellation: a step cancelled while it waits for ``frames`` ends the converting generator
    (and closes ``frames``); the tail the resampler still holds is dropped.
    """
    if sample_rate is None:
        return frames
    return _resampled(frames, sample_rate)


async def _resampled(frames: AsyncIterator[rtc.AudioFrame], sample_rate: int
                     ) -> AsyncIterator[rtc.AudioFrame]:
    resampler = FrameResampler(sample_rate)
    try:
        async for frame in frames:
            for out in resampler.push(frame):
                yield out
        for out in resampler.flush():
            yield out
    finally:
        aclose = getattr(frames, "aclose", None)
        if aclose is not None:
            await aclose()
