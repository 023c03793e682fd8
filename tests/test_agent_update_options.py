"""``Agent.update_options``: swap the agent's LLM or TTS, also while it runs (the next reply
uses the new one), as LiveKit's; a realtime model is not swapped in or out of a running
agent, and a per-agent VAD is refused as at construction."""

from __future__ import annotations

import pytest

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeActions, FakeLLM, FakeRealtimeModel


def _llm(answer: str) -> FakeLLM:
    a = FakeActions()
    a.add_llm(answer, input="hi")
    return FakeLLM(a.llm_responses)


async def test_a_running_agent_answers_with_the_new_llm(autojump_clock) -> None:
    agent = Agent(instructions="x")
    async with AgentSession(llm=_llm("from the session")) as session:
        await session.start(agent)
        first = await session.run(user_input="hi")
        agent.update_options(llm=_llm("from the new one"))
        second = await session.run(user_input="hi")
    texts = [r.expect.next_event().is_message(role="assistant").event().item.text_content
             for r in (first, second)]
    assert texts == ["from the session", "from the new one"]


async def test_an_agent_not_running_keeps_the_model_for_its_start(autojump_clock) -> None:
    agent = Agent(instructions="x")
    agent.update_options(llm=_llm("own llm"))
    async with AgentSession(llm=_llm("session llm")) as session:
        await session.start(agent)
        result = await session.run(user_input="hi")
    msg = result.expect.next_event().is_message(role="assistant").event().item
    assert msg.text_content == "own llm"


async def test_a_realtime_model_is_not_swapped_into_a_running_agent(autojump_clock) -> None:
    agent = Agent(instructions="x")
    async with AgentSession(llm=_llm("x")) as session:
        await session.start(agent)
        with pytest.raises(RuntimeError, match="realtime"):
            agent.update_options(llm=FakeRealtimeModel())


def test_a_per_agent_vad_is_refused() -> None:
    with pytest.raises(ValueError, match="vad"):
        Agent(instructions="x").update_options(vad=object())  # type: ignore[arg-type]
