"""Audio helpers: :func:`audio_frames_from_file` decodes an audio file into frames."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import trio
from livekit import rtc

__all__ = ["audio_frames_from_file"]

_BATCH = 16  # decoded frames handed over per trip to the decoding thread


def _open(path: str, sample_rate: int, num_channels: int) -> tuple[Any, Iterator[Any], Any]:
    try:
        import av
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("audio_frames_from_file needs PyAV: pip install av "
                          "(livekit-agents installs it)") from e
    container = av.open(path, mode="r")
    try:
        if not container.streams.audio:
            raise ValueError(f"{path!r} has no audio stream")
        decoded = container.decode(audio=0)
        layout = "mono" if num_channels == 1 else "stereo"
        resampler = av.AudioResampler(format="s16", layout=layout, rate=sample_rate)
    except BaseException:
        container.close()
        raise
    return container, decoded, resampler


def _next_batch(decoded: Iterator[Any], resampler: Any,  # noqa: ANN401 - PyAV's types
                sample_rate: int, num_channels: int) -> tuple[list[rtc.AudioFrame], bool]:
    """Up to ``_BATCH`` decoded frames, resampled; and whether the file ended."""
    out: list[rtc.AudioFrame] = []
    ended = False
    while len(out) < _BATCH and not ended:
        try:
            pending = resampler.resample(next(decoded))
        except StopIteration:
            pending, ended = resampler.resample(None), True   # the resampler's tail
        for frame in pending:
            data = frame.to_ndarray().tobytes()
            out.append(rtc.AudioFrame(data, sample_rate, num_channels,
                                      len(data) // (2 * num_channels)))
    return out, ended


async def audio_frames_from_file(file_path: str, sample_rate: int = 48000,
                                 num_channels: int = 1) -> AsyncIterator[rtc.AudioFrame]:
    """The audio of ``file_path`` (any format PyAV/FFmpeg reads: WAV, MP3, OGG …) as 16-bit
    frames at ``sample_rate`` with ``num_channels`` (1 or 2), decoded in a worker thread a
    batch at a time as they are read (LiveKit's ``utils.audio.audio_frames_from_file``).

    Raises:
        ValueError: ``num_channels`` is not 1 or 2, ``sample_rate`` is not positive, or the
            file has no audio.
        FileNotFoundError: No such file (and PyAV's errors for a file it cannot decode).

    Cancellation: cancels the wait for the next batch (the thread finishes decoding it and
    it is dropped); the file is closed.
    """
    if num_channels not in (1, 2):
        raise ValueError(f"num_channels must be 1 or 2, got {num_channels!r}")
    if sample_rate <= 0:
        raise ValueError(f"sample_rate must be positive, got {sample_rate!r}")
    container, decoded, resampler = await trio.to_thread.run_sync(
        _open, file_path, sample_rate, num_channels)
    try:
        ended = False
        while not ended:
            frames, ended = await trio.to_thread.run_sync(
                _next_batch, decoded, resampler, sample_rate, num_channels)
            for frame in frames:
                yield frame
    finally:
        container.close()
