"""A LiveKit end-of-turn detector (asyncio) as a Trio turn detector.

LiveKit's end-of-turn protocol (``livekit.agents.voice.turn._TurnDetector``) is asyncio code::

    model: str; provider: str                                   # properties
    async def unlikely_threshold(language: LanguageCode | None) -> float | None
    async def supports_language(language: LanguageCode | None) -> bool
    async def predict_end_of_turn(chat_ctx: llm.ChatContext, *, timeout: float | None = ...
                                  ) -> float

The session wants the same three methods as Trio async functions taking agents_trio's
``ChatContext`` and a plain language string (``agents_trio.TurnDetector``).
:class:`TurnDetectorAdapter` converts: each call runs on the asyncio bridge, the chat context
becomes LiveKit's, the language a ``LanguageCode``, and failures become
:class:`agents_trio.APIError`.

``adapt()`` recognizes ``livekit-plugins-turn-detector``'s models
(``livekit.plugins.turn_detector.multilingual.MultilingualModel``, ``.english.EnglishModel``,
any ``EOUModelBase``). They are constructed where LiveKit's job context is set: in any job
of this runtime (``agents_trio.livekit_job`` sets it, with an inference executor usable from
the bridge), with their model files downloaded (``python agent.py download-files``);
elsewhere LiveKit raises ``RuntimeError: no job context found``. A detector of your own
written against LiveKit's protocol (asyncio methods) cannot be told from a Trio one by its shape: wrap it with
``TurnDetectorAdapter(detector)``.

LiveKit's streaming audio turn detector (``livekit.agents.inference.TurnDetector``, a
``stream()`` of audio) is another protocol, adapted by ``agents_trio.plugins.audio_turn_detector``.
"""

from __future__ import annotations

import sys
from typing import Protocol

from livekit.agents import LanguageCode

from ..chat import ChatContext
from ..io.bridge import AsyncioBridge
from ._common import resolve_bridge, to_api_error
from ._convert import to_lk_chat_ctx

__all__ = ["LKTurnDetector", "TurnDetectorAdapter", "is_lk_turn_detector"]


class LKTurnDetector(Protocol):
    """LiveKit's end-of-turn protocol (asyncio methods), as far as the adapter uses it."""

    async def unlikely_threshold(self, language: LanguageCode | None) -> float | None:
        """asyncio: the probability below which the end of turn is unlikely.

        Cancellation: the adapter cancels its asyncio task (``CancelledError``) and waits
        at most the bridge's ``cancel_grace``; a call that runs on longer is abandoned
        (logged) until the bridge closes.
        """
        ...

    async def supports_language(self, language: LanguageCode | None) -> bool:
        """asyncio: whether the model predicts for ``language``.

        Cancellation: as :meth:`unlikely_threshold`.
        """
        ...

    async def predict_end_of_turn(self, chat_ctx: object, *, timeout: float | None = ...
                                  ) -> float:
        """asyncio: the probability that the user has finished their turn.

        Cancellation: as :meth:`unlikely_threshold`; a prediction already handed to an
        inference executor may finish there, its result unused.
        """
        ...


def _plugin_base() -> type | None:
    # An instance of the plugin's models means its module is imported: look it up instead of
    # importing it (the plugin pulls in transformers and warns that it is deprecated).
    module = sys.modules.get("livekit.plugins.turn_detector.base")
    base = getattr(module, "EOUModelBase", None)
    return base if isinstance(base, type) else None


def is_lk_turn_detector(model: object) -> bool:
    """Whether ``model`` is one of ``livekit-plugins-turn-detector``'s models (by type)."""
    base = _plugin_base()
    return base is not None and isinstance(model, base)


class TurnDetectorAdapter:
    """Wraps a LiveKit end-of-turn detector for ``turn_handling={"turn_detection": ...}``.

    Args:
        detector: An object with LiveKit's end-of-turn protocol (asyncio methods).
        bridge: The bridge to run it on (default: the current bridge at each call).
        timeout: Passed to ``predict_end_of_turn`` when the session gives none (``None``:
            the detector's own default, e.g. 3 s for LiveKit's models).

    The three methods are Trio async functions (see :class:`agents_trio.TurnDetector`).
    Cancellation: cancelling a call cancels the detector's asyncio task (as ``bridge.run``).
    """

    def __init__(self, detector: LKTurnDetector, *, bridge: AsyncioBridge | None = None,
                 timeout: float | None = None) -> None:
        missing = [name for name in ("predict_end_of_turn", "unlikely_threshold",
                                     "supports_language")
                   if not callable(getattr(detector, name, None))]
        if missing:
            raise TypeError(f"TurnDetectorAdapter wraps a LiveKit end-of-turn detector; "
                            f"{detector!r} has no {', '.join(missing)}")
        self.detector = detector
        self._bridge = bridge
        self._timeout = timeout

    @property
    def model(self) -> str:
        return str(getattr(self.detector, "model", "unknown"))

    @property
    def provider(self) -> str:
        return str(getattr(self.detector, "provider", "unknown"))

    @property
    def label(self) -> str:
        return f"{type(self.detector).__module__}.{type(self.detector).__name__}"

    async def unlikely_threshold(self, language: str | None) -> float | None:
        """The detector's threshold for ``language``.

        Cancellation: cancels the detector's asyncio call (as ``bridge.run``); nothing is
        kept and the adapter stays usable.
        """
        bridge = await resolve_bridge(self._bridge)
        try:
            threshold = await bridge.run(self.detector.unlikely_threshold,
                                         _lk_language(language))
        except Exception as e:
            raise to_api_error(e, self.label) from e
        return None if threshold is None else float(threshold)

    async def supports_language(self, language: str | None) -> bool:
        """Whether the detector predicts for ``language``.

        Cancellation: as :meth:`unlikely_threshold`.
        """
        bridge = await resolve_bridge(self._bridge)
        try:
            return bool(await bridge.run(self.detector.supports_language,
                                         _lk_language(language)))
        except Exception as e:
            raise to_api_error(e, self.label) from e

    async def predict_end_of_turn(self, chat_ctx: ChatContext, *,
                                  timeout: float | None = None) -> float:
        """The detector's end-of-turn probability for ``chat_ctx``.

        Cancellation: as :meth:`unlikely_threshold`.
        """
        bridge = await resolve_bridge(self._bridge)
        lk_ctx = to_lk_chat_ctx(chat_ctx)
        timeout = timeout if timeout is not None else self._timeout
        try:
            if timeout is None:  # the detector's own default (LiveKit's models: 3 s)
                probability = await bridge.run(self.detector.predict_end_of_turn, lk_ctx)
            else:
                probability = await bridge.run(self.detector.predict_end_of_turn, lk_ctx,
                                               timeout=timeout)
        except Exception as e:
            raise to_api_error(e, self.label) from e
        return float(probability)

    def __repr__(self) -> str:
        return f"TurnDetectorAdapter({self.detector!r})"


def _lk_language(language: str | None) -> LanguageCode | None:
    if not language:
        return None
    return language if isinstance(language, LanguageCode) else LanguageCode(language)
