"""What ``AgentSession``, ``Agent`` and ``AgentTask`` accept as models, resolved when they are
constructed.

``llm=``, ``stt=``, ``tts=``, ``vad=`` and ``turn_handling={"turn_detection": ...}`` take:

- a Trio-native model (the protocols of ``agents_trio.models`` and ``agents_trio.realtime``),
  kept as it is;
- a LiveKit Agents model object (``openai.LLM()``, ``deepgram.STT()``,
  ``silero.VAD.load()``, a realtime model, ``MultilingualModel()``, a plugin of your own on
  LiveKit's base classes), replaced by its adapter (``agents_trio.plugins.adapt``); a
  non-streaming LiveKit STT given to a session is segmented by the session's VAD, as in
  LiveKit; so is a Trio STT that does not stream (``capabilities.streaming`` False and
  ``recognize(buffer)``), wrapped in ``stt.StreamAdapter``;
- for ``llm``, ``stt`` and ``tts``, a LiveKit inference model string
  (``"openai/gpt-4.1-mini"``, ``"openai/gpt-realtime"``, ``"deepgram/nova-3:en"``,
  ``"cartesia/sonic-3:<voice id>"``), resolved to ``agents_trio.inference``'s model.

Anything else raises ``TypeError`` (or ``ValueError`` for a malformed string, or what LiveKit
raises building the model, such as a missing API key) naming the parameter, at construction
rather than at the first turn.

LiveKit is imported only for a value that needs it: a LiveKit object (whose class comes from
a ``livekit`` module, so LiveKit is loaded already) or a model string. The adapters find
their asyncio bridge when they are used: the job's, an ``open_bridge()`` block's, or the one
the session opens on demand (``agents_trio.io.bridge_on_demand``).
"""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any, Literal, NamedTuple

from .models import LLM, STT, VAD
from .realtime import is_realtime_model
from .stt_stream_adapter import RecognizingSTT, StreamAdapter

__all__ = ["ModelKind", "ResolvedModels", "resolve_model", "resolve_models",
           "resolve_turn_handling"]

ModelKind = Literal["llm", "stt", "tts", "vad"]

_ACCEPTED: dict[str, str] = {
    "llm": ("a Trio LLM (an object with chat()) or realtime model, a LiveKit llm.LLM or "
            "llm.RealtimeModel (e.g. openai.LLM()), or a LiveKit inference model string "
            "such as 'openai/gpt-4.1-mini'"),
    "stt": ("a Trio STT (an object with stream(), or recognize() with a VAD), a LiveKit "
            "stt.STT (e.g. deepgram.STT()), or a LiveKit inference model string such as "
            "'deepgram/nova-3'"),
    "tts": ("a Trio TTS (stream(text), sample_rate, num_channels), a LiveKit tts.TTS "
            "(e.g. cartesia.TTS()), or a LiveKit inference model string such as "
            "'cartesia/sonic-3:<voice>'"),
    "vad": "a Trio VAD (an object with stream()) or a LiveKit vad.VAD (e.g. silero.VAD.load())",
}


_A = {"llm": "an LLM", "stt": "an STT", "tts": "a TTS", "vad": "a VAD"}


class ResolvedModels(NamedTuple):
    stt: Any
    vad: Any
    llm: Any
    tts: Any
    turn_handling: Any


def resolve_models(owner: str, *, stt: object, vad: object, llm: object, tts: object,
                   turn_handling: object, unset: object = None) -> ResolvedModels:
    """Every model argument of ``owner`` (``"AgentSession"``, ``"Agent"``…) resolved; a value
    that ``is unset`` (or None) is kept. The VAD is resolved first: a non-streaming LiveKit
    STT is segmented by it.

    Raises:
        TypeError, ValueError: as :func:`resolve_model` and :func:`resolve_turn_handling`.
    """
    vad = resolve_model(owner, "vad", vad, unset=unset)
    return ResolvedModels(
        stt=resolve_model(owner, "stt", stt, unset=unset, vad=vad),
        vad=vad,
        llm=resolve_model(owner, "llm", llm, unset=unset),
        tts=resolve_model(owner, "tts", tts, unset=unset),
        turn_handling=resolve_turn_handling(owner, turn_handling))


def resolve_model(owner: str, kind: ModelKind, value: object, *, unset: object = None,
                  vad: object = None) -> object:
    """``value`` given as ``owner``'s ``kind=``, as a Trio model (see the module docstring).

    Args:
        vad: The VAD that segments a non-streaming LiveKit STT (``kind="stt"``).

    Raises:
        TypeError: ``value`` is no model of that kind, or needs livekit-agents, which is not
            installed.
        ValueError: A malformed model string, a non-streaming LiveKit STT without a VAD, or
            LiveKit refused to build the model (e.g. no API key).
    """
    if value is None or value is unset:
        return value
    where = f"{owner}({kind}={value!r})"
    try:
        if isinstance(value, str):
            resolved = _resolve_string(kind, value)
        elif _is_livekit_object(value):
            resolved = _livekit().adapt_livekit_model(kind, value, vad=vad)
        elif kind == "stt" and _recognizes_only(value):
            resolved = _streaming_stt(value, vad)
        else:
            resolved = value
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from e
    except TypeError as e:
        raise TypeError(f"{where}: {e}; {kind}= takes {_ACCEPTED[kind]}") from e
    declared = getattr(resolved, "model_kind", kind)
    if declared != kind or not _fits(kind, resolved):
        also = f" (it is {_A.get(declared, declared)} model)" if declared != kind else ""
        raise TypeError(f"{where}: not {_A[kind]} model{also}; {kind}= takes "
                        f"{_ACCEPTED[kind]}")
    return resolved


def resolve_turn_handling(owner: str, turn_handling: object) -> object:
    """``turn_handling`` with a LiveKit end-of-turn model under ``"turn_detection"``
    replaced by its adapter (a copy; anything else is left to the options' own checks).
    LiveKit's audio turn detector (``inference.TurnDetector``) becomes an audio detector.

    Raises:
        TypeError: a LiveKit object that is no end-of-turn model.
    """
    if not isinstance(turn_handling, Mapping):
        return turn_handling
    detector = turn_handling.get("turn_detection")
    if detector is None or isinstance(detector, str) or not _is_livekit_object(detector):
        return turn_handling
    try:
        adapted = _livekit().adapt_livekit_turn_detector(detector)
    except TypeError as e:
        raise TypeError(f"{owner}(turn_handling={{'turn_detection': ...}}): {e}") from e
    return {**turn_handling, "turn_detection": adapted}


def _resolve_string(kind: ModelKind, model: str) -> object:
    if kind == "vad":
        raise TypeError("a VAD is an object, not a model string")
    name = model.split(":", 1)[0]
    provider, _, model_id = name.partition("/")
    if not (provider and model_id) and name not in _known_gateway_names(kind):
        raise ValueError(f"{model!r} is not a LiveKit inference model string "
                         "('provider/model', optionally ':<language>' for stt or "
                         "':<voice>' for tts)")
    return _livekit().resolve_model_string(kind, model)


def _known_gateway_names(kind: ModelKind) -> set[str]:
    """The model names without a provider prefix that LiveKit's gateway lists (e.g. stt
    ``"auto"``, tts ``"cartesia"``)."""
    import typing

    try:
        from livekit.agents import inference
    except ImportError:
        return set()
    literal = {"llm": inference.LLMModels, "stt": inference.STTModels,
               "tts": inference.TTSModels}[kind]
    names: set[str] = set()
    todo: list[object] = [literal]
    while todo:
        for arg in typing.get_args(todo.pop()):
            if isinstance(arg, str):
                names.add(arg)
            else:
                todo.append(arg)
    return names


def _is_livekit_object(value: object) -> bool:
    """Whether ``value``'s class is (or derives from) a class of a ``livekit`` package."""
    return any(cls.__module__.startswith("livekit.") for cls in type(value).__mro__)


def _livekit() -> types.ModuleType:
    """``agents_trio.plugins.resolve``, imported on first need."""
    try:
        from .plugins import resolve
    except ImportError as e:
        raise TypeError("LiveKit models and model strings need livekit-agents: "
                        "pip install 'agents-trio[livekit-plugins]'") from e
    return resolve


def _recognizes_only(model: object) -> bool:
    """A Trio STT that says it does not stream and recognizes whole recordings."""
    return getattr(getattr(model, "capabilities", None), "streaming", True) is False and \
        isinstance(model, RecognizingSTT)


def _streaming_stt(model: Any, vad: object) -> object:  # noqa: ANN401 - a RecognizingSTT
    if vad is None:
        raise ValueError("this STT does not stream: give the session a vad= to segment the "
                         "audio for it (it is then wrapped in stt.StreamAdapter)")
    if not isinstance(vad, VAD):
        raise TypeError(f"the vad that segments a non-streaming STT must be a VAD, got {vad!r}")
    return StreamAdapter(stt=model, vad=vad)


def _fits(kind: ModelKind, model: object) -> bool:
    if kind == "llm":
        return isinstance(model, LLM) or is_realtime_model(model)
    if kind == "tts":
        return callable(getattr(model, "stream", None)) and hasattr(model, "sample_rate") \
            and hasattr(model, "num_channels")
    return isinstance(model, STT if kind == "stt" else VAD)
