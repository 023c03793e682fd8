"""LiveKit's audio end-of-turn detector (``livekit.agents.inference.TurnDetector``) on Trio.

LiveKit's detector opens a stream per session: the user's audio is pushed into it, a
prediction is requested while the user pauses (an asyncio future), and the stream sends the
audio to its transport: the inference gateway's ``/eot`` websocket for ``version="v1"``
(falling back, once and for good, to the local ``v1-mini`` model when the gateway fails or
times out, unless ``local_fallback=False``) or the local model itself. The thresholds come
from the gateway when its session is created (or LiveKit's shipped ones for the local model),
overridden by ``unlikely_threshold`` / ``backchannel_threshold``.

:class:`AudioTurnDetectorAdapter` runs any such detector (any ``_BaseStreamingTurnDetector``)
as an :class:`agents_trio.audio_turn.AudioTurnDetector`: its stream is opened in the asyncio
loop of the bridge, frames and requests reach it in order through one feeder (one loop
callback per burst), and each prediction's future resolves a Trio
:class:`~agents_trio.audio_turn.PendingPrediction`. :class:`TurnDetector` takes LiveKit's
constructor parameters and builds LiveKit's object; ``adapt()`` and ``AgentSession`` adapt a
LiveKit ``inference.TurnDetector`` given as ``turn_detection`` the same way. The session then
feeds and consults it with LiveKit's rules (see :mod:`agents_trio.audio_turn`).
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from livekit import rtc
from livekit.agents import NOT_GIVEN, APIConnectOptions, LanguageCode, NotGivenOr
from livekit.agents.inference.eot import TurnDetector as LKTurnDetector
from livekit.agents.inference.eot.base import (_BaseStreamingTurnDetector,
                                               _BaseStreamingTurnDetectorStream)
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS
from livekit.agents.voice.turn import TurnDetectionEvent

from ..audio_turn import (AudioTurnDetector, AudioTurnDetectorStream, PendingPrediction,
                          TurnPrediction)
from ..io.bridge import AsyncioBridge
from ._common import aclose_plugin_stream, resolve_bridge, to_api_error

__all__ = ["AudioTurnDetectorAdapter", "TurnDetector", "is_lk_audio_turn_detector"]

_VERSIONS = ("v1", "v1-mini")


def is_lk_audio_turn_detector(value: object) -> bool:
    """Whether ``value`` is LiveKit's streaming (audio) end-of-turn detector."""
    return isinstance(value, _BaseStreamingTurnDetector)


class AudioTurnDetectorAdapter(AudioTurnDetector):
    """Wraps LiveKit's audio end-of-turn detector for ``turn_handling={"turn_detection": ...}``.

    Args:
        detector: A LiveKit ``inference.TurnDetector`` (any ``_BaseStreamingTurnDetector``).
        bridge: The bridge to run it on (default: the current one, or the session's).
        conn_options: Passed to the detector's ``stream()`` (LiveKit's default otherwise).
    """

    def __init__(self, detector: _BaseStreamingTurnDetector, *,
                 bridge: AsyncioBridge | None = None,
                 conn_options: APIConnectOptions | None = None) -> None:
        if not isinstance(detector, _BaseStreamingTurnDetector):
            raise TypeError("AudioTurnDetectorAdapter wraps LiveKit's audio end-of-turn "
                            f"detector (inference.TurnDetector), got {detector!r}")
        if conn_options is not None and not isinstance(conn_options, APIConnectOptions):
            raise TypeError(f"conn_options must be an APIConnectOptions, got {conn_options!r}")
        self.detector = detector
        self._bridge = bridge
        self._conn_options = conn_options or DEFAULT_API_CONNECT_OPTIONS

    @property
    def model(self) -> str:
        return str(self.detector.model)

    @property
    def provider(self) -> str:
        return str(self.detector.provider)

    @property
    def label(self) -> str:
        return f"{type(self.detector).__module__}.{type(self.detector).__name__}"

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[AudioTurnDetectorStream]:
        """Open a detector stream on the bridge (it connects there, not here).

        Cancellation: leaving the block, cancelled or not, closes LiveKit's stream
        (shielded, bounded).
        """
        bridge = await resolve_bridge(self._bridge)
        try:
            lk_stream = await bridge.run_sync(self.detector.stream,
                                              conn_options=self._conn_options)
        except Exception as e:
            raise to_api_error(e, self.label) from e
        try:
            yield _AdaptedStream(bridge, lk_stream)
        finally:
            await aclose_plugin_stream(bridge, lk_stream, self.label)

    async def unlikely_threshold(self, language: str | None) -> float | None:
        """The detector's threshold for ``language`` (None until known).

        Cancellation: cancels the asyncio call; nothing is kept.
        """
        bridge = await resolve_bridge(self._bridge)
        threshold = await bridge.run(self.detector.unlikely_threshold, _lk_language(language))
        return None if threshold is None else float(threshold)

    async def backchannel_threshold(self, language: str | None) -> float | None:
        """The probability above which a pause invites a backchannel (None: not known, or
        the model gives none, as the local one).

        Cancellation: as :meth:`unlikely_threshold`.
        """
        bridge = await resolve_bridge(self._bridge)
        threshold = await bridge.run(self.detector.backchannel_threshold,
                                     _lk_language(language))
        return None if threshold is None else float(threshold)

    async def supports_language(self, language: str | None) -> bool:
        """Whether the detector predicts for ``language``.

        Cancellation: as :meth:`unlikely_threshold`.
        """
        bridge = await resolve_bridge(self._bridge)
        return bool(await bridge.run(self.detector.supports_language, _lk_language(language)))

    def __repr__(self) -> str:
        return f"AudioTurnDetectorAdapter({self.detector!r})"


class _AdaptedStream(AudioTurnDetectorStream):
    """LiveKit's detector stream, driven from Trio: every call goes through one feeder, so
    frames, requests, withdrawals and flushes reach it in the order they were made."""

    def __init__(self, bridge: AsyncioBridge, stream: _BaseStreamingTurnDetectorStream
                 ) -> None:
        self._bridge = bridge
        self._stream = stream
        self._feeder = bridge.feeder(stream.push_audio)

    @property
    def prediction_timeout(self) -> float:
        return float(self._stream.prediction_timeout)

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        self._feeder.feed(frame)

    def predict(self) -> PendingPrediction:
        pending = PendingPrediction()
        self._feeder.call(lambda: self._request(pending))
        return pending

    def _request(self, pending: PendingPrediction) -> None:
        """In the loop: LiveKit's request; its future resolves ``pending``."""
        future = self._stream.predict()

        def resolved(done: asyncio.Future[TurnDetectionEvent]) -> None:
            if not done.cancelled() and done.exception() is None:
                pending.resolve(_prediction(done.result()))
        future.add_done_callback(resolved)

    def cancel_inference(self, *, timed_out: bool = False) -> None:
        self._feeder.call(lambda: self._stream.cancel_inference(timed_out=timed_out))

    def flush(self, reason: str | None = None) -> None:
        self._feeder.call(lambda: self._stream.flush(reason))

    async def unlikely_threshold(self, language: str | None) -> float | None:
        """The stream's threshold for ``language`` (after a fallback: the local model's).

        Cancellation: cancels the asyncio call; nothing is kept.
        """
        threshold = await self._bridge.run(self._stream.unlikely_threshold,
                                           _lk_language(language))
        return None if threshold is None else float(threshold)

    async def supports_language(self, language: str | None) -> bool:
        """Whether the stream's model predicts for ``language``.

        Cancellation: as :meth:`unlikely_threshold`.
        """
        return bool(await self._bridge.run(self._stream.supports_language,
                                           _lk_language(language)))


class TurnDetector(AudioTurnDetectorAdapter):
    """LiveKit's audio end-of-turn detector (``livekit.agents.inference.TurnDetector``).

    Args: as LiveKit's: ``version`` (``"v1"``: the inference gateway, ``"v1-mini"``: the
    local model; default: ``v1`` when hosted or in dev mode), ``unlikely_threshold`` and
    ``backchannel_threshold`` (a probability, or one per language), ``base_url``,
    ``api_key``/``api_secret`` (default: the environment), ``sample_rate`` (of the audio
    sent to the model), ``local_fallback``, ``http_session``, ``conn_options``.

    Raises:
        ValueError: ``version="v1"`` without gateway credentials, a threshold outside
            [0, 1], or a sample rate that is not a positive integer.
        TypeError: a parameter of the wrong type.
    """

    def __init__(self, *, version: NotGivenOr[str] = NOT_GIVEN,
                 unlikely_threshold: NotGivenOr[float | dict[Any, float]] = NOT_GIVEN,
                 backchannel_threshold: NotGivenOr[float | dict[Any, float]] = NOT_GIVEN,
                 base_url: NotGivenOr[str] = NOT_GIVEN, api_key: NotGivenOr[str] = NOT_GIVEN,
                 api_secret: NotGivenOr[str] = NOT_GIVEN, sample_rate: int = 16000,
                 local_fallback: bool = True, http_session: aiohttp.ClientSession | None = None,
                 conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> None:
        if version is not NOT_GIVEN and version not in _VERSIONS:
            raise ValueError(f"version must be one of {_VERSIONS}, got {version!r}")
        _check_threshold("unlikely_threshold", unlikely_threshold)
        _check_threshold("backchannel_threshold", backchannel_threshold)
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate <= 0:
            raise ValueError(f"sample_rate must be a positive integer, got {sample_rate!r}")
        if not isinstance(local_fallback, bool):
            raise TypeError(f"local_fallback must be a bool, got {local_fallback!r}")
        if not isinstance(conn_options, APIConnectOptions):
            raise TypeError(f"conn_options must be an APIConnectOptions, got {conn_options!r}")
        super().__init__(LKTurnDetector(
            version=version,  # type: ignore[arg-type]  # checked above
            unlikely_threshold=unlikely_threshold, backchannel_threshold=backchannel_threshold,
            base_url=base_url, api_key=api_key, api_secret=api_secret, sample_rate=sample_rate,
            local_fallback=local_fallback, http_session=http_session,
            conn_options=conn_options), conn_options=conn_options)

    def update_options(self, *,
                       unlikely_threshold: NotGivenOr[float | dict[Any, float]] = NOT_GIVEN,
                       backchannel_threshold: NotGivenOr[float | dict[Any, float]] = NOT_GIVEN
                       ) -> None:
        """Change the threshold overrides (they apply to the open streams too)."""
        _check_threshold("unlikely_threshold", unlikely_threshold)
        _check_threshold("backchannel_threshold", backchannel_threshold)
        assert isinstance(self.detector, LKTurnDetector)
        self.detector.update_options(unlikely_threshold=unlikely_threshold,
                                     backchannel_threshold=backchannel_threshold)

    def __repr__(self) -> str:
        return f"inference.TurnDetector(model={self.model!r})"


def _check_threshold(name: str, value: object) -> None:
    if value is NOT_GIVEN:
        return
    values = value.values() if isinstance(value, Mapping) else [value]
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{name} must be a probability or a dict of them by language, "
                            f"got {value!r}")
        if not (0.0 <= v <= 1.0) or math.isnan(v):
            raise ValueError(f"{name} must be within [0, 1], got {value!r}")
    if isinstance(value, Mapping) and not all(isinstance(k, str) and k for k in value):
        raise TypeError(f"{name}'s keys must be language codes, got {value!r}")


def _prediction(event: TurnDetectionEvent) -> TurnPrediction:
    return TurnPrediction(end_of_turn_probability=float(event.end_of_turn_probability),
                          backchannel_probability=event.backchannel_probability,
                          inference_duration=event.inference_duration,
                          detection_delay=event.detection_delay)


def _lk_language(language: str | None) -> LanguageCode | None:
    if not language:
        return None
    return language if isinstance(language, LanguageCode) else LanguageCode(language)
