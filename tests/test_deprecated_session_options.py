"""AgentSession's deprecated turn keywords (LiveKit 1.8.9 still takes them: examples written
for LiveKit 1.x pass ``preemptive_generation=True``, ``turn_detection=...``,
``min_endpointing_delay=...`` and so on). Each is folded into ``turn_handling`` as LiveKit
does, with a DeprecationWarning; an explicit ``turn_handling`` wins over them."""

from __future__ import annotations

import pytest

from agents_trio import AgentSession
from agents_trio.options import resolve_turn_handling


def _session(**kwargs: object) -> AgentSession:
    with pytest.warns(DeprecationWarning, match="turn_handling"):
        return AgentSession(**kwargs)  # type: ignore[arg-type]


def test_each_deprecated_keyword_lands_in_its_turn_handling_section() -> None:
    session = _session(preemptive_generation=False, min_endpointing_delay=0.3,
                       max_endpointing_delay=4.0, allow_interruptions=False,
                       discard_audio_if_uninterruptible=False, min_interruption_duration=0.7,
                       min_interruption_words=2, false_interruption_timeout=1.5,
                       resume_false_interruption=False, turn_detection="vad")
    assert session.turn_handling_overrides == {
        "endpointing": {"min_delay": 0.3, "max_delay": 4.0},
        "interruption": {"enabled": False, "discard_audio_if_uninterruptible": False,
                         "min_duration": 0.7, "min_words": 2,
                         "false_interruption_timeout": 1.5,
                         "resume_false_interruption": False},
        "turn_detection": "vad",
        "preemptive_generation": {"enabled": False},
    }
    resolved = resolve_turn_handling(session.turn_handling_overrides)
    assert resolved.preemptive_generation.enabled is False
    assert resolved.endpointing.min_delay == 0.3
    assert resolved.interruption.enabled is False


def test_agent_false_interruption_timeout_is_the_older_name_and_wins() -> None:
    session = _session(false_interruption_timeout=1.0, agent_false_interruption_timeout=2.0)
    assert session.turn_handling_overrides == {
        "interruption": {"false_interruption_timeout": 2.0}}


def test_allow_interruptions_true_adds_nothing_and_preemptive_options_dict_is_kept() -> None:
    session = _session(allow_interruptions=True,
                       preemptive_generation={"enabled": True, "max_retries": 1})
    assert session.turn_handling_overrides == {
        "preemptive_generation": {"enabled": True, "max_retries": 1}}


def test_explicit_turn_handling_wins_over_deprecated_keywords() -> None:
    session = _session(turn_handling={"preemptive_generation": {"enabled": False}},
                       preemptive_generation=True, min_endpointing_delay=0.9)
    assert session.turn_handling_overrides == {"preemptive_generation": {"enabled": False}}


def test_unknown_keyword_is_still_a_type_error() -> None:
    with pytest.raises(TypeError, match="preemptive_generations"):
        AgentSession(preemptive_generations=True)  # type: ignore[call-arg]


def test_bad_deprecated_value_is_refused_at_construction() -> None:
    with pytest.raises((ValueError, TypeError)):
        _session(min_endpointing_delay=-1.0)
