"""Reference 10.2 item 10: the user speaks again while the first turn's reply is being prepared
(during ``on_user_turn_completed`` or before the reply speaks).

Speeches "Tell me a story" (0.5-2.0) and "about a firefighter." (2.6-3.2). The first reply's
TTS has ttfb 1.0, so it never gets to speak; only the answer to the second turn is heard.
"""

from __future__ import annotations

import pytest
import trio

from agents_trio import Agent, ChatContext, ChatMessage
from agents_trio.testing import FakeActions, create_session
from timeline import near, run_recorded

FIREFIGHTER = "Here is a story about a firefighter..."


class SlowHookAgent(Agent):
    def __init__(self, delay: float) -> None:
        super().__init__(instructions="You are a helpful assistant.")
        self.delay = delay
        self.hook_calls: list[tuple[str, float, float]] = []   # (text, started, ended)

    async def on_user_turn_completed(self, turn_ctx: ChatContext,
                                     new_message: ChatMessage) -> None:
        started = trio.current_time()
        if self.delay > 0.0:
            await trio.sleep(self.delay)
        self.hook_calls.append((new_message.text_content, started, trio.current_time()))


@pytest.mark.parametrize("preemptive", [False, True], ids=["no_preemptive", "preemptive"])
@pytest.mark.parametrize("delay", [0.0, 2.0], ids=["hook_0s", "hook_2s"])
async def test_second_turn_during_the_first_reply_preparation_gets_the_only_answer(
        autojump_clock, preemptive, delay):
    a = FakeActions()
    a.add_user_speech(0.5, 2.0, "Tell me a story", stt_delay=0.2)
    a.add_llm("Here is a story for you...", ttft=0.1, duration=0.3)
    a.add_tts(10.0, ttfb=1.0)
    a.add_user_speech(2.6, 3.2, "about a firefighter.")
    a.add_llm(FIREFIGHTER, ttft=0.1, duration=0.3)
    a.add_tts(10.0, ttfb=0.3)
    session = create_session(a, turn_handling={"preemptive_generation": {"enabled": preemptive}})
    agent = SlowHookAgent(delay)
    rec = await run_recorded(session, agent)

    states = rec.agent_states()
    if delay == 0.0:
        # turn 1 commits at 2.5 (thinking); the VAD threshold of the second speech interrupts
        # the unspoken reply at 3.15; turn 2 commits at 3.7 and its answer speaks at 4.3
        # (4.0 when its LLM ran preemptively from the final transcript at 3.4)
        speak = 4.0 if preemptive else 4.3
        expected = [("listening", 0.0), ("thinking", 2.5), ("listening", 3.15),
                    ("thinking", 3.7), ("speaking", speak), ("listening", speak + 10.0)]
        hooks = [("Tell me a story", 2.5, 2.5), ("about a firefighter.", 3.7, 3.7)]
    else:
        # turn 1's hook runs 2.5-4.5; its reply is then interrupted at once (turn 2 is queued);
        # turn 2's hook runs 4.5-6.5, then thinking and speaking at 7.1
        expected = [("listening", 0.0), ("thinking", 6.5), ("speaking", 7.1),
                    ("listening", 17.1)]
        hooks = [("Tell me a story", 2.5, 4.5), ("about a firefighter.", 4.5, 6.5)]
    assert [s for s, _ in states] == [s for s, _ in expected], rec.dump()
    for (state, t), (_, want) in zip(states, expected):
        assert near(t, want), f"{state} at {t}, expected {want}\n{rec.dump()}"

    assert [text for text, _, _ in agent.hook_calls] == [text for text, _, _ in hooks]
    for (_, started, ended), (_, want_start, want_end) in zip(agent.hook_calls, hooks):
        assert near(started - rec.t0, want_start) and near(ended - rec.t0, want_end), (
            agent.hook_calls, rec.t0)

    # both user messages are recorded, only the second turn is answered (in full)
    added = rec.of("conversation_item_added")
    assert [ev.item.type for ev in added] == ["agent_handoff", "message", "message", "message"], \
        rec.dump()
    assert [(ev.item.role, ev.item.text_content) for ev in added[1:]] == [
        ("user", "Tell me a story"), ("user", "about a firefighter."),
        ("assistant", FIREFIGHTER)], rec.dump()
    assert added[3].item.interrupted is False

    finished = rec.of("playback_finished")
    assert len(finished) == 1, rec.dump()
    assert finished[0].interrupted is False and near(finished[0].playback_position, 10.0)

    items = agent.chat_ctx.items
    assert [(i.type, getattr(i, "role", None)) for i in items] == [
        ("message", "system"), ("agent_config_update", None), ("message", "user"),
        ("message", "user"), ("message", "assistant")], items
    assert items[4].text_content == FIREFIGHTER
