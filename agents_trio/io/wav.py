"""WAV files as a session's audio input and output.

    user = WavInput.from_file("question.wav")            # played at real pace
    agent = WavOutput(sample_rate=16000)                 # plays on Trio's clock, records
    session.input.audio, session.output.audio = user, agent
    ...
    agent.save("agent.wav")

``WavInput`` feeds 16-bit PCM to the session in 20 ms frames, either at real pace (frame *n*
is released at ``origin + n * 0.02`` on Trio's clock, so under a ``MockClock`` the pace is
virtual) or as fast as the session takes it (``realtime=False``). More audio can be queued with
``play`` while it runs; with ``keep_open=True`` it sends silence between clips, as a
microphone would, until ``close``.

``WavOutput`` plays the agent's voice on Trio's clock (a segment plays from its first frame for
as long as its audio lasts) and records it on one timeline: sample *i* of the recording was
heard at ``origin + i / sample_rate``. A ``clear_buffer`` drops the audio that had not played
yet: the recording is silent from the moment of the clear.

Both declare a ``sample_rate``; the session converts the TTS audio to the output's rate.
"""

from __future__ import annotations

import math
import os
import struct
import wave
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import trio
from livekit import rtc

from ..events import PlaybackFinishedEvent
from .audio import AudioInput, AudioOutput
from .resample import FrameResampler

FRAME_DURATION = 0.02


# -- WAV files ------------------------------------------------------------------------------


def parse_wav(data: bytes) -> tuple[np.ndarray, int, int]:
    """``(samples, sample_rate, num_channels)`` of a 16-bit PCM WAV; samples are interleaved
    int16. Tolerates streamed headers whose sizes are placeholders (``espeak-ng --stdout``)."""
    if data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE file")
    pos, rate, channels, bits = 12, 0, 0, 0
    while pos + 8 <= len(data):
        chunk, size = data[pos:pos + 4], struct.unpack("<I", data[pos + 4:pos + 8])[0]
        body = pos + 8
        if chunk == b"fmt ":
            fmt, channels, rate = struct.unpack("<HHI", data[body:body + 8])
            bits = struct.unpack("<H", data[body + 14:body + 16])[0]
            if fmt not in (1, 0xFFFE) or bits != 16:
                raise ValueError(f"only 16-bit PCM WAV is supported (format {fmt}, {bits} bits)")
        elif chunk == b"data":
            if not rate:
                raise ValueError("WAV data chunk before its fmt chunk")
            end = min(len(data), body + size)
            payload = data[body:end]
            payload = payload[:len(payload) - len(payload) % (2 * channels)]
            return np.frombuffer(payload, dtype="<i2").astype(np.int16), rate, channels
        pos = body + size + (size & 1)
    raise ValueError("WAV file without a data chunk")


def read_wav(path: str | os.PathLike[str]) -> tuple[np.ndarray, int, int]:
    """``(samples, sample_rate, num_channels)`` of a 16-bit PCM WAV file (int16, interleaved)."""
    with open(path, "rb") as f:
        return parse_wav(f.read())


def write_wav(path: str | os.PathLike[str], samples: np.ndarray, sample_rate: int,
              num_channels: int = 1) -> None:
    """Write int16 samples (interleaved, or shape ``(n, channels)``) as 16-bit PCM WAV."""
    data = np.ascontiguousarray(samples, dtype=np.int16)
    with wave.open(os.fspath(path), "wb") as w:
        w.setnchannels(num_channels)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(data.tobytes())


def to_mono(samples: np.ndarray, num_channels: int) -> np.ndarray:
    if num_channels == 1:
        return samples
    mono: np.ndarray = samples.reshape(-1, num_channels).mean(axis=1).astype(np.int16)
    return mono


def resample_pcm(samples: np.ndarray, from_rate: int, to_rate: int) -> np.ndarray:
    """Mono int16 ``samples`` converted from ``from_rate`` to ``to_rate``
    (LiveKit's resampler; the length is exact: ``round(n * to_rate / from_rate)``)."""
    if from_rate == to_rate or not len(samples):
        return samples
    resampler = FrameResampler(to_rate)
    out = [np.frombuffer(f.data, dtype=np.int16) for f in resampler.push(
        rtc.AudioFrame(samples.tobytes(), from_rate, 1, len(samples)))]
    out += [np.frombuffer(f.data, dtype=np.int16) for f in resampler.flush()]
    pcm = np.concatenate(out) if out else np.zeros(0, np.int16)
    n = int(round(len(samples) * to_rate / from_rate))
    return np.pad(pcm, (0, max(0, n - len(pcm))))[:n]


def pcm_frames(samples: np.ndarray, sample_rate: int, *, frame_duration: float = FRAME_DURATION
               ) -> list[rtc.AudioFrame]:
    """Mono int16 ``samples`` cut into frames of ``frame_duration`` (the last one shorter)."""
    step = max(1, int(round(sample_rate * frame_duration)))
    return [rtc.AudioFrame(samples[i:i + step].tobytes(), sample_rate, 1,
                           len(samples[i:i + step])) for i in range(0, len(samples), step)]


def frame_samples(frame: rtc.AudioFrame) -> np.ndarray:
    """A frame's samples, mono int16."""
    return to_mono(np.frombuffer(frame.data, dtype=np.int16), frame.num_channels)


# -- input ----------------------------------------------------------------------------------


class WavInput(AudioInput):
    """PCM audio as the user's voice: 20 ms frames of mono 16-bit samples.

    Args:
        sample_rate: Rate of the frames sent (clips given at another rate are converted).
        realtime: Release frames at real pace on Trio's clock (True), or as fast as the
            session takes them (False).
        keep_open: Send silence when no clip is queued, until ``close`` (a live microphone);
            otherwise the input ends when the queued clips have been sent.
        origin: Trio time of the first sample (default: when the first frame is taken).

    ``recording()`` is everything sent so far (clips and the silence between them), sample
    *i* at ``origin + i / sample_rate``.
    """

    def __init__(self, *, sample_rate: int = 16000, realtime: bool = True,
                 keep_open: bool = False, origin: float | None = None,
                 frame_duration: float = FRAME_DURATION) -> None:
        self.sample_rate = sample_rate
        self.realtime = realtime
        self.keep_open = keep_open
        self.origin = origin
        self._step = max(1, int(round(sample_rate * frame_duration)))
        self._queue: deque[np.ndarray] = deque()
        self._queued = 0            # samples queued and not yet sent
        self._sent = 0              # samples sent so far
        self._chunks: list[np.ndarray] = []
        self._closed = False
        self._wakeup = trio.Event()

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], *, realtime: bool = True,
                  sample_rate: int | None = None) -> WavInput:
        """The input playing one WAV file, then ending."""
        samples, rate, channels = read_wav(path)
        inp = cls(sample_rate=sample_rate or rate, realtime=realtime)
        inp.play(to_mono(samples, channels), rate)
        inp.close()
        return inp

    def play(self, samples: np.ndarray, sample_rate: int | None = None) -> tuple[float, float]:
        """Queue a mono int16 clip after what is already queued. Returns when it will be sent,
        ``(start, end)`` in seconds from ``origin``."""
        if self._closed:
            raise RuntimeError("this WavInput is closed")
        clip = resample_pcm(np.asarray(samples, dtype=np.int16), sample_rate or self.sample_rate,
                            self.sample_rate)
        start = (self._sent + self._queued) / self.sample_rate
        if len(clip):
            self._queue.append(clip)
            self._queued += len(clip)
            self._wakeup.set()
        return start, start + len(clip) / self.sample_rate

    def close(self) -> None:
        """End the input once the queued clips are sent."""
        self._closed = True
        self._wakeup.set()

    @property
    def position(self) -> float:
        """Seconds of audio sent so far."""
        return self._sent / self.sample_rate

    def recording(self) -> np.ndarray:
        """Every sample sent so far (mono int16)."""
        return np.concatenate(self._chunks) if self._chunks else np.zeros(0, np.int16)

    def _take(self, n: int) -> np.ndarray:
        parts: list[np.ndarray] = []
        while n and self._queue:
            head = self._queue[0]
            if len(head) <= n:
                parts.append(self._queue.popleft())
            else:
                parts.append(head[:n])
                self._queue[0] = head[n:]
            n -= len(parts[-1])
            self._queued -= len(parts[-1])
        return np.concatenate(parts) if len(parts) != 1 else parts[0]

    async def __anext__(self) -> rtc.AudioFrame:
        while not self._queue and not self.keep_open:
            if self._closed:
                raise StopAsyncIteration
            self._wakeup = trio.Event()
            await self._wakeup.wait()
        if self.origin is None:
            self.origin = trio.current_time()
        if self.realtime:
            await trio.sleep_until(self.origin + (self._sent + self._step) / self.sample_rate)
        else:
            await trio.lowlevel.checkpoint()
        if self._queue:
            samples = self._take(self._step)
            if len(samples) < self._step and self.keep_open:
                samples = np.concatenate([samples, np.zeros(self._step - len(samples), np.int16)])
        elif self._closed:
            raise StopAsyncIteration
        else:
            samples = np.zeros(self._step, np.int16)
        self._sent += len(samples)
        self._chunks.append(samples)
        return rtc.AudioFrame(samples.tobytes(), self.sample_rate, 1, len(samples))


# -- output ---------------------------------------------------------------------------------


@dataclass
class PlayedSegment:
    """One segment the output played: ``start``/``end`` in seconds from ``origin``;
    ``cleared_at`` is when ``clear_buffer`` cut it (None when it played to its end)."""

    start: float
    end: float
    pushed: float
    interrupted: bool
    cleared_at: float | None


class WavOutput(AudioOutput):
    """Plays the agent's voice on Trio's clock and records it, cut where it was cleared.

    Args:
        sample_rate: The rate it declares (the session converts the TTS audio to it) and
            records at; frames at another rate are converted.
        origin: Trio time of sample 0 of the recording (default: the first frame's arrival).

    ``segments`` lists what played; ``recording()`` / ``save(path)`` give the audio.
    """

    def __init__(self, *, sample_rate: int = 16000, origin: float | None = None) -> None:
        super().__init__(sample_rate=sample_rate)
        self.rate = sample_rate
        self.origin = origin
        self.segments: list[PlayedSegment] = []
        self._buf = np.zeros(sample_rate * 8, np.int16)
        self._length = 0                  # samples of the recording so far
        self._resampler = FrameResampler(sample_rate)
        self._changed = trio.Event()
        self._reset()

    def _reset(self) -> None:
        self._seg_start: float | None = None   # Trio time the segment's first sample played
        self._play_end = 0.0                   # Trio time the pushed audio ends playing
        self._pushed = 0.0
        self._flushed = False
        self._finished: PlaybackFinishedEvent | None = None

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _position(self, now: float) -> float:
        return self._pushed - max(0.0, self._play_end - now)

    def _write(self, at: float, samples: np.ndarray) -> None:
        assert self.origin is not None
        i = max(0, int(round((at - self.origin) * self.rate)))
        end = i + len(samples)
        if end > len(self._buf):
            grown = np.zeros(max(end, 2 * len(self._buf)), np.int16)
            grown[:self._length] = self._buf[:self._length]
            self._buf = grown
        self._buf[i:end] = samples
        self._length = max(self._length, end)

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        """Play and record ``frame`` after what was pushed before (never waits for room).

        Cancellation: a checkpoint before anything is written; a cancelled call records
        nothing.
        """
        await trio.lowlevel.checkpoint()
        if self._finished is not None:
            self._reset()
        for f in self._resampler.push(frame):
            self._append(frame_samples(f))
        self._wake()

    def _append(self, samples: np.ndarray) -> None:
        now = trio.current_time()
        if self.origin is None:
            self.origin = now
        if self._seg_start is None:
            self._seg_start = self._play_end = now
            self.on_playback_started(created_at=now)
        start = max(self._play_end, now)    # an underrun plays as a gap
        self._write(start, samples)
        self._play_end = start + len(samples) / self.rate
        self._pushed += len(samples) / self.rate

    def flush(self) -> None:
        for f in self._resampler.flush():
            self._append(frame_samples(f))
        self._flushed = True
        self._wake()

    def _finish(self, position: float, interrupted: bool, now: float) -> PlaybackFinishedEvent:
        assert self.origin is not None and self._seg_start is not None
        if self._pushed > 0.0:
            self.segments.append(PlayedSegment(
                start=self._seg_start - self.origin,
                end=min(now, self._play_end) - self.origin if interrupted
                else self._play_end - self.origin,
                pushed=self._pushed, interrupted=interrupted,
                cleared_at=now - self.origin if interrupted else None))
        ev = self.on_playback_finished(playback_position=position, interrupted=interrupted)
        self._reset()
        self._finished = ev
        self._wake()
        return ev

    def clear_buffer(self) -> PlaybackFinishedEvent | None:
        self._resampler.flush()
        if self._seg_start is None:
            self._reset()
            return None
        now = trio.current_time()
        if self._play_end > now:     # the audio not played yet is dropped: silence from now
            assert self.origin is not None
            cut = max(0, int(round((now - self.origin) * self.rate)))
            self._buf[cut:self._length] = 0
            self._length = min(self._length, cut)
        return self._finish(self._position(now), interrupted=True, now=now)

    async def wait_for_playout(self) -> PlaybackFinishedEvent:
        """Wait until the flushed segment has played on Trio's clock (or was cleared).

        Cancellation: a checkpoint; cancelling the waiter leaves the audio playing, and the
        next call reports the segment.
        """
        while True:
            if self._finished is not None:
                ev, self._finished = self._finished, None
                self._reset()
                return ev
            changed = self._changed
            if self._flushed and self._seg_start is None:      # flushed without audio
                now = trio.current_time()
                if self.origin is None:
                    self.origin = now
                self._seg_start = self._play_end = now
                self._finish(0.0, interrupted=False, now=now)
                continue
            if self._flushed:
                now = trio.current_time()
                if now >= self._play_end:
                    self._finish(self._pushed, interrupted=False, now=now)
                    continue
                with trio.move_on_after(self._play_end - now):
                    await changed.wait()
            else:
                await changed.wait()

    def recording(self, until: float | None = None) -> np.ndarray:
        """The recording (mono int16), padded with silence to ``until`` seconds from
        ``origin`` if given."""
        n = self._length if until is None else max(self._length, int(round(until * self.rate)))
        out = np.zeros(n, np.int16)
        out[:self._length] = self._buf[:self._length]
        return out

    def save(self, path: str | os.PathLike[str], *, until: float | None = None) -> None:
        write_wav(path, self.recording(until), self.rate)


def mix_stereo(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Two mono int16 tracks as one interleaved stereo track (the shorter padded)."""
    n = max(len(left), len(right))
    out = np.zeros((n, 2), np.int16)
    out[:len(left), 0] = left
    out[:len(right), 1] = right
    return out


def rms(samples: np.ndarray) -> float:
    """Root-mean-square level of int16 samples (0 for none)."""
    if not len(samples):
        return 0.0
    return float(math.sqrt(np.mean(np.square(samples.astype(np.float64)))))


def speech_bounds(samples: np.ndarray, sample_rate: int, *, threshold: float = 300.0,
                  window: float = 0.02) -> list[tuple[float, float]]:
    """Stretches of ``samples`` (mono int16) whose RMS per ``window`` exceeds ``threshold``,
    as ``(start, end)`` seconds; gaps shorter than 0.3 s are bridged."""
    step = max(1, int(sample_rate * window))
    n = len(samples) // step
    if not n:
        return []
    levels = np.sqrt(np.mean(np.square(samples[:n * step].astype(np.float64)).reshape(n, step),
                             axis=1))
    loud = levels > threshold
    spans: list[tuple[float, float]] = []
    i = 0
    while i < n:
        if loud[i]:
            j = i
            while j < n and loud[j]:
                j += 1
            start, end = i * window, j * window
            if spans and start - spans[-1][1] < 0.3:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
            i = j
        else:
            i += 1
    return spans


__all__: Sequence[str] = ["PlayedSegment", "WavInput", "WavOutput", "mix_stereo", "parse_wav",
                          "pcm_frames", "read_wav", "resample_pcm", "rms", "speech_bounds",
                          "write_wav"]
