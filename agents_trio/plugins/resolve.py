"""The LiveKit half of model resolution (see ``agents_trio.model_resolution``): a LiveKit
model object of the right kind becomes its adapter, a model string the inference gateway's
model. Both raise ``TypeError``/``ValueError`` for what does not fit."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from livekit.agents import llm as lk_llm
from livekit.agents import stt as lk_stt
from livekit.agents import tts as lk_tts
from livekit.agents import vad as lk_vad

from ..models import VAD as TrioVAD
from ..stt_stream_adapter import StreamAdapter
from .inference import STT, TTS, llm_from_model_string
from .llm import LLMAdapter
from .realtime import RealtimeModelAdapter
from .stt import RecognizingSTTAdapter, STTAdapter
from .tts import TTSAdapter
from .audio_turn_detector import AudioTurnDetectorAdapter, is_lk_audio_turn_detector
from .turn_detector import TurnDetectorAdapter
from .vad import VADAdapter

if TYPE_CHECKING:
    from ..io.bridge import AsyncioBridge

__all__ = ["adapt_livekit_model", "adapt_livekit_stt", "adapt_livekit_turn_detector",
           "resolve_model_string"]

_BASES: dict[str, tuple[type, ...]] = {
    "llm": (lk_llm.LLM, lk_llm.RealtimeModel, lk_llm.DuplexModel),
    "stt": (lk_stt.STT,),
    "tts": (lk_tts.TTS,),
    "vad": (lk_vad.VAD,),
}
_KIND_NAMES = {lk_llm.LLM: "llm.LLM", lk_llm.RealtimeModel: "llm.RealtimeModel",
               lk_llm.DuplexModel: "llm.DuplexModel", lk_stt.STT: "stt.STT",
               lk_tts.TTS: "tts.TTS", lk_vad.VAD: "vad.VAD"}


def _what(value: object) -> str:
    for base, name in _KIND_NAMES.items():
        if isinstance(value, base):
            return f"it is LiveKit's {name}"
    return f"{type(value).__qualname__} is not a LiveKit model"


def adapt_livekit_model(kind: str, value: object, *, vad: object = None) -> object:
    """The adapter of a LiveKit model given where a ``kind`` model goes.

    Args:
        kind: ``"llm"``, ``"stt"``, ``"tts"`` or ``"vad"``.
        value: An object of a LiveKit class.
        vad: The VAD that segments the audio for a non-streaming STT (a LiveKit VAD or an
            adapted one; anything else counts as none).

    Raises:
        TypeError: ``value`` is not a LiveKit model of that kind.
        ValueError: A non-streaming STT without a LiveKit VAD.
    """
    if not isinstance(value, _BASES[kind]):
        raise TypeError(_what(value))
    if isinstance(value, lk_llm.DuplexModel):  # as LiveKit's session does with one
        return RealtimeModelAdapter(lk_llm.DuplexRealtimeAdapter(value))
    if isinstance(value, lk_llm.RealtimeModel):
        return RealtimeModelAdapter(value)
    if isinstance(value, lk_llm.LLM):
        return LLMAdapter(value)
    if isinstance(value, lk_stt.STT):
        return adapt_livekit_stt(value, vad=vad)
    if isinstance(value, lk_tts.TTS):
        return TTSAdapter(value)
    assert isinstance(value, lk_vad.VAD)
    return VADAdapter(value)


def adapt_livekit_stt(stt: lk_stt.STT[Any], *, vad: object, bridge: AsyncioBridge | None = None
                      ) -> STTAdapter | StreamAdapter:
    """A LiveKit STT as a Trio one. One that does not stream is segmented by ``vad``: a LiveKit
    VAD (or its adapter) through LiveKit's ``stt.StreamAdapter``, in asyncio; a Trio VAD
    (``agents_trio.offline.SileroVAD``, say) through ``agents_trio.stt.StreamAdapter`` around
    the plugin's ``recognize``, since LiveKit's takes LiveKit VADs only. Anything else counts
    as no VAD.

    Raises:
        ValueError: A non-streaming STT without a VAD.
    """
    lk_vad_model = vad.vad if isinstance(vad, VADAdapter) else vad
    if isinstance(lk_vad_model, lk_vad.VAD):
        return STTAdapter(stt, vad=lk_vad_model, bridge=bridge)
    if not stt.capabilities.streaming and isinstance(vad, TrioVAD):
        return StreamAdapter(stt=RecognizingSTTAdapter(stt, bridge=bridge), vad=vad)
    return STTAdapter(stt, bridge=bridge)


def adapt_livekit_turn_detector(value: object) -> object:
    """A LiveKit end-of-turn model (``livekit-plugins-turn-detector``'s, or any object of a
    LiveKit class with the protocol's three methods) as a Trio turn detector.

    LiveKit's streaming audio detector (``inference.TurnDetector``) becomes an
    :class:`AudioTurnDetectorAdapter`.

    Raises:
        TypeError: A LiveKit object without the end-of-turn methods.
    """
    if is_lk_audio_turn_detector(value):
        return AudioTurnDetectorAdapter(value)  # type: ignore[arg-type]
    return TurnDetectorAdapter(value)  # type: ignore[arg-type]  # raises TypeError if unfit


def resolve_model_string(kind: str, model: str) -> object:
    """The inference gateway's model named by ``model``, adapted (``kind``: ``"llm"``,
    ``"stt"`` or ``"tts"``).

    Raises:
        ValueError: LiveKit refused it (e.g. no API key or secret).
    """
    if kind == "llm":
        return llm_from_model_string(model)
    if kind == "stt":
        return STT.from_model_string(model)
    return TTS.from_model_string(model)
