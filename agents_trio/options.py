"""Turn-handling options: LiveKit's defaults, filled per key, with per-agent overrides.

Every layer is checked when it is given (``AgentSession(...)``, ``Agent(...)``), so a typo
fails at construction instead of leaving an agent that never answers.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Annotated, Any

import msgspec

from .audio_turn import AudioTurnDetector

NonNegative = Annotated[float, msgspec.Meta(ge=0)]

TURN_DETECTION_MODES = ("stt", "vad", "realtime_llm", "manual")
# LiveKit's end-of-turn protocol (voice/turn.py ``_TurnDetector``)
TURN_DETECTOR_METHODS = ("predict_end_of_turn", "unlikely_threshold", "supports_language")


class EndpointingOptions(msgspec.Struct, kw_only=True, frozen=True):
    min_delay: NonNegative = 0.5
    max_delay: NonNegative = 3.0


class InterruptionOptions(msgspec.Struct, kw_only=True, frozen=True):
    enabled: bool = True
    min_duration: NonNegative = 0.5
    min_words: Annotated[int, msgspec.Meta(ge=0)] = 0
    resume_false_interruption: bool = True
    false_interruption_timeout: NonNegative | None = 2.0
    # LiveKit's default is True (the STT hears silence while an uninterruptible speech
    # plays); agents_trio always passes the user's audio on, which is False. True is
    # rejected when given (see ``_section``) rather than accepted and ignored.
    discard_audio_if_uninterruptible: bool = False


class PreemptiveOptions(msgspec.Struct, kw_only=True, frozen=True):
    enabled: bool = True
    preemptive_tts: bool = False
    max_speech_duration: NonNegative = 10.0
    max_retries: Annotated[int, msgspec.Meta(ge=0)] = 3


class UserTurnLimit(msgspec.Struct, kw_only=True, frozen=True):
    """When a user turn is too long (None: no limit of that kind)."""

    max_words: Annotated[int, msgspec.Meta(gt=0)] | None = None
    max_duration: Annotated[float, msgspec.Meta(gt=0)] | None = None


class TurnHandling(msgspec.Struct, kw_only=True, frozen=True):
    """Resolved turn handling of one activity.

    ``turn_detection`` is a mode (``"stt"``, ``"vad"``, ``"realtime_llm"``, ``"manual"``),
    a turn detector object, or None (chosen from the models).
    """

    turn_detection: Any = None
    endpointing: EndpointingOptions = EndpointingOptions()
    interruption: InterruptionOptions = InterruptionOptions()
    preemptive_generation: PreemptiveOptions = PreemptiveOptions()
    user_turn_limit: UserTurnLimit = UserTurnLimit()


_SECTIONS: dict[str, type[msgspec.Struct]] = {
    "endpointing": EndpointingOptions, "interruption": InterruptionOptions,
    "preemptive_generation": PreemptiveOptions, "user_turn_limit": UserTurnLimit}

# LiveKit options that agents_trio does not implement: named as such in the error
_UNSUPPORTED = {"endpointing.mode", "endpointing.alpha", "interruption.mode",
                "interruption.backchannel_boundary"}


def _unknown(names: set[str], prefix: str) -> ValueError:
    full = sorted(f"{prefix}{n}" for n in names)
    unsupported = [n for n in full if n in _UNSUPPORTED]
    if unsupported:
        return ValueError(f"turn_handling option(s) of LiveKit Agents not supported by "
                          f"agents_trio: {unsupported}")
    return ValueError(f"unknown turn_handling key(s): {full}")


def check_turn_detection(value: object) -> None:
    """Accept a known mode, None, a turn detector (an object with LiveKit's end-of-turn
    protocol: ``predict_end_of_turn``, ``unlikely_threshold``, ``supports_language``) or an
    audio turn detector (:class:`agents_trio.audio_turn.AudioTurnDetector`).

    Raises:
        ValueError: an unknown mode string.
        TypeError: any other object.
    """
    if value is None or (isinstance(value, str) and value in TURN_DETECTION_MODES):
        return
    if isinstance(value, str):
        modes = ", ".join(repr(m) for m in TURN_DETECTION_MODES)
        raise ValueError(f"turn_detection must be one of {modes}, None, or a turn detector; "
                         f"got {value!r}")
    if isinstance(value, AudioTurnDetector):
        return
    if not all(callable(getattr(value, name, None)) for name in TURN_DETECTOR_METHODS):
        raise TypeError("turn_detection must be a mode string or a turn detector (an object "
                        "with async predict_end_of_turn, unlikely_threshold and "
                        f"supports_language methods); got {value!r}")


def _section(name: str, value: object) -> dict[str, Any]:
    """One section's keys, checked for names, types and ranges."""
    if isinstance(value, msgspec.Struct):
        value = msgspec.structs.asdict(value)
    if not isinstance(value, Mapping):
        raise ValueError(f"turn_handling.{name} must be a dict, got {value!r}")
    cls = _SECTIONS[name]
    unknown = set(value) - set(cls.__struct_fields__)
    if unknown:
        raise _unknown(unknown, f"{name}.")
    try:
        checked = msgspec.convert(dict(value), cls)
    except msgspec.ValidationError as e:
        raise ValueError(f"turn_handling.{name}: {e}") from None
    given = {key: getattr(checked, key) for key in value}
    if name == "interruption" and given.get("discard_audio_if_uninterruptible"):
        raise ValueError("turn_handling.interruption.discard_audio_if_uninterruptible=True is "
                         "not supported by agents_trio: the STT always hears the user's audio "
                         "(give False, or leave it out)")
    # only within one layer: an agent may lower max_delay below the default min_delay
    if name == "endpointing" and {"min_delay", "max_delay"} <= set(given) \
            and given["max_delay"] < given["min_delay"]:
        raise ValueError("turn_handling.endpointing: max_delay must not be below min_delay")
    return given


def check_turn_handling(layer: Mapping[str, Any] | None) -> None:
    """Check one layer of turn-handling options (the session's or an agent's) on its own.

    Raises:
        TypeError: ``layer`` is not a mapping, or ``turn_detection`` is an object that is not
            a turn detector.
        ValueError: an unknown section or key, a value of the wrong type or out of range, or
            an unknown ``turn_detection`` mode.
    """
    if layer is None:
        return
    if not isinstance(layer, Mapping):
        raise TypeError(f"turn_handling must be a dict, got {layer!r}")
    for key, value in layer.items():
        if key == "turn_detection":
            check_turn_detection(value)
        elif key in _SECTIONS:
            _section(key, value)
        else:
            raise _unknown({key}, "")


def resolve_turn_handling(*layers: Mapping[str, Any] | None) -> TurnHandling:
    """Merge option dicts key by key over the defaults; later layers win.

    Raises:
        TypeError, ValueError: as ``check_turn_handling``.
    """
    merged: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
    for layer in layers:
        check_turn_handling(layer)
        for key, value in (layer or {}).items():
            if key == "turn_detection":
                merged["turn_detection"] = value
            else:
                sections[key].update(_section(key, value))
    return TurnHandling(
        turn_detection=merged.get("turn_detection"),
        endpointing=EndpointingOptions(**sections["endpointing"]),
        interruption=InterruptionOptions(**sections["interruption"]),
        preemptive_generation=PreemptiveOptions(**sections["preemptive_generation"]),
        user_turn_limit=UserTurnLimit(**sections["user_turn_limit"]),
    )


def check_non_negative(name: str, value: object, *, allow_none: bool = False,
                       positive: bool = False, finite: bool = False) -> None:
    """Raise ``ValueError`` naming the option unless ``value`` is a number ≥ 0 (> 0 when
    ``positive``; not infinite when ``finite``), or None when ``allow_none``."""
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        raise ValueError(f"{name} must be a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"{name} must be {bound}, got {value!r}")
    if finite and value == math.inf:
        raise ValueError(f"{name} must be finite, got {value!r}")


@dataclasses.dataclass(frozen=True)
class APIConnectOptions:
    """How a provider connects: retries, the pause between them and the timeout (LiveKit's
    ``APIConnectOptions``, same fields and defaults). Trio-native models receive it as
    ``conn_options`` and apply it themselves; adapted LiveKit plugins get it passed through.
    """

    max_retry: int = 3
    retry_interval: float = 2.0
    timeout: float = 10.0

    def __post_init__(self) -> None:
        for name in ("max_retry", "retry_interval", "timeout"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be greater than or equal to 0")


DEFAULT_API_CONNECT_OPTIONS = APIConnectOptions()


def merged_turn_handling(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``layer`` applied key by key (a section's keys merge into base's)."""
    out = {k: dict(v) if isinstance(v, Mapping) else v for k, v in base.items()}
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key].update(value)
        else:
            out[key] = dict(value) if isinstance(value, Mapping) else value
    return out


def session_options_update(*, endpointing_opts: Mapping[str, Any] | None,
                           min_endpointing_delay: float | None,
                           max_endpointing_delay: float | None, turn_detection: object,
                           set_turn_detection: bool) -> dict[str, Any]:
    """The ``turn_handling`` layer a ``session.update_options(...)`` call stands for,
    checked (ValueError/TypeError as at construction)."""
    endpointing = dict(endpointing_opts or {})
    if min_endpointing_delay is not None:
        endpointing["min_delay"] = min_endpointing_delay
    if max_endpointing_delay is not None:
        endpointing["max_delay"] = max_endpointing_delay
    layer: dict[str, Any] = {}
    if endpointing:
        layer["endpointing"] = endpointing
    if set_turn_detection:
        layer["turn_detection"] = turn_detection
    check_turn_handling(layer)
    return layer
