"""Reference 10.2 item 5 (and 4.6): interruption by text input.

The agent tells a 15 s story (playout from 3.2); at 5.0 the test calls ``session.interrupt()``
and ``session.generate_reply(user_input="stop from text input")``, which answers "Ok, I'll stop
now." with 2 s of audio.
"""

from __future__ import annotations

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeActions, create_session
from timeline import near, run_recorded

STORY = "Here is a long story for you ... the end."
TEXT_INPUT = "stop from text input"
ANSWER = "Ok, I'll stop now."


async def test_text_input_interrupts_the_story_and_replies_to_the_text(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Tell me a story.")
    a.add_llm(STORY)
    a.add_tts(15.0)
    a.add_llm(ANSWER, input=TEXT_INPUT)
    a.add_tts(2.0)
    session = create_session(a)
    agent = Agent(instructions="You are a helpful assistant.")
    handles = []

    def fake_text_input(session: AgentSession) -> None:
        session.interrupt()
        handles.append(session.generate_reply(user_input=TEXT_INPUT))

    rec = await run_recorded(session, agent, script=[(5.0, fake_text_input)])

    # states: speaking goes straight to thinking for the new reply (no listening in between)
    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "speaking", "thinking",
                                      "speaking", "listening"], rec.dump()
    for (state, t), want in zip(states, [0.0, 3.0, 3.2, 5.0, 5.5, 7.5]):
        assert near(t, want), f"{state} at {t}, expected {want}\n{rec.dump()}"

    # playback: the story is cut at 1.8 s, the answer plays in full
    finished = rec.of("playback_finished")
    assert len(finished) == 2, rec.dump()
    assert finished[0].interrupted is True
    assert near(finished[0].playback_position, 1.8) and near(rec.t(finished[0]), 5.0)
    assert finished[1].interrupted is False
    assert near(finished[1].playback_position, 2.0) and near(rec.t(finished[1]), 7.5)
    assert session.output.audio.playback_finished_events == finished

    # the text input creates its speech at 5.0
    created = [ev for ev in rec.of("speech_created") if ev.speech_handle is handles[0]]
    assert len(created) == 1 and near(rec.t(created[0]), 5.0), rec.dump()

    # conversation_item_added: the text-input user message is emitted at 5.0 *before* the
    # interrupted assistant message, which still sorts before it in the chat context
    added = [(ev.item.role, ev.item.text_content, ev.item.interrupted, rec.t(ev))
             for ev in rec.of("conversation_item_added") if ev.item.type == "message"]
    assert [(r, t, i) for r, t, i, _ in added] == [
        ("user", "Tell me a story.", False),
        ("user", TEXT_INPUT, False),
        ("assistant", "Here is", True),
        ("assistant", ANSWER, False),
    ], rec.dump()
    for (*_, t), want in zip(added, [3.0, 5.0, 5.0, 7.5]):
        assert near(t, want), rec.dump()

    items = agent.chat_ctx.items
    assert len(items) == 6, items
    assert items[0].type == "message" and items[0].role == "system"
    assert items[1].type == "agent_config_update"
    assert items[2].role == "user" and items[2].text_content == "Tell me a story."
    assert items[3].role == "assistant" and items[3].interrupted is True
    assert items[3].text_content == "Here is"
    assert items[4].role == "user" and items[4].text_content == TEXT_INPUT
    assert items[5].role == "assistant" and items[5].text_content == ANSWER
    assert items[5].interrupted is False
