"""Silero VAD as a Trio model: the ONNX model of LiveKit's Silero plugin, run in ``push_frame``.

``adapt(silero.VAD.load())`` runs LiveKit's plugin stream on the asyncio bridge: every 32 ms
window crosses into asyncio, goes through the plugin's channels and task, and its events cross
back. :class:`SileroVAD` takes the same arguments as ``silero.VAD.load()`` and the same model
(``livekit.plugins.silero.onnx_model``), and does the plugin's per-window work itself, in the
pushing task: windowing and resampling, the model, the probability's smoothing, the speech /
silence hysteresis and the speech buffer with its prefix padding. It produces the events the
plugin produces, with the same fields (the tests run both on the same audio), and returns them
from ``push_frame``, so the session handles them with no task switch.

The model runs on the Trio loop, about 0.2 ms per window (what ``adapt()`` does by default as
well): every session of the process waits that long per window of each VAD.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import weakref
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import ClassVar, Literal, Protocol

import numpy as np
import trio
from livekit import rtc

from ..models import VADEvent, VADEventType
from ..nurseries import EndOfInput
from ._errors import VOICE_EXTRA, MissingDependency

__all__ = ["SileroModel", "SileroVAD", "SileroVADOptions", "SileroVADStream"]

logger = logging.getLogger("agents_trio.offline.silero")

# the probability's exponential smoothing, and when an inference counts as slow (the plugin's)
_SMOOTHING = 0.35
_SLOW_INFERENCE = 0.2
_INT16_MAX = float(np.iinfo(np.int16).max)


class SileroModel(Protocol):
    """What a stream needs of the plugin's ``onnx_model.OnnxModel``."""

    @property
    def sample_rate(self) -> int: ...

    @property
    def window_size_samples(self) -> int: ...

    def reset(self) -> None: ...

    def __call__(self, x: np.ndarray) -> float: ...


def _onnx_module() -> ModuleType:
    if importlib.util.find_spec("livekit.plugins.silero") is None:
        raise MissingDependency(f"livekit-plugins-silero is not installed: {VOICE_EXTRA}")
    from livekit.plugins.silero import onnx_model

    return onnx_model


@dataclass
class SileroVADOptions:
    """The options of ``silero.VAD.load()`` (seconds; thresholds are probabilities)."""

    min_speech_duration: float
    min_silence_duration: float
    prefix_padding_duration: float
    max_buffered_speech: float
    activation_threshold: float
    deactivation_threshold: float
    sample_rate: int


class SileroVAD:
    """Silero voice activity detection, run by agents_trio itself (no asyncio, no bridge).

    Make it with :meth:`load`, which takes ``silero.VAD.load()``'s arguments and defaults.
    """

    #: where a session or agent takes it (``vad=``)
    model_kind: ClassVar[str] = "vad"

    def __init__(self, *, session: object, options: SileroVADOptions) -> None:
        self._session = session
        self.options = options
        self._streams: weakref.WeakSet[SileroVADStream] = weakref.WeakSet()

    @classmethod
    def load(cls, *, min_speech_duration: float = 0.05, min_silence_duration: float = 0.55,
             prefix_padding_duration: float = 0.5, max_buffered_speech: float = 60.0,
             activation_threshold: float = 0.5, sample_rate: Literal[8000, 16000] = 16000,
             force_cpu: bool = True, onnx_file_path: Path | str | None = None,
             deactivation_threshold: float | None = None,
             padding_duration: float | None = None) -> SileroVAD:
        """Load the model (blocking: call it at start-up, or in a worker thread).

        ``padding_duration`` is the plugin's deprecated name of ``prefix_padding_duration``
        (it wins when given, with a warning, as in the plugin).

        Raises:
            ValueError: an option out of range (checked before the model is loaded).
            MissingDependency: ``livekit-plugins-silero`` is not installed.
            FileNotFoundError: ``onnx_file_path`` does not name a file.
        """
        onnx_model = _onnx_module()
        if padding_duration is not None:
            logger.warning("padding_duration is deprecated: use prefix_padding_duration")
            prefix_padding_duration = padding_duration
        if sample_rate not in onnx_model.SUPPORTED_SAMPLE_RATES:
            raise ValueError(f"Silero VAD runs at 8000 or 16000 Hz, not {sample_rate!r}")
        for name, value in (("min_speech_duration", min_speech_duration),
                            ("min_silence_duration", min_silence_duration),
                            ("prefix_padding_duration", prefix_padding_duration),
                            ("max_buffered_speech", max_buffered_speech)):
            if not (isinstance(value, (int, float)) and value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number of seconds ≥ 0, got {value!r}")
        if not 0.0 < activation_threshold <= 1.0:
            raise ValueError(f"activation_threshold must be in (0, 1], got "
                             f"{activation_threshold!r}")
        if deactivation_threshold is not None and deactivation_threshold <= 0:
            raise ValueError("deactivation_threshold must be greater than 0")
        session = onnx_model.new_inference_session(force_cpu, onnx_file_path=onnx_file_path)
        options = SileroVADOptions(
            min_speech_duration=min_speech_duration,
            min_silence_duration=min_silence_duration,
            prefix_padding_duration=prefix_padding_duration,
            max_buffered_speech=max_buffered_speech,
            activation_threshold=activation_threshold,
            deactivation_threshold=(deactivation_threshold if deactivation_threshold is not None
                                    else max(activation_threshold - 0.15, 0.01)),
            sample_rate=sample_rate)
        return cls(session=session, options=options)

    @property
    def model(self) -> str:
        return "silero"

    @property
    def provider(self) -> str:
        return "ONNX"

    @property
    def min_silence_duration(self) -> float:
        return self.options.min_silence_duration

    def update_options(self, *, min_speech_duration: float | None = None,
                       min_silence_duration: float | None = None,
                       prefix_padding_duration: float | None = None,
                       max_buffered_speech: float | None = None,
                       activation_threshold: float | None = None,
                       deactivation_threshold: float | None = None) -> None:
        """Change options given (None: unchanged) for this VAD and its open streams."""
        opts = self.options
        old_max_buffered = opts.max_buffered_speech
        for name, value in (("min_speech_duration", min_speech_duration),
                            ("min_silence_duration", min_silence_duration),
                            ("prefix_padding_duration", prefix_padding_duration),
                            ("max_buffered_speech", max_buffered_speech),
                            ("activation_threshold", activation_threshold),
                            ("deactivation_threshold", deactivation_threshold)):
            if value is not None:
                setattr(opts, name, value)
        for stream in list(self._streams):
            stream.options_changed(old_max_buffered)

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[SileroVADStream]:
        """A stream of this VAD: ``push_frame`` returns each frame's events.

        Cancellation: not a checkpoint on entry; leaving the block ends the stream's input.
        """
        onnx_model = _onnx_module()
        model: SileroModel = onnx_model.OnnxModel(onnx_session=self._session,
                                                  sample_rate=self.options.sample_rate)
        stream = SileroVADStream(self.options, model)
        self._streams.add(stream)
        try:
            yield stream
        finally:
            self._streams.discard(stream)
            stream.end_input()

    def __repr__(self) -> str:
        return f"SileroVAD({self.options!r})"


class SileroVADStream:
    """One stream of :class:`SileroVAD`: 32 ms windows (16 kHz; 8 kHz: 32 ms too) of the
    frames pushed, at any input sample rate (resampled for the model)."""

    def __init__(self, options: SileroVADOptions, model: SileroModel) -> None:
        self._opts = options
        self._model = model
        self._window = model.window_size_samples
        self._window_duration = self._window / model.sample_rate
        self._f32 = np.empty(self._window, dtype=np.float32)
        self._end = EndOfInput()   # the iteration: nothing, until the input ends
        self._input_rate = 0
        self._buffer = np.empty(0, dtype=np.int16)   # the speech so far, with its padding
        self._padding_samples = 0
        self._reset()

    def _reset(self) -> None:
        self._model.reset()
        self._smoothed: float | None = None
        self._buffer_index = 0
        self._buffer_full = False
        self._buffer.fill(0)
        self._speaking = False
        self._speech_duration = 0.0
        self._silence_duration = 0.0
        self._samples_index = 0
        self._timestamp = 0.0
        self._raw_speech = 0.0
        self._raw_silence = 0.0
        self._input = np.empty(0, dtype=np.int16)        # input rate, not yet covered
        self._inference = np.empty(0, dtype=np.int16)    # model rate, not yet inferred
        self._copy_fraction = 0.0
        self._late = 0.0
        self._resampler = self._new_resampler()

    def _new_resampler(self) -> rtc.AudioResampler | None:
        if not self._input_rate or self._input_rate == self._model.sample_rate:
            return None
        return rtc.AudioResampler(input_rate=self._input_rate,
                                  output_rate=self._model.sample_rate,
                                  quality=rtc.AudioResamplerQuality.QUICK)

    def options_changed(self, old_max_buffered: float) -> None:
        """The VAD's options changed: size the speech buffer again."""
        if not self._input_rate:
            return
        self._padding_samples = int(self._opts.prefix_padding_duration * self._input_rate)
        size = int(self._opts.max_buffered_speech * self._input_rate) + self._padding_samples
        resized = np.zeros(size, dtype=np.int16)
        kept = min(size, self._buffer.size)
        resized[:kept] = self._buffer[:kept]
        self._buffer = resized
        self._buffer_index = min(self._buffer_index, size)
        if self._opts.max_buffered_speech > old_max_buffered:
            self._buffer_full = False

    def push_frame(self, frame: rtc.AudioFrame) -> Sequence[VADEvent]:
        """Add a frame (mono); return the events of the windows it completes, in order."""
        if not self._input_rate:
            self._input_rate = frame.sample_rate
            self._padding_samples = int(self._opts.prefix_padding_duration * self._input_rate)
            self._buffer = np.zeros(
                int(self._opts.max_buffered_speech * self._input_rate) + self._padding_samples,
                dtype=np.int16)
            self._resampler = self._new_resampler()
        elif frame.sample_rate != self._input_rate:
            logger.error("a frame at %d Hz dropped: this stream's input is at %d Hz",
                         frame.sample_rate, self._input_rate)
            return ()
        # copies: the caller (and the resampler) may reuse a frame's memory after the call
        samples = np.frombuffer(frame.data, dtype=np.int16)
        self._input = np.concatenate((self._input, samples))
        if self._resampler is None:
            self._inference = np.concatenate((self._inference, samples))
        else:
            self._inference = np.concatenate(
                [self._inference, *(np.frombuffer(f.data, dtype=np.int16)
                                    for f in self._resampler.push(frame))])
        events: list[VADEvent] = []
        while self._inference.size >= self._window:
            self._infer(events)
        return events

    def flush(self) -> None:
        """Forget the audio so far and start afresh (the model's state too)."""
        self._reset()

    def _infer(self, events: list[VADEvent]) -> None:
        opts = self._opts
        started = trio.current_time()
        np.divide(self._inference[:self._window], _INT16_MAX, out=self._f32, dtype=np.float32)
        raw = self._model(self._f32)
        p = raw if self._smoothed is None else (
            _SMOOTHING * self._smoothed + (1.0 - _SMOOTHING) * raw)
        self._smoothed = p
        window = self._window_duration
        self._samples_index += self._window
        self._timestamp += window

        # the input audio this window covers (a fractional count carried over, no drift)
        exact = self._window * self._input_rate / self._model.sample_rate + self._copy_fraction
        covered = int(exact)
        self._copy_fraction = exact - covered
        window_input = self._input[:covered]
        room = self._buffer.size - self._buffer_index
        n = min(covered, room, window_input.size)
        if n > 0:
            self._buffer[self._buffer_index:self._buffer_index + n] = window_input[:n]
            self._buffer_index += n
        elif not self._buffer_full and room <= 0:
            self._buffer_full = True
            logger.warning("max_buffered_speech reached: the rest of this speech is not kept")

        took = trio.current_time() - started
        self._late = max(0.0, self._late + took - window)
        if took > _SLOW_INFERENCE:
            logger.warning("VAD inference is slower than real time", extra={"delay": self._late})

        if self._speaking:
            self._speech_duration += window
        else:
            self._silence_duration += window
        events.append(VADEvent(
            type=VADEventType.INFERENCE_DONE, samples_index=self._samples_index,
            timestamp=self._timestamp, silence_duration=self._silence_duration,
            speech_duration=self._speech_duration, probability=p, inference_duration=took,
            frames=[self._frame(window_input)], speaking=self._speaking,
            raw_accumulated_silence=self._raw_silence, raw_accumulated_speech=self._raw_speech))

        if p >= opts.activation_threshold or (self._speaking and p > opts.deactivation_threshold):
            self._raw_speech += window
            self._raw_silence = 0.0
            if not self._speaking and self._raw_speech >= opts.min_speech_duration:
                self._speaking = True
                self._silence_duration = 0.0
                self._speech_duration = self._raw_speech
                events.append(VADEvent(
                    type=VADEventType.START_OF_SPEECH, samples_index=self._samples_index,
                    timestamp=self._timestamp, silence_duration=0.0,
                    speech_duration=self._speech_duration, frames=[self._speech()],
                    speaking=True))
        else:
            self._raw_silence += window
            self._raw_speech = 0.0
            if not self._speaking:
                self._keep_padding_only()
            elif self._raw_silence >= opts.min_silence_duration:
                self._speaking = False
                self._silence_duration = self._raw_silence
                events.append(VADEvent(
                    type=VADEventType.END_OF_SPEECH, samples_index=self._samples_index,
                    timestamp=self._timestamp, silence_duration=self._silence_duration,
                    speech_duration=max(0.0, self._speech_duration - self._raw_silence),
                    frames=[self._speech()], speaking=False))
                self._speech_duration = 0.0
                self._keep_padding_only()

        self._input = self._input[covered:]
        self._inference = self._inference[self._window:]

    def _keep_padding_only(self) -> None:
        """Not speaking: the buffer keeps only the last ``prefix_padding_duration``."""
        pad = self._padding_samples
        if self._buffer_index <= pad:
            return
        self._buffer[:pad] = self._buffer[self._buffer_index - pad:self._buffer_index]
        self._buffer_index = pad
        self._buffer_full = False

    def _speech(self) -> rtc.AudioFrame:
        return self._frame(self._buffer[:self._buffer_index])

    def _frame(self, samples: np.ndarray) -> rtc.AudioFrame:
        return rtc.AudioFrame(data=samples.tobytes(), sample_rate=self._input_rate,
                              num_channels=1, samples_per_channel=samples.size)

    def end_input(self) -> None:
        """No more frames: the iteration ends."""
        self._end.end()

    def __aiter__(self) -> AsyncIterator[VADEvent]:
        # every event is returned by push_frame; iterating only waits for the end of input
        return self._end
