"""``turn_handling={"user_turn_limit": {...}}``: a user who talks past ``max_words`` or
``max_duration`` without the agent answering gets ``Agent.on_user_turn_exceeded`` (LiveKit's
hook and ``UserTurnExceededEvent``), which by default cuts in with a short reply."""

from __future__ import annotations

from typing import Any

import pytest

from agents_trio import Agent, AgentSession, UserTurnExceededEvent
from agents_trio.agent import CUT_IN_INSTRUCTIONS
from agents_trio.testing import FakeActions, create_session
from timeline import run_recorded

LONG = "one two three four five six seven eight nine ten"


class Counting(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")
        self.exceeded: list[UserTurnExceededEvent] = []

    async def on_user_turn_exceeded(self, ev: UserTurnExceededEvent) -> None:
        self.exceeded.append(ev)


def _limited(a: FakeActions, limit: dict[str, Any]) -> AgentSession:
    return create_session(a, turn_handling={"user_turn_limit": limit,
                                            "turn_detection": "manual"})


async def test_too_many_words_calls_the_hook_with_the_turns_words(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(0.5, 2.0, "one two three four")
    a.add_user_speech(2.5, 4.0, "five six seven")
    agent = Counting()
    await run_recorded(_limited(a, {"max_words": 6}), agent)
    assert len(agent.exceeded) == 1
    ev = agent.exceeded[0]
    assert ev.type == "user_turn_exceeded"
    assert ev.accumulated_word_count == 7
    assert ev.accumulated_transcript == "one two three four five six seven"
    assert ev.transcript == "one two three four five six seven"
    assert ev.duration > 0


async def test_under_the_limit_nothing_happens(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(0.5, 2.0, "one two three")
    agent = Counting()
    await run_recorded(_limited(a, {"max_words": 6, "max_duration": 30.0}), agent)
    assert agent.exceeded == []


async def test_too_long_a_turn_by_duration(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(0.5, 12.0, LONG)
    agent = Counting()
    await run_recorded(_limited(a, {"max_duration": 10.0}), agent)
    assert len(agent.exceeded) == 1 and agent.exceeded[0].duration >= 10.0


async def test_the_default_hook_cuts_in_with_a_reply(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(0.5, 3.0, LONG)
    a.add_llm("Sorry to cut in!", input=CUT_IN_INSTRUCTIONS)
    a.add_tts(1.0, input="Sorry to cut in!")
    session = _limited(a, {"max_words": 5})
    rec = await run_recorded(session, Agent(instructions="x"))
    said = [(ev.item.role, ev.item.text_content) for ev in rec.of("conversation_item_added")
            if ev.item.type == "message"]
    # (the close later records the still-open turn again, unanswered)
    assert said[:2] == [("user", LONG), ("assistant", "Sorry to cut in!")]
    call = session.llm.calls[-1]
    assert call["tool_choice"] == "none"
    assert any("talked for a long time" in (i.text_content or "")
               for i in call["chat_ctx"].items if i.type == "message" and i.role == "system")


@pytest.mark.parametrize("limit", [{"max_words": 0}, {"max_duration": -1.0},
                                   {"max_sentences": 3}])
def test_bad_limits_are_refused(limit: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        AgentSession(turn_handling={"user_turn_limit": limit})
