"""Turn-handling options: LiveKit's defaults, filled per key, with per-agent overrides."""

from __future__ import annotations

from typing import Any

import msgspec


class EndpointingOptions(msgspec.Struct, kw_only=True, frozen=True):
    min_delay: float = 0.5
    max_delay: float = 3.0


class InterruptionOptions(msgspec.Struct, kw_only=True, frozen=True):
    enabled: bool = True
    min_duration: float = 0.5
    min_words: int = 0
    resume_false_interruption: bool = True
    false_interruption_timeout: float | None = 2.0
    discard_audio_if_uninterruptible: bool = True


class PreemptiveOptions(msgspec.Struct, kw_only=True, frozen=True):
    enabled: bool = True
    preemptive_tts: bool = False
    max_speech_duration: float = 10.0
    max_retries: int = 3


class TurnHandling(msgspec.Struct, kw_only=True, frozen=True):
    """Resolved turn handling of one activity."""

    turn_detection: str | None = None
    endpointing: EndpointingOptions = EndpointingOptions()
    interruption: InterruptionOptions = InterruptionOptions()
    preemptive_generation: PreemptiveOptions = PreemptiveOptions()


_SECTIONS = {"endpointing": EndpointingOptions, "interruption": InterruptionOptions,
             "preemptive_generation": PreemptiveOptions}


def resolve_turn_handling(*layers: dict[str, Any] | None) -> TurnHandling:
    """Merge option dicts key by key over the defaults; later layers win.

    Raises:
        ValueError: an unknown section or key.
    """
    merged: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
    for layer in layers:
        for key, value in (layer or {}).items():
            if key == "turn_detection":
                merged["turn_detection"] = value
            elif key in _SECTIONS:
                if isinstance(value, msgspec.Struct):
                    value = msgspec.structs.asdict(value)
                unknown = set(value) - set(_SECTIONS[key].__struct_fields__)
                if unknown:
                    raise ValueError(f"unknown turn_handling.{key} keys: {sorted(unknown)}")
                sections[key].update(value)
            else:
                raise ValueError(f"unknown turn_handling key: {key!r}")
    return TurnHandling(
        turn_detection=merged.get("turn_detection"),
        **{name: cls(**sections[name]) for name, cls in _SECTIONS.items()},
    )
