"""Reference 10.2 item 9 and section 6: preemptive generation latency.

The user speaks 0.5-2.0 (final transcript at 2.1, end of turn at 2.5); LLM ttft 0.1 / duration
0.3; TTS 3 s with ttfb 0.3. Agent speaking minus user stop (the backdated 2.0):
0.7 with preemptive TTS, 0.8 with the LLM only, 1.1 without preemptive generation.
"""

from __future__ import annotations

import pytest

from agents_trio import Agent
from agents_trio.testing import FakeActions, create_session
from timeline import Recorder, near, run_recorded

ANSWER = "I'm doing great, thank you!"


def _actions() -> FakeActions:
    a = FakeActions()
    a.add_user_speech(0.5, 2.0, "Hello, how are you?", stt_delay=0.1)
    a.add_llm(ANSWER, ttft=0.1, duration=0.3)
    a.add_tts(3.0, ttfb=0.3)
    return a


async def _run(session_preemptive: dict, agent_turn_handling: dict | None = None):
    session = create_session(_actions(),
                             turn_handling={"preemptive_generation": session_preemptive})
    agent = Agent(instructions="You are a helpful assistant.", turn_handling=agent_turn_handling)
    rec = await run_recorded(session, agent)
    return session, agent, rec


def _check_latency(rec: Recorder, expected_latency: float) -> None:
    user = rec.of("user_state_changed")
    assert [(ev.old_state, ev.new_state) for ev in user] == [
        ("listening", "speaking"), ("speaking", "listening")], rec.dump()
    assert near(rec.t(user[0]), 0.5) and near(rec.t(user[1]), 2.0), rec.dump()

    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "speaking", "listening"], rec.dump()
    speaking_at = rec.of("agent_state_changed")[2].created_at
    latency = speaking_at - user[1].created_at
    assert near(latency, expected_latency), (
        f"speaking - user stop = {latency:.2f}, expected {expected_latency}\n{rec.dump()}")
    # the turn commits at 2.5 (thinking) and the 3 s answer plays to the end
    assert near(states[1][1], 2.5), rec.dump()
    assert near(states[3][1], 2.0 + expected_latency + 3.0), rec.dump()
    finished = rec.of("playback_finished")
    assert len(finished) == 1 and finished[0].interrupted is False, rec.dump()
    assert near(finished[0].playback_position, 3.0)


@pytest.mark.parametrize(
    "preemptive, expected_latency",
    [
        ({"preemptive_tts": True}, 0.7),
        ({"preemptive_tts": False}, 0.8),
        ({"enabled": False}, 1.1),
    ],
    ids=["preemptive_tts", "preemptive_llm_only", "disabled"],
)
async def test_preemptive_generation_shortens_the_reply_latency(autojump_clock, preemptive,
                                                                 expected_latency):
    session, agent, rec = await _run(preemptive)
    _check_latency(rec, expected_latency)

    created = rec.of("speech_created")
    assert len(created) == 1, rec.dump()
    # a preemptive speech is created at the final transcript (2.1), otherwise at the turn (2.5)
    expected_created = 2.5 if preemptive.get("enabled") is False else 2.1
    assert near(rec.t(created[0]), expected_created), rec.dump()

    items = agent.chat_ctx.items
    assert [(i.type, getattr(i, "role", None)) for i in items] == [
        ("message", "system"), ("agent_config_update", None), ("message", "user"),
        ("message", "assistant")], items
    assert items[2].text_content == "Hello, how are you?"
    assert items[3].text_content == ANSWER and items[3].interrupted is False


@pytest.mark.parametrize(
    "session_preemptive, agent_preemptive, expected_latency",
    [
        # the agent disables what the session enabled: no preemptive generation
        ({"preemptive_tts": True}, {"enabled": False}, 1.1),
        # the agent enables (with TTS) what the session disabled: fully preemptive
        ({"enabled": False}, {"enabled": True, "preemptive_tts": True}, 0.7),
    ],
    ids=["agent_disables", "agent_enables_with_tts"],
)
async def test_agent_preemptive_generation_overrides_the_session(
        autojump_clock, session_preemptive, agent_preemptive, expected_latency):
    session, agent, rec = await _run(session_preemptive,
                                     {"preemptive_generation": agent_preemptive})
    _check_latency(rec, expected_latency)
