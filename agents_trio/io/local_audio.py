"""The machine's microphone and speaker as a session's audio input and output (sounddevice).

    from agents_trio.io.local_audio import MicrophoneInput, SpeakerOutput

    async with MicrophoneInput() as mic, SpeakerOutput() as speaker:
        session.input.audio, session.output.audio = mic, speaker
        ...

Needs ``sounddevice`` (``pip install -e '.[voice]'``) and PortAudio (Debian:
``apt-get install libportaudio2``); ``sounddevice`` is imported when a device is opened, and
:class:`LocalAudioUnavailable` says what to install when either is missing.

PortAudio calls its callbacks on its own thread. The microphone's callback hands each block
to Trio with ``TrioToken.run_sync_soon`` (never blocking the audio thread); the speaker's
callback takes samples from a locked buffer and reports what it played the same way. The
speaker's playback position is what the device has consumed, so ``clear_buffer`` drops exactly
the audio not yet handed to the device.
"""

from __future__ import annotations

import threading
from collections import deque
from types import ModuleType, TracebackType
from typing import Any, Protocol

import numpy as np
import trio
from livekit import rtc

from .._errors import AgentsTrioError
from ..events import PlaybackFinishedEvent
from .audio import AudioInput, AudioOutput
from .resample import FrameResampler
from .wav import frame_samples

INSTALL_HINT = ("pip install -e '.[voice]' (the sounddevice package) and the PortAudio "
                "library (Debian/Ubuntu: apt-get install libportaudio2)")


class LocalAudioUnavailable(AgentsTrioError):
    """sounddevice or PortAudio is missing, or there is no such audio device."""


def import_sounddevice() -> ModuleType:
    """The ``sounddevice`` module.

    Raises:
        LocalAudioUnavailable: it is not installed, or PortAudio is missing.
    """
    try:
        import sounddevice
    except ImportError as e:
        raise LocalAudioUnavailable(f"sounddevice is not installed: {INSTALL_HINT}") from e
    except OSError as e:   # sounddevice raises OSError when libportaudio is missing
        raise LocalAudioUnavailable(f"PortAudio is not available ({e}): {INSTALL_HINT}") from e
    module: ModuleType = sounddevice
    return module


def device_available(kind: str = "output") -> bool:
    """Whether a default ``"input"`` or ``"output"`` device exists (False when sounddevice or
    PortAudio is missing)."""
    try:
        sd = import_sounddevice()
        info = sd.query_devices(kind=kind)
    except Exception:
        return False
    channels = info.get("max_output_channels" if kind == "output" else "max_input_channels", 0)
    return bool(info) and channels > 0


class LocalAudioLost(AgentsTrioError):
    """A device stopped while in use: unplugged, a PortAudio error, its callback failed."""


class _DeviceWatch:
    """Whether a device's stream ended without being asked to (the owner of that fact).

    PortAudio calls the stream's ``finished_callback`` on its own thread when the stream
    becomes inactive: after :meth:`stopping` (our close), that is expected; otherwise the
    device was lost, which is handed to Trio and kept in :attr:`error`. Waiters of
    :meth:`wait_lost` are woken once.
    """

    def __init__(self, what: str) -> None:
        self.what = what
        self.error: LocalAudioLost | None = None
        self._lost = trio.Event()
        self._stopping = False
        self._token: trio.lowlevel.TrioToken | None = None

    def bind(self) -> None:
        """From the Trio thread, before the stream starts."""
        self._token = trio.lowlevel.current_trio_token()

    def stopping(self) -> None:
        """The stream is being closed on purpose: its end is no loss."""
        self._stopping = True

    def finished(self) -> None:
        """PortAudio's thread: the stream became inactive."""
        if self._stopping or self._token is None:
            return
        try:
            self._token.run_sync_soon(self._on_lost)
        except trio.RunFinishedError:
            pass

    def _on_lost(self) -> None:
        if self._stopping or self.error is not None:
            return
        self.error = LocalAudioLost(f"the {self.what} stopped (unplugged, or a PortAudio "
                                    "error)")
        self._lost.set()

    async def wait_lost(self) -> LocalAudioLost:
        """Wait until the device is lost (never, if it is closed first).

        Cancellation: a checkpoint only."""
        await self._lost.wait()
        assert self.error is not None
        return self.error


class MicrophoneInput(AudioInput):
    """The default (or given) input device: 20 ms frames of mono 16-bit audio.

    Args:
        sample_rate: Capture rate.
        device: A sounddevice device id or name (default device if None).
        max_backlog: Seconds of audio kept when the session does not keep up; older blocks
            are dropped (counted in ``dropped``).

    Use as ``async with``: the stream starts on entry and stops on exit (``aclose``).
    Entering is not a checkpoint. Cancellation: leaving the block by a cancellation stops
    and closes the stream all the same (:meth:`aclose` is shielded).
    """

    def __init__(self, *, sample_rate: int = 16000, device: int | str | None = None,
                 block_duration: float = 0.02, max_backlog: float = 2.0) -> None:
        self.sample_rate = sample_rate
        self.device = device
        self._block = int(sample_rate * block_duration)
        self._send, self._recv = trio.open_memory_channel[rtc.AudioFrame](
            max(1, int(max_backlog / block_duration)))
        self._stream: Any = None
        self._token: trio.lowlevel.TrioToken | None = None
        self.dropped = 0
        #: the device's loss (unplugged, a PortAudio error): ``wait_lost()``, ``error``
        self.watch = _DeviceWatch("microphone")

    async def __aenter__(self) -> MicrophoneInput:
        self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def start(self) -> None:
        """Open and start the input stream (from the Trio thread)."""
        sd = import_sounddevice()
        self._token = trio.lowlevel.current_trio_token()
        self.watch.bind()
        try:
            self._stream = sd.InputStream(samplerate=self.sample_rate, channels=1,
                                          dtype="int16", blocksize=self._block,
                                          device=self.device, callback=self._callback,
                                          finished_callback=self.watch.finished)
            self._stream.start()
        except Exception as e:
            raise LocalAudioUnavailable(f"cannot open the microphone: {e}") from e

    def _callback(self, indata: np.ndarray, frames: int, time: object, status: object) -> None:
        # PortAudio's thread: copy the block and hand it to Trio without waiting
        samples = np.array(indata[:frames, 0], dtype=np.int16)
        frame = rtc.AudioFrame(samples.tobytes(), self.sample_rate, 1, frames)
        assert self._token is not None
        try:
            self._token.run_sync_soon(self._deliver, frame)
        except trio.RunFinishedError:
            pass

    def _deliver(self, frame: rtc.AudioFrame) -> None:
        try:
            self._send.send_nowait(frame)
        except trio.WouldBlock:
            self.dropped += 1
        except trio.ClosedResourceError:
            pass

    async def aclose(self) -> None:
        """Stop and close the input stream, then end the frames (iteration stops).

        Cancellation: the stop is shielded, so a cancelled caller (an ``async with`` left by
        a cancellation) still waits the few milliseconds it takes: the device is closed and
        the frames end.
        """
        self.watch.stopping()
        stream, self._stream = self._stream, None
        if stream is not None:
            await _close_stream(stream)
        self._send.close()

    async def __anext__(self) -> rtc.AudioFrame:
        try:
            return await self._recv.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class _Stream(Protocol):
    def stop(self) -> None: ...
    def close(self) -> None: ...


def _stop_stream(stream: _Stream) -> None:
    stream.stop()
    stream.close()


async def _close_stream(stream: _Stream) -> None:
    """Stop and close ``stream`` in a worker thread, shielded: PortAudio's stop takes a few
    milliseconds, and a cancelled caller must not leave the device open."""
    with trio.CancelScope(shield=True):
        await trio.to_thread.run_sync(_stop_stream, stream)


class SpeakerOutput(AudioOutput):
    """The default (or given) output device as the agent's voice.

    Declares ``sample_rate`` (the session converts the TTS audio to it). A segment starts
    playing with its first frame; ``wait_for_playout`` returns when the device has consumed
    the flushed segment; ``clear_buffer`` drops what the device has not taken yet.

    Use as ``async with`` (or ``start``/``aclose``). Entering is not a checkpoint.
    Cancellation: leaving the block by a cancellation stops and closes the stream all the
    same (:meth:`aclose` is shielded).
    """

    def __init__(self, *, sample_rate: int = 48000, device: int | str | None = None,
                 block_duration: float = 0.02) -> None:
        super().__init__(sample_rate=sample_rate)
        self.rate = sample_rate
        self.device = device
        self._block = int(sample_rate * block_duration)
        self._lock = threading.Lock()
        self._queue: deque[np.ndarray] = deque()   # guarded by _lock
        self._queued = 0                           # samples in _queue, guarded by _lock
        self._played = 0                           # samples of the segment played (_lock)
        self._resampler = FrameResampler(sample_rate)
        self._stream: Any = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._changed = trio.Event()
        self._pushed = 0
        self._flushed = False
        self._playing = False
        self._finished: PlaybackFinishedEvent | None = None
        #: the device's loss (unplugged, a PortAudio error): ``wait_lost()``, ``error``;
        #: once lost, a segment counts as played up to where the device stopped
        self.watch = _DeviceWatch("speaker")

    async def __aenter__(self) -> SpeakerOutput:
        self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        await self.aclose()

    def start(self) -> None:
        """Open and start the output stream (from the Trio thread)."""
        sd = import_sounddevice()
        self._token = trio.lowlevel.current_trio_token()
        self.watch.bind()
        try:
            self._stream = sd.OutputStream(samplerate=self.rate, channels=1, dtype="int16",
                                           blocksize=self._block, device=self.device,
                                           callback=self._callback,
                                           finished_callback=self._device_finished)
            self._stream.start()
        except Exception as e:
            raise LocalAudioUnavailable(f"cannot open the speaker: {e}") from e

    async def aclose(self) -> None:
        """Stop and close the output stream (the samples still queued are dropped).

        Cancellation: the stop is shielded, so a cancelled caller (an ``async with`` left by
        a cancellation) still waits the few milliseconds it takes: the device is closed.
        """
        self.watch.stopping()
        stream, self._stream = self._stream, None
        if stream is not None:
            await _close_stream(stream)

    # -- PortAudio's thread ----------------------------------------------------------------
    def _device_finished(self) -> None:
        self.watch.finished()
        if self._token is not None:   # a playout waiting for the device ends
            try:
                self._token.run_sync_soon(self._wake)
            except trio.RunFinishedError:
                pass

    def _callback(self, outdata: np.ndarray, frames: int, time: object, status: object) -> None:
        out = outdata[:, 0] if outdata.ndim == 2 else outdata
        filled = 0
        with self._lock:
            while filled < frames and self._queue:
                head = self._queue[0]
                n = min(frames - filled, len(head))
                out[filled:filled + n] = head[:n]
                if n == len(head):
                    self._queue.popleft()
                else:
                    self._queue[0] = head[n:]
                filled += n
            self._queued -= filled
            self._played += filled
        out[filled:] = 0
        if filled and self._token is not None:
            try:
                self._token.run_sync_soon(self._wake)
            except trio.RunFinishedError:
                pass

    # -- Trio's thread ---------------------------------------------------------------------
    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _enqueue(self, samples: np.ndarray) -> None:
        with self._lock:
            self._queue.append(samples)
            self._queued += len(samples)
        self._pushed += len(samples)

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        """Queue ``frame`` for the device (never waits for room).

        Cancellation: a checkpoint before anything is queued; a cancelled call queues
        nothing.
        """
        await trio.lowlevel.checkpoint()
        if self._finished is not None:
            self._reset()
        if not self._playing:
            self._playing = True
            self.on_playback_started(created_at=trio.current_time())
        for f in self._resampler.push(frame):
            self._enqueue(frame_samples(f))

    def flush(self) -> None:
        for f in self._resampler.flush():
            self._enqueue(frame_samples(f))
        self._flushed = True
        self._wake()

    def _reset(self) -> None:
        with self._lock:
            self._queue.clear()
            self._queued = 0
            self._played = 0
        self._pushed = 0
        self._flushed = False
        self._playing = False
        self._finished = None

    def _finish(self, played: int, interrupted: bool) -> PlaybackFinishedEvent:
        ev = self.on_playback_finished(playback_position=played / self.rate,
                                       interrupted=interrupted)
        self._reset()
        self._finished = ev
        self._wake()
        return ev

    def clear_buffer(self) -> PlaybackFinishedEvent | None:
        self._resampler.flush()
        if not self._playing:
            return None
        with self._lock:
            played = self._played
            self._queue.clear()
            self._queued = 0
        return self._finish(played, interrupted=True)

    async def wait_for_playout(self) -> PlaybackFinishedEvent:
        """Wait until the device has consumed the flushed segment (or it was cleared).

        Cancellation: a checkpoint; cancelling the waiter leaves the audio playing, and the
        next call reports the segment.
        """
        while True:
            if self._finished is not None:
                ev = self._finished
                self._reset()
                return ev
            changed = self._changed
            if self.watch.error is not None and self._playing:
                # the device is gone: what it played is all that will be heard
                with self._lock:
                    played = self._played
                    self._queue.clear()
                    self._queued = 0
                self._finish(played, interrupted=True)
                continue
            if self._flushed:
                with self._lock:
                    played, queued = self._played, self._queued
                if queued == 0:
                    self._finish(played, interrupted=False)
                    continue
            await changed.wait()


class SoundPlayer:
    """A raw stream to the speaker: ``write`` appends samples (mono or stereo int16), the
    device plays them as it goes, silence when there is nothing to play. For monitoring a
    recording while it is made (the voice demo)."""

    def __init__(self, *, sample_rate: int, channels: int = 1,
                 device: int | str | None = None) -> None:
        self.sample_rate, self.channels, self.device = sample_rate, channels, device
        self._lock = threading.Lock()
        self._queue: deque[np.ndarray] = deque()
        self._stream: Any = None

    def start(self) -> None:
        sd = import_sounddevice()
        try:
            self._stream = sd.OutputStream(samplerate=self.sample_rate, channels=self.channels,
                                           dtype="int16", callback=self._callback,
                                           device=self.device)
            self._stream.start()
        except Exception as e:
            raise LocalAudioUnavailable(f"cannot open the speaker: {e}") from e

    def write(self, samples: np.ndarray) -> None:
        with self._lock:
            self._queue.append(np.asarray(samples, np.int16).reshape(-1, self.channels))

    def pending(self) -> int:
        with self._lock:
            return sum(len(q) for q in self._queue)

    def _callback(self, outdata: np.ndarray, frames: int, time: object, status: object) -> None:
        filled = 0
        with self._lock:
            while filled < frames and self._queue:
                head = self._queue[0]
                n = min(frames - filled, len(head))
                outdata[filled:filled + n] = head[:n]
                if n == len(head):
                    self._queue.popleft()
                else:
                    self._queue[0] = head[n:]
                filled += n
        outdata[filled:] = 0

    async def aclose(self) -> None:
        """Stop and close the stream (the samples still queued are dropped).

        Cancellation: the stop is shielded, so a cancelled caller (the ``finally`` of a
        cancelled task) still waits the few milliseconds it takes: the device is closed.
        """
        stream, self._stream = self._stream, None
        if stream is not None:
            await _close_stream(stream)
