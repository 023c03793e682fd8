"""Agent's and AgentTask's deprecated turn keywords (LiveKit 1.8.9 takes ``turn_detection``,
``min_endpointing_delay``, ``max_endpointing_delay`` on both, as it does on the session).
They are folded into the agent's ``turn_handling`` with a DeprecationWarning, and an explicit
``turn_handling`` wins, as for ``AgentSession``. LiveKit's
``use_tts_aligned_transcript`` is still refused by name (``tool_handling`` and ``mcp_servers`` are taken)."""

from __future__ import annotations

import pytest

from agents_trio import Agent, AgentTask
from agents_trio.options import resolve_turn_handling


@pytest.mark.parametrize("cls", [Agent, AgentTask])
def test_deprecated_keywords_land_in_the_agents_turn_handling(cls: type[Agent]) -> None:
    with pytest.warns(DeprecationWarning, match="min_endpointing_delay"):
        agent = cls(instructions="x", turn_detection="vad", min_endpointing_delay=0.2,
                    max_endpointing_delay=3.0)
    assert agent.turn_handling == {"turn_detection": "vad",
                                   "endpointing": {"min_delay": 0.2, "max_delay": 3.0}}
    resolved = resolve_turn_handling({"endpointing": {"min_delay": 0.9}}, agent.turn_handling)
    assert resolved.endpointing.min_delay == 0.2
    assert resolved.endpointing.max_delay == 3.0


@pytest.mark.parametrize("cls", [Agent, AgentTask])
def test_explicit_turn_handling_wins_over_the_deprecated_keywords(cls: type[Agent]) -> None:
    with pytest.warns(DeprecationWarning):
        agent = cls(instructions="x", turn_handling={"endpointing": {"max_delay": 5.0}},
                    min_endpointing_delay=0.2)
    assert agent.turn_handling == {"endpointing": {"max_delay": 5.0}}


def test_no_deprecated_keyword_no_warning() -> None:
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Agent(instructions="x").turn_handling == {}


@pytest.mark.parametrize("cls", [Agent, AgentTask])
def test_bad_deprecated_value_is_refused_at_construction(cls: type[Agent]) -> None:
    with pytest.warns(DeprecationWarning), pytest.raises((ValueError, TypeError)):
        cls(instructions="x", min_endpointing_delay=-1.0)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError):
        cls(instructions="x", turn_detection="telepathy")


@pytest.mark.parametrize("name", ["use_tts_aligned_transcript"])
def test_unsupported_keywords_are_refused_by_name(name: str) -> None:
    with pytest.raises(TypeError, match=name):
        Agent(instructions="x", **{name: None})
