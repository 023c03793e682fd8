"""LiveKit's option types for ``turn_handling=`` (``TurnHandlingOptions`` and its sections),
as the ``TypedDict`` s LiveKit declares: calling one builds the plain dict that
``AgentSession(turn_handling=...)`` and ``Agent(turn_handling=...)`` take.

Keys this runtime does not implement (``user_turn_limit``, ``endpointing.mode``,
``endpointing.alpha``, ``interruption.mode``, ``interruption.backchannel_boundary``) are
declared, as in LiveKit, and rejected with a ``ValueError`` naming them when given (see
``options.py``); docs/livekit-names.md lists them.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = ["EndpointingOptions", "InterruptionOptions", "PreemptiveGenerationOptions",
           "TurnHandlingOptions", "UserTurnLimitOptions"]


class EndpointingOptions(TypedDict, total=False):
    mode: Literal["fixed", "dynamic"]
    min_delay: float
    max_delay: float
    alpha: float


class InterruptionOptions(TypedDict, total=False):
    enabled: bool
    mode: Literal["adaptive", "vad"]
    discard_audio_if_uninterruptible: bool
    min_duration: float
    min_words: int
    resume_false_interruption: bool
    false_interruption_timeout: float | None
    backchannel_boundary: Any


class PreemptiveGenerationOptions(TypedDict, total=False):
    enabled: bool
    preemptive_tts: bool
    max_speech_duration: float
    max_retries: int


class UserTurnLimitOptions(TypedDict, total=False):
    max_words: int | None
    max_duration: float | None


class TurnHandlingOptions(TypedDict, total=False):
    turn_detection: Any
    endpointing: EndpointingOptions
    interruption: InterruptionOptions
    preemptive_generation: PreemptiveGenerationOptions
    user_turn_limit: UserTurnLimitOptions
