"""LiveKit's inference gateway models (``livekit.agents.inference``) as Trio models.

Each class takes the constructor parameters of LiveKit's class of the same name, builds that
object and adapts it (``LLM`` is an :class:`LLMAdapter`, ``STT`` an :class:`STTAdapter`, …),
so ``inference.LLM("openai/gpt-4.1-mini")`` is usable by ``AgentSession`` and ``Agent`` as it
is. Model strings given to ``llm=``, ``stt=`` or ``tts=`` resolve through
:func:`llm_from_model_string`, :meth:`STT.from_model_string` and
:meth:`TTS.from_model_string`, as in LiveKit.

Construction does not connect: LiveKit's objects only read their credentials
(``LIVEKIT_API_KEY``/``LIVEKIT_API_SECRET`` or ``LIVEKIT_INFERENCE_API_KEY``/``…_SECRET``)
and raise ``ValueError`` when one is missing; the gateway is reached when a stream opens.

``TurnDetector`` (LiveKit's end-of-turn model fed with the user's audio) is in
``agents_trio.plugins.audio_turn_detector``.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Any, ClassVar, Literal, Protocol, cast

from typing_extensions import Self

import aiohttp
from livekit.agents import NOT_GIVEN, APIConnectOptions, NotGivenOr
from livekit.agents import inference as lk_inference
from livekit.agents import llm as lk_llm
from livekit.agents import stt as lk_stt
from livekit.agents import tts as lk_tts
from livekit.agents import vad as lk_vad

from ..io.bridge import BridgeError
from ..io.bridge_on_demand import find_bridge
from .llm import LLMAdapter
from .realtime import RealtimeModelAdapter
from .stt import STTAdapter
from .tts import TTSAdapter
from .vad import VADAdapter

__all__ = ["LLM", "STT", "TTS", "VAD", "llm_from_model_string"]


async def _aclose_on_bridge(model: _LiveKitModel) -> None:
    """Close a LiveKit model (its HTTP clients, its streams) on the bridge it ran on; one that
    never ran (no bridge is reachable) holds nothing to close there."""
    try:
        bridge = await find_bridge()
    except BridgeError:
        return
    await bridge.run(model.aclose)


class _GatewayModel:
    """What the gateway classes share; each names the attribute its adapter keeps LiveKit's
    model under (``_wrapped_attribute``) and its LiveKit class name (``_kind``)."""

    _wrapped_attribute: ClassVar[str]
    _kind: ClassVar[str]

    @classmethod
    def _adapting(cls, model: object) -> Self:
        """An instance of ``cls`` adapting ``model``, a LiveKit object built already (its
        adapter's constructor is the class's next base after this one)."""
        adapted = cls.__new__(cls)
        super(_GatewayModel, adapted).__init__(model)  # type: ignore[call-arg]
        return adapted

    @property
    def _livekit_model(self) -> _LiveKitModel:
        return cast(_LiveKitModel, getattr(self, self._wrapped_attribute))

    @property
    def model(self) -> str:
        return str(self._livekit_model.model)

    @property
    def provider(self) -> str:
        return str(self._livekit_model.provider)

    def __repr__(self) -> str:
        return f"inference.{self._kind}(model={self.model!r})"


class _ClosedOnBridge(_GatewayModel):
    async def __aenter__(self) -> Self:
        """``async with inference.LLM(...) as llm:``, as LiveKit's models are used."""
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Close the model (:meth:`aclose`), as LiveKit's ``__aexit__`` does."""
        await self.aclose()

    async def aclose(self) -> None:
        """Close LiveKit's model: its clients and open streams.

        Cancellation: cancels the close on the bridge (waiting at most its ``cancel_grace``).
        """
        await _aclose_on_bridge(self._livekit_model)


class _LiveKitModel(Protocol):
    @property
    def model(self) -> str: ...

    @property
    def provider(self) -> str: ...

    async def aclose(self) -> None:
        """asyncio: release the model's clients and streams.

        Cancellation: cancelled as its bridge call (``AsyncioBridge.run``).
        """
        ...


class LLM(_ClosedOnBridge, LLMAdapter):
    """An LLM of LiveKit's inference gateway (``livekit.agents.inference.LLM``), adapted.

    Args: as LiveKit's: ``model`` (``"openai/gpt-4.1-mini"``, …), ``provider``, ``base_url``,
    ``api_key``/``api_secret`` (default: the environment), ``inference_class``,
    ``extra_kwargs`` (sent with every request), ``prompt_cache_breakpoints``.

    Raises:
        ValueError: No API key or secret (argument or environment).
    """

    _wrapped_attribute = "llm"
    _kind = "LLM"

    def __init__(self, model: str, *, provider: str | None = None,
                 base_url: str | None = None, api_key: str | None = None,
                 api_secret: str | None = None, inference_class: lk_inference.InferenceClass | None = None,
                 extra_kwargs: dict[str, Any] | None = None,
                 prompt_cache_breakpoints: bool | Literal["auto"] = "auto") -> None:
        super().__init__(lk_inference.LLM(
            model, provider=provider, base_url=base_url, api_key=api_key,
            api_secret=api_secret, inference_class=inference_class, extra_kwargs=extra_kwargs,
            prompt_cache_breakpoints=prompt_cache_breakpoints))

    @classmethod
    def from_model_string(cls, model: str) -> LLM:
        """The gateway LLM named by ``model``."""
        return cls._adapting(lk_inference.LLM.from_model_string(model))



class STT(_ClosedOnBridge, STTAdapter):
    """A speech-to-text model of LiveKit's inference gateway
    (``livekit.agents.inference.STT``), adapted.

    Args: as LiveKit's: ``model`` (``"deepgram/nova-3"``, …), ``language``, ``base_url``,
    ``encoding``, ``sample_rate``, ``api_key``/``api_secret``, ``http_session``,
    ``extra_kwargs``, ``fallback``, ``conn_options``, ``vad`` (a LiveKit VAD or an adapted
    one).

    Raises:
        ValueError: No API key or secret (argument or environment).
    """

    _wrapped_attribute = "stt"
    _kind = "STT"

    def __init__(self, model: NotGivenOr[str] = NOT_GIVEN, *,
                 language: NotGivenOr[str] = NOT_GIVEN, base_url: NotGivenOr[str] = NOT_GIVEN,
                 encoding: NotGivenOr[Any] = NOT_GIVEN, sample_rate: NotGivenOr[int] = NOT_GIVEN,
                 api_key: NotGivenOr[str] = NOT_GIVEN, api_secret: NotGivenOr[str] = NOT_GIVEN,
                 http_session: aiohttp.ClientSession | None = None,
                 extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
                 fallback: NotGivenOr[Any] = NOT_GIVEN,
                 conn_options: NotGivenOr[APIConnectOptions] = NOT_GIVEN,
                 vad: NotGivenOr[lk_vad.VAD | VADAdapter | None] = NOT_GIVEN) -> None:
        lk_vad_model = vad.vad if isinstance(vad, VADAdapter) else vad
        make: Any = lk_inference.STT  # its overloads are per model literal
        super().__init__(make(
            model, language=language, base_url=base_url, encoding=encoding,
            sample_rate=sample_rate, api_key=api_key, api_secret=api_secret,
            http_session=http_session, extra_kwargs=extra_kwargs, fallback=fallback,
            conn_options=conn_options, vad=lk_vad_model))

    @classmethod
    def from_model_string(cls, model: str) -> STT:
        """The gateway STT named by ``"provider/model[:language]"``."""
        return cls._adapting(lk_inference.STT.from_model_string(model))

    @property
    def capabilities(self) -> lk_stt.STTCapabilities:
        return self.stt.capabilities



class TTS(_ClosedOnBridge, TTSAdapter):
    """A text-to-speech model of LiveKit's inference gateway
    (``livekit.agents.inference.TTS``), adapted.

    Args: as LiveKit's: ``model`` (``"cartesia/sonic-3"``, …), ``voice``, ``language``,
    ``encoding``, ``sample_rate``, ``base_url``, ``api_key``/``api_secret``, ``http_session``,
    ``extra_kwargs``, ``fallback``, ``conn_options``.

    Raises:
        ValueError: No API key or secret (argument or environment).
    """

    _wrapped_attribute = "wrapped"
    _kind = "TTS"

    def __init__(self, model: str, *, voice: NotGivenOr[str] = NOT_GIVEN,
                 language: NotGivenOr[str] = NOT_GIVEN, encoding: NotGivenOr[Any] = NOT_GIVEN,
                 sample_rate: NotGivenOr[int] = NOT_GIVEN, base_url: NotGivenOr[str] = NOT_GIVEN,
                 api_key: NotGivenOr[str] = NOT_GIVEN, api_secret: NotGivenOr[str] = NOT_GIVEN,
                 http_session: aiohttp.ClientSession | None = None,
                 extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN,
                 fallback: NotGivenOr[Any] = NOT_GIVEN,
                 conn_options: NotGivenOr[APIConnectOptions] = NOT_GIVEN) -> None:
        super().__init__(lk_inference.TTS(
            model, voice=voice, language=language, encoding=encoding,
            sample_rate=sample_rate, base_url=base_url, api_key=api_key,
            api_secret=api_secret, http_session=http_session, extra_kwargs=extra_kwargs,
            fallback=fallback, conn_options=conn_options))

    @classmethod
    def from_model_string(cls, model: str) -> TTS:
        """The gateway TTS named by ``"provider/model[:voice]"``."""
        return cls._adapting(lk_inference.TTS.from_model_string(model))

    @property
    def capabilities(self) -> lk_tts.TTSCapabilities:
        return self.wrapped.capabilities

    @property
    def voice(self) -> str | None:
        """The voice asked for (None: the model's default)."""
        voice = getattr(getattr(self.wrapped, "_opts", None), "voice", NOT_GIVEN)
        return voice if isinstance(voice, str) else None



class VAD(_GatewayModel, VADAdapter):
    """LiveKit's bundled Silero VAD (``livekit.agents.inference.VAD``), adapted; it runs its
    inference on its own executor thread.

    Args: as LiveKit's: ``model`` (``"silero"``), ``min_speech_duration``,
    ``min_silence_duration``, ``prefix_padding_duration``, ``max_buffered_speech``,
    ``activation_threshold``, ``deactivation_threshold``, ``executor``.

    Raises:
        ValueError: An unknown model or a bad threshold.
    """

    _wrapped_attribute = "vad"
    _kind = "VAD"

    def __init__(self, *, model: Literal["silero"] = "silero", min_speech_duration: float = 0.05,
                 min_silence_duration: float = 0.25, prefix_padding_duration: float = 0.5,
                 max_buffered_speech: float = 60.0, activation_threshold: float = 0.5,
                 deactivation_threshold: NotGivenOr[float] = NOT_GIVEN,
                 executor: Executor | None = None) -> None:
        super().__init__(lk_inference.VAD(
            model=model, min_speech_duration=min_speech_duration,
            min_silence_duration=min_silence_duration,
            prefix_padding_duration=prefix_padding_duration,
            max_buffered_speech=max_buffered_speech,
            activation_threshold=activation_threshold,
            deactivation_threshold=deactivation_threshold, executor=executor))

    @property
    def capabilities(self) -> lk_vad.VADCapabilities:
        return self.vad.capabilities

    @property
    def min_silence_duration(self) -> float:
        return float(self.vad.min_silence_duration)  # type: ignore[attr-defined]



def llm_from_model_string(model: str) -> LLM | RealtimeModelAdapter:
    """The gateway model an ``llm=`` string names, adapted: a realtime (speech-to-speech) or
    duplex model string (``"openai/gpt-realtime"``) gives a realtime model, any other string
    an :class:`LLM`."""
    if lk_inference.is_duplex_model(model):
        from livekit.agents.inference.realtime import DuplexModel
        return RealtimeModelAdapter(lk_llm.DuplexRealtimeAdapter(
            DuplexModel.from_model_string(model)))
    if lk_inference.is_realtime_model(model):
        from livekit.agents.inference.realtime import RealtimeModel
        return RealtimeModelAdapter(RealtimeModel.from_model_string(model))
    return LLM.from_model_string(model)
