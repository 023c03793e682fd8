"""Reference 10.2 item 4: interruption options (``min_words`` and ``enabled=False``).

Script: the agent tells a 5 s story (playout 3.2-8.2); the user says "Stop!" (5.0-6.0) and
"ok, stop!" (6.5-7.5, transcribed without delay).
"""

from __future__ import annotations

from agents_trio import Agent
from agents_trio.testing import FakeActions, create_session
from timeline import Recorder, near, run_recorded

STORY = "Here is a long story for you ... the end."


def _actions() -> FakeActions:
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Tell me a story.")
    a.add_llm(STORY)
    a.add_tts(5.0)
    a.add_user_speech(5.0, 6.0, "Stop!")
    a.add_user_speech(6.5, 7.5, "ok, stop!", stt_delay=0.0)
    return a


async def _run(turn_handling: dict) -> tuple:
    session = create_session(_actions(), turn_handling=turn_handling)
    agent = Agent(instructions="You are a helpful assistant.")
    rec = await run_recorded(session, agent)
    return session, agent, rec


def _check_states(rec: Recorder, expected: list[tuple[str, float]]) -> None:
    states = rec.agent_states()
    assert [s for s, _ in states] == [s for s, _ in expected], rec.dump()
    for (state, t), (_, want) in zip(states, expected):
        assert near(t, want), f"{state} at {t}, expected {want}\n{rec.dump()}"


def _user_messages(rec: Recorder) -> list[tuple[str, float]]:
    return [(ev.item.text_content, rec.t(ev)) for ev in rec.of("conversation_item_added")
            if ev.item.type == "message" and ev.item.role == "user"]


async def test_min_words_interrupts_only_once_the_transcript_has_three_words(autojump_clock):
    session, agent, rec = await _run({"interruption": {"min_words": 3}})

    # the VAD threshold at 5.55 ("Stop!", one word) does nothing; the final at 7.5 brings the
    # transcript to "Stop! ok, stop!" (three words) and interrupts; the turn commits at 8.0
    _check_states(rec, [("listening", 0.0), ("thinking", 3.0), ("speaking", 3.2),
                        ("listening", 7.5), ("thinking", 8.0), ("listening", 8.0)])

    finished = rec.of("playback_finished")
    assert len(finished) == 1, rec.dump()
    assert finished[0].interrupted is True
    assert near(finished[0].playback_position, 4.3), rec.dump()
    assert near(rec.t(finished[0]), 7.5), rec.dump()
    assert session.output.audio.playback_finished_events == finished

    # the turn at 6.5 was rejected (kept open): one user message with both transcripts, at 8.0
    users = _user_messages(rec)
    assert [text for text, _ in users] == ["Tell me a story.", "Stop! ok, stop!"], rec.dump()
    assert near(users[0][1], 3.0) and near(users[1][1], 8.0), rec.dump()

    items = agent.chat_ctx.items
    assert [i.type for i in items] == ["message", "agent_config_update", "message", "message",
                                       "message"], items
    assert items[0].role == "system"
    assert items[2].role == "user" and items[2].text_content == "Tell me a story."
    assert items[3].role == "assistant" and items[3].interrupted is True
    assert items[3].text_content.startswith("Here is a long story")
    assert items[4].role == "user" and items[4].text_content == "Stop! ok, stop!"


async def test_interruptions_disabled_plays_the_story_and_drops_both_user_turns(autojump_clock):
    session, agent, rec = await _run({"interruption": {"enabled": False}})

    _check_states(rec, [("listening", 0.0), ("thinking", 3.0), ("speaking", 3.2),
                        ("listening", 8.2)])

    finished = rec.of("playback_finished")
    assert len(finished) == 1, rec.dump()
    assert finished[0].interrupted is False
    assert near(finished[0].playback_position, 5.0)
    assert near(rec.t(finished[0]), 8.2), rec.dump()
    assert session.output.audio.playback_finished_events == finished

    # both user turns completed while an uninterruptible speech played: dropped, not recorded
    assert [text for text, _ in _user_messages(rec)] == ["Tell me a story."], rec.dump()
    items = agent.chat_ctx.items
    assert [i.type for i in items] == ["message", "agent_config_update", "message", "message"]
    assert items[2].role == "user" and items[2].text_content == "Tell me a story."
    assert items[3].role == "assistant" and items[3].interrupted is False
    assert items[3].text_content == STORY
    history_texts = [i.text_content for i in session.history.items if i.type == "message"]
    assert "Stop!" not in history_texts and "ok, stop!" not in history_texts
