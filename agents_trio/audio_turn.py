"""Audio end-of-turn detection: a model that listens to the user's audio itself.

A text turn detector (:class:`agents_trio.TurnDetector`) reads the transcript when the turn
is decided. An audio one (LiveKit's ``inference.TurnDetector``; here
:class:`AudioTurnDetector`, e.g. ``agents_trio.inference.TurnDetector``) is fed the user's
audio as it arrives, through a stream opened when it comes into force, and is asked for a
prediction while the user is silent, before the turn is decided. The rules, as LiveKit 1.8.9
applies them:

- every input frame is pushed to the stream; frames heard while the stream is still opening
  (a connection to make) are kept, at most :data:`OPENING_BUFFER_FRAMES` of the latest, and
  pushed first once it is open;
- a prediction is requested once the VAD has heard :data:`PREDICTION_SILENCE` of raw silence
  while the user is speaking, and withdrawn when speech is heard again (the VAD's
  ``raw_accumulated_speech``) or a new speech starts;
- when the turn is decided, the pending prediction is awaited at most the stream's
  ``prediction_timeout``: a probability below the detector's ``unlikely_threshold`` for the
  turn's language means the turn waits for ``endpointing.max_delay`` instead of
  ``min_delay``. No prediction requested, a timeout (the stream is told, so a cloud model
  may switch to its local fallback) or an unsupported language: ``min_delay``;
- a committed or cleared turn flushes the stream (the detector forgets that audio).

:class:`AudioTurnTracker` applies them for :class:`agents_trio.recognition.AudioRecognition`.
"""

from __future__ import annotations

import abc
import logging
from collections import deque
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import msgspec
import trio

from .models import VADEvent
from .nurseries import LatestSlot

logger = logging.getLogger("agents_trio")

__all__ = ["OPENING_BUFFER_FRAMES", "PREDICTION_SILENCE", "AudioTurnDetector",
           "AudioTurnDetectorStream", "AudioTurnTracker", "PendingPrediction", "TurnPrediction",
           "check_vad_silence"]

PREDICTION_SILENCE = 0.2
"""Raw VAD silence (seconds) after which a prediction is requested (LiveKit's
``MIN_SILENCE_DURATION_MS``); the VAD's ``min_silence_duration`` must exceed it by 50 ms."""

OPENING_BUFFER_FRAMES = 500
"""How many of the latest input frames are kept for a stream that is still opening (10 s of
20 ms frames); older ones are dropped."""


def check_vad_silence(detector: object, vad: object) -> None:
    """An audio turn detector needs the VAD to wait longer than :data:`PREDICTION_SILENCE`
    (plus 50 ms) before it ends a speech, or the turn is decided before a prediction is asked
    for. Checked as LiveKit checks it: on the VAD's ``min_silence_duration`` when it has one
    (an adapted LiveKit VAD: the plugin's).

    Raises:
        ValueError: the VAD's ``min_silence_duration`` is too short for ``detector``.
    """
    if not isinstance(detector, AudioTurnDetector) or vad is None:
        return
    current = getattr(vad, "min_silence_duration", None)
    if current is None:
        current = getattr(getattr(vad, "vad", None), "min_silence_duration", None)
    if not isinstance(current, (int, float)):
        return
    required = PREDICTION_SILENCE + 0.05
    if current < required:
        raise ValueError(f"the VAD's min_silence_duration={current}s is too short for an audio "
                         f"turn detector; raise it to at least {required:.2f}s")


class TurnPrediction(msgspec.Struct, kw_only=True, frozen=True):
    """One answer of an audio turn detector."""

    end_of_turn_probability: float
    backchannel_probability: float | None = None
    inference_duration: float | None = None
    detection_delay: float | None = None


class PendingPrediction:
    """A requested prediction, resolved once by the detector's stream."""

    def __init__(self) -> None:
        self._done = trio.Event()
        self._result: TurnPrediction | None = None

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def resolve(self, prediction: TurnPrediction) -> None:
        """Give the answer (later answers are ignored)."""
        if not self._done.is_set():
            self._result = prediction
            self._done.set()

    async def wait(self, timeout: float) -> TurnPrediction | None:
        """The answer, or None when none came within ``timeout`` seconds.

        Cancellation: a checkpoint; cancelling the wait leaves the request as it is.
        """
        with trio.move_on_after(timeout):
            await self._done.wait()
        return self._result


class AudioTurnDetectorStream(abc.ABC):
    """An open stream of an :class:`AudioTurnDetector`: audio in, predictions on request."""

    @property
    @abc.abstractmethod
    def prediction_timeout(self) -> float:
        """How long a turn decision waits for a requested prediction."""

    @abc.abstractmethod
    def push_audio(self, frame: Any) -> None:  # noqa: ANN401  (an rtc.AudioFrame)
        """Feed one frame of the user's audio (sync, never blocks)."""

    @abc.abstractmethod
    def predict(self) -> PendingPrediction:
        """Request a prediction on the audio so far (it supersedes an earlier one)."""

    @abc.abstractmethod
    def cancel_inference(self, *, timed_out: bool = False) -> None:
        """Withdraw the pending request; ``timed_out``: because its answer came too late."""

    @abc.abstractmethod
    def flush(self, reason: str | None = None) -> None:
        """The turn ended: forget the audio so far and withdraw the pending request."""

    @abc.abstractmethod
    async def unlikely_threshold(self, language: str | None) -> float | None:
        """The probability below which the end of turn is unlikely, for ``language``.

        Cancellation: nothing is kept from a cancelled call.
        """

    @abc.abstractmethod
    async def supports_language(self, language: str | None) -> bool:
        """Whether the detector predicts for ``language``.

        Cancellation: nothing is kept from a cancelled call.
        """


class AudioTurnDetector(abc.ABC):
    """An end-of-turn model fed with audio, given as ``turn_handling={"turn_detection": ...}``.

    ``stream()`` is an async context manager yielding an :class:`AudioTurnDetectorStream`;
    leaving it closes the stream. Construction must not connect.
    """

    @property
    def model(self) -> str:
        return "unknown"

    @property
    def provider(self) -> str:
        return "unknown"

    @abc.abstractmethod
    def stream(self) -> AbstractAsyncContextManager[AudioTurnDetectorStream]:
        """Open a stream (the recognition owns it while the detector is in force)."""


class AudioTurnTracker:
    """Feeds the audio turn detector in force and consults it when a turn is decided.

    Args:
        nursery: Where the stream's owner task runs (the one the recognition runs in).
        on_error: Told when the stream cannot be opened (the turns then use the endpointing
            delays alone).
    """

    def __init__(self, nursery: trio.Nursery, *,
                 on_error: Callable[[BaseException, object], None]) -> None:
        self._owner = LatestSlot(nursery)
        self._on_error = on_error
        self._detector: AudioTurnDetector | None = None
        self.stream: AudioTurnDetectorStream | None = None
        self._prediction: PendingPrediction | None = None
        # while the detector's stream opens: the frames it is to be given first (None when
        # no stream is opening); a prediction asked for meanwhile is a placeholder that the
        # open stream's own request replaces
        self._opening: deque[Any] | None = None

    def use(self, detector: object) -> None:
        """The detector in force is ``detector`` (any turn detection value): open its stream
        if it is an audio detector not yet open, close the previous one otherwise."""
        wanted = detector if isinstance(detector, AudioTurnDetector) else None
        if wanted is self._detector:
            return
        self._detector = wanted
        self.stream = None
        self._prediction = None
        if wanted is None:
            self._opening = None
            self._owner.cancel()
        else:
            self._opening = deque(maxlen=OPENING_BUFFER_FRAMES)
            self._owner.replace(self._own_stream, wanted)

    @property
    def frames_kept_while_opening(self) -> int:
        """Input frames held for the stream being opened (0 when none is opening)."""
        return 0 if self._opening is None else len(self._opening)

    async def _own_stream(self, detector: AudioTurnDetector) -> None:
        try:
            async with detector.stream() as stream:
                if self._detector is detector:
                    self._opened(stream)
                try:
                    await trio.sleep_forever()
                finally:
                    if self.stream is stream:
                        self.stream = None
                        self._prediction = None
        except Exception as e:
            logger.warning("the audio turn detector's stream failed: %r", e)
            if self._detector is detector:
                self._opening = None  # it will not open: nothing more is kept for it
                self._prediction = None
            self._on_error(e, detector)

    def _opened(self, stream: AudioTurnDetectorStream) -> None:
        """The stream is open: it is given the audio heard meanwhile, then the prediction
        asked for meanwhile, and is fed directly from now on."""
        kept, self._opening = self._opening, None
        for frame in kept or ():
            stream.push_audio(frame)
        self.stream = stream
        if self._prediction is not None:
            self._prediction = stream.predict()

    # -- feeding ---------------------------------------------------------------------------
    def push_audio(self, frame: Any) -> None:  # noqa: ANN401  (an rtc.AudioFrame)
        """One input frame: to the open stream, or kept for the stream being opened."""
        if self.stream is not None:
            self.stream.push_audio(frame)
        elif self._opening is not None:
            self._opening.append(frame)

    def on_speech_started(self) -> None:
        """A new speech: a pending request is withdrawn (the turn goes on)."""
        if self.stream is not None:
            self.stream.cancel_inference()
        self._prediction = None

    def on_vad_inference(self, ev: VADEvent, *, speaking: bool) -> None:
        stream = self.stream
        if stream is None and self._opening is None:
            return
        if ev.raw_accumulated_speech > 0.0 and speaking and self._prediction is not None:
            if stream is not None:
                stream.cancel_inference()
            self._prediction = None
        if (ev.raw_accumulated_silence >= PREDICTION_SILENCE and speaking
                and self._prediction is None):
            # while opening: a placeholder, replaced by the stream's request when it opens
            self._prediction = PendingPrediction() if stream is None else stream.predict()

    def on_turn_ended(self, reason: str) -> None:
        """The turn was committed or cleared: the stream forgets its audio (a stream still
        opening will not be given the audio kept so far)."""
        if self.stream is not None:
            self.stream.flush(reason)
        elif self._opening is not None:
            self._opening.clear()
        self._prediction = None

    # -- deciding --------------------------------------------------------------------------
    async def end_of_turn_unlikely(self, language: str | None) -> bool:
        """Consult the detector for the turn being decided: True when its prediction is
        below its threshold (the turn then waits for ``max_delay``).

        Cancellation: the request is left pending (a new speech withdraws it).
        """
        stream, prediction = self.stream, self._prediction
        if stream is None:
            return False
        if not await stream.supports_language(language):
            logger.info("the audio turn detector does not support language %s", language)
            return False
        if prediction is None:
            logger.debug("no end-of-turn prediction requested for this turn")
            return False
        result = await prediction.wait(stream.prediction_timeout)
        if result is None:
            logger.warning("end-of-turn prediction timed out after %.1f s; the turn ends on "
                           "the endpointing delay", stream.prediction_timeout)
            stream.cancel_inference(timed_out=True)
            if self._prediction is prediction:
                self._prediction = None
            return False
        threshold = await stream.unlikely_threshold(language)
        return threshold is not None and result.end_of_turn_probability < threshold
