"""Options are checked when the session or agent is built (issue 15, item 11).

``turn_detection="typo"`` used to be accepted and the agent never answered; an unknown
``turn_handling`` key failed only when the session started. Now every value that would
silently break is a clear error at construction, and a turn detector object (LiveKit's
end-of-turn protocol: ``predict_end_of_turn``) is accepted and used.
"""

from __future__ import annotations

import pytest
import trio

from agents_trio import Agent, AgentSession, AgentTask
from agents_trio.testing import FakeActions, create_session, run_session
from timeline import Recorder, near


@pytest.mark.parametrize("value", ["typo", "VAD", ""])
def test_an_unknown_turn_detection_mode_is_rejected(value):
    with pytest.raises(ValueError, match="turn_detection") as info:
        AgentSession(turn_handling={"turn_detection": value})
    assert "'stt', 'vad', 'realtime_llm', 'manual'" in str(info.value)
    with pytest.raises(ValueError, match="turn_detection"):
        Agent(instructions="x", turn_handling={"turn_detection": value})


@pytest.mark.parametrize("value", [object(), 3, ["vad"]])
def test_an_object_that_is_not_a_turn_detector_is_rejected(value):
    with pytest.raises(TypeError, match="predict_end_of_turn"):
        AgentSession(turn_handling={"turn_detection": value})
    with pytest.raises(TypeError, match="predict_end_of_turn"):
        Agent(instructions="x", turn_handling={"turn_detection": value})


@pytest.mark.parametrize("value", [None, "stt", "vad", "realtime_llm", "manual"])
def test_the_known_modes_are_accepted(value):
    AgentSession(turn_handling={"turn_detection": value})
    Agent(instructions="x", turn_handling={"turn_detection": value})


@pytest.mark.parametrize("turn_handling, message", [
    ({"endpointng": {}}, r"unknown turn_handling key\(s\): \['endpointng'\]"),
    ({"endpointing": {"mode": "dynamic"}}, r"not supported by agents_trio: \['endpointing.mode'\]"),
    ({"endpointing": {"min_dleay": 1}}, "min_dleay"),
    ({"endpointing": {"min_delay": -0.5}}, "min_delay"),
    ({"endpointing": {"max_delay": -1}}, "max_delay"),
    ({"endpointing": {"min_delay": 2.0, "max_delay": 1.0}}, "max_delay"),
    ({"endpointing": 0.5}, "endpointing"),
    ({"interruption": {"min_duration": -1}}, "min_duration"),
    ({"interruption": {"min_words": -2}}, "min_words"),
    ({"interruption": {"enabled": "yes"}}, "enabled"),
    ({"interruption": {"false_interruption_timeout": -1.0}}, "false_interruption_timeout"),
    ({"preemptive_generation": {"max_retries": -1}}, "max_retries"),
    ({"preemptive_generation": {"max_speech_duration": "long"}}, "max_speech_duration"),
])
def test_bad_turn_handling_fails_at_construction(turn_handling, message):
    with pytest.raises(ValueError, match=message):
        AgentSession(turn_handling=turn_handling)
    with pytest.raises(ValueError, match=message):
        Agent(instructions="x", turn_handling=turn_handling)


def test_turn_handling_must_be_a_mapping():
    with pytest.raises(TypeError, match="turn_handling"):
        AgentSession(turn_handling=["vad"])


def test_an_agent_task_checks_its_turn_handling_too():
    with pytest.raises(ValueError, match="turn_detection"):
        AgentTask(instructions="x", turn_handling={"turn_detection": "typo"})


def test_an_agent_override_is_checked_on_its_own_keys():
    # only the session knows the merged values: an agent may lower max_delay alone
    Agent(instructions="x", turn_handling={"endpointing": {"max_delay": 0.3}})


@pytest.mark.parametrize("kwargs", [
    {"min_consecutive_speech_delay": -1.0},
    {"user_away_timeout": -5.0},
    {"aec_warmup_duration": -1.0},
    {"close_grace": -1.0},
    {"max_tool_steps": -1},
    {"max_unrecoverable_errors": -1},
    {"session_close_transcript_timeout": -1.0},
    {"audio_write_timeout": 0.0},
])
def test_bad_session_options_fail_at_construction(kwargs):
    (name,) = kwargs
    with pytest.raises(ValueError, match=name):
        AgentSession(**kwargs)


def test_a_negative_agent_speech_delay_fails_at_construction():
    with pytest.raises(ValueError, match="min_consecutive_speech_delay"):
        Agent(instructions="x", min_consecutive_speech_delay=-0.1)


class FixedDetector:
    """A turn detector (LiveKit's end-of-turn protocol) with a fixed prediction."""

    def __init__(self, probability: float) -> None:
        self.probability = probability
        self.contexts: list = []

    async def unlikely_threshold(self, language):
        return 0.5

    async def supports_language(self, language):
        return True

    async def predict_end_of_turn(self, chat_ctx, *, timeout=None):
        self.contexts.append(chat_ctx)
        return self.probability


async def _answered_at(detector: FixedDetector) -> float:
    a = FakeActions()
    a.add_user_speech(0.5, 1.5, "I was thinking")
    a.add_llm("Go on.")
    a.add_tts(0.5)
    session = create_session(a, turn_handling={"turn_detection": detector})
    rec = Recorder(session)
    with trio.fail_after(60):
        rec.t0 = await run_session(session, Agent(instructions="x"), drain_delay=8.0)
    (committed,) = [ev for ev in rec.of("conversation_item_added")
                    if getattr(ev.item, "role", "") == "user"]
    return rec.t(committed)


async def test_a_turn_detector_is_accepted_and_consulted(autojump_clock):
    likely = FixedDetector(0.9)
    # VAD end of speech at 2.0 (speech end 1.5 + 0.5 silence): the turn ends at once
    assert near(await _answered_at(likely), 2.0)
    (ctx,) = likely.contexts
    assert ctx.items[-1].text_content == "I was thinking"


async def test_an_unlikely_end_of_turn_waits_for_max_delay(autojump_clock):
    # the harness's max_delay is 6.0, counted from the end of speech
    assert near(await _answered_at(FixedDetector(0.1)), 7.5)


class BrokenDetector(FixedDetector):
    async def predict_end_of_turn(self, chat_ctx, *, timeout=None):
        raise RuntimeError("detector crashed")


async def test_a_failing_turn_detector_is_reported_and_the_turn_still_ends(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 1.5, "I was thinking")
    a.add_llm("Go on.")
    a.add_tts(0.5)
    detector = BrokenDetector(0.0)
    session = create_session(a, turn_handling={"turn_detection": detector})
    rec = Recorder(session)
    with trio.fail_after(60):
        rec.t0 = await run_session(session, Agent(instructions="x"), drain_delay=3.0)
    (error,) = rec.of("error")
    assert str(error.error) == "detector crashed" and error.source is detector
    (committed,) = [ev for ev in rec.of("conversation_item_added")
                    if getattr(ev.item, "role", "") == "user"]
    assert near(rec.t(committed), 2.0)
    assert [c.reason for c in rec.of("close")] == ["user_initiated"]


def test_discard_audio_if_uninterruptible_true_is_rejected_false_accepted() -> None:
    """LiveKit's option is not implemented: asking for it fails at construction instead of
    being accepted and ignored."""
    with pytest.raises(ValueError, match="discard_audio_if_uninterruptible=True is not supported"):
        AgentSession(turn_handling={"interruption": {"discard_audio_if_uninterruptible": True}})
    with pytest.raises(ValueError, match="discard_audio_if_uninterruptible=True is not supported"):
        Agent(instructions="x",
              turn_handling={"interruption": {"discard_audio_if_uninterruptible": True}})
    AgentSession(turn_handling={"interruption": {"discard_audio_if_uninterruptible": False}})


def test_a_per_agent_vad_is_rejected() -> None:
    """Agent(vad=...) was accepted and never read: the session's VAD serves every agent."""
    with pytest.raises(ValueError, match="per-agent vad is not supported"):
        Agent(instructions="x", vad=None)
    with pytest.raises(ValueError, match="per-agent vad is not supported"):
        AgentTask(instructions="x", vad=None)


@pytest.mark.parametrize("value", ["no", "yes", 0, 1, None])
def test_allow_interruptions_that_is_not_a_bool_fails_at_construction(value):
    # allow_interruptions="no" (or 0, or None, which LiveKit reads as off) left them on: only
    # False turned them off
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="allow_interruptions"):
        AgentSession(allow_interruptions=value)
    if value is not None:   # an agent's None is its default: the session's setting
        with pytest.raises(TypeError, match="allow_interruptions"):
            Agent(instructions="x", allow_interruptions=value)


@pytest.mark.parametrize("value", [True, False])
def test_allow_interruptions_as_a_bool_is_accepted(value):
    with pytest.warns(DeprecationWarning):
        AgentSession(allow_interruptions=value)


@pytest.mark.parametrize("tools", [[1], ["lookup"], [object()]])
def test_a_session_tool_that_is_not_a_tool_fails_at_construction(tools):
    # as an agent's tools do: before, the session took it and the first reply failed
    with pytest.raises(ValueError, match="unknown tool type"):
        AgentSession(tools=tools)
