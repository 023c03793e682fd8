"""Reference 10.2 item 12 and 3.5 step 7: a reply split by ``FlushSentinel`` into segments.

The agent's ``llm_node`` yields "Hello there. ", a FlushSentinel and "How are you?" (it never
calls the LLM); each segment has its own TTS response (ttfb 0.1). The user speaks 0.5-2.5, the
turn commits at 3.0.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from agents_trio import Agent, ChatContext, FlushSentinel, ModelSettings
from agents_trio.testing import FakeActions, create_session
from timeline import near, run_recorded

SEGMENT_1 = "Hello there. "
SEGMENT_2 = "How are you?"


class FlushMultiSegmentAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a helpful assistant.")
        self.llm_node_calls = 0

    async def llm_node(self, chat_ctx: ChatContext, tools: list,
                       model_settings: ModelSettings) -> AsyncIterator[str | FlushSentinel]:
        self.llm_node_calls += 1
        yield SEGMENT_1
        yield FlushSentinel()
        yield SEGMENT_2


async def _run(first_segment_audio: float, script=(), drain_delay: float = 5.0):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Hello, how are you?", stt_delay=0.2)
    a.add_tts(first_segment_audio, input=SEGMENT_1, ttfb=0.1, duration=0.1)
    a.add_tts(1.0, input=SEGMENT_2, ttfb=0.1, duration=0.1)
    session = create_session(a)
    agent = FlushMultiSegmentAgent()
    rec = await run_recorded(session, agent, script=script, drain_delay=drain_delay)
    return session, agent, rec


def _assistant_messages(agent: Agent) -> list:
    return [i for i in agent.chat_ctx.items if i.type == "message" and i.role == "assistant"]


async def test_flush_sentinel_plays_two_segments_as_one_message(autojump_clock):
    session, agent, rec = await _run(1.0)

    # speaking at 3.1 (turn 3.0 + ttfb 0.1); segment 1 ends at 4.1, segment 2 plays 4.1-5.1
    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "speaking", "listening"], \
        rec.dump()
    for (state, t), want in zip(states, [0.0, 3.0, 3.1, 5.1]):
        assert near(t, want), f"{state} at {t}, expected {want}\n{rec.dump()}"

    started = rec.of("playback_started")
    assert [round(rec.t(ev), 1) for ev in started] == [3.1, 4.1], rec.dump()
    finished = rec.of("playback_finished")
    assert len(finished) == 2, rec.dump()
    assert all(not ev.interrupted for ev in finished)
    for ev, want in zip(finished, [4.1, 5.1]):
        assert near(rec.t(ev), want) and near(ev.playback_position, 1.0), rec.dump()
    assert session.output.audio.playback_finished_events == finished

    # both segments were synthesized separately; the transcription output got both texts
    assert session.tts.inputs == [SEGMENT_1, SEGMENT_2]
    assert "".join(session.output.transcription.messages) == SEGMENT_1 + SEGMENT_2
    assert agent.llm_node_calls == 1 and session.llm.calls == []

    # but they join into one assistant message, added when the second segment finished
    msgs = _assistant_messages(agent)
    assert len(msgs) == 1
    assert msgs[0].text_content == "Hello there. How are you?" and msgs[0].interrupted is False
    added = [ev for ev in rec.of("conversation_item_added")
             if ev.item.type == "message" and ev.item.role == "assistant"]
    assert len(added) == 1 and near(rec.t(added[0]), 5.1), rec.dump()


async def test_interrupting_the_first_segment_drops_the_second(autojump_clock):
    session, agent, rec = await _run(15.0, script=[(5.0, lambda s: s.interrupt())],
                                     drain_delay=0.5)

    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "speaking", "listening"], \
        rec.dump()
    for (state, t), want in zip(states, [0.0, 3.0, 3.1, 5.0]):
        assert near(t, want), f"{state} at {t}, expected {want}\n{rec.dump()}"

    # only the first segment played, cut at 1.9 s; the second was never forwarded
    finished = rec.of("playback_finished")
    assert len(finished) == 1, rec.dump()
    assert finished[0].interrupted is True
    assert near(finished[0].playback_position, 1.9) and near(rec.t(finished[0]), 5.0)
    assert len(rec.of("playback_started")) == 1, rec.dump()
    assert SEGMENT_2 not in "".join(session.output.transcription.messages)

    msgs = _assistant_messages(agent)
    assert len(msgs) == 1, agent.chat_ctx.items
    assert msgs[0].interrupted is True
    assert "How are you?" not in (msgs[0].text_content or "")
    assert msgs[0].text_content == "Hello"
    assert agent.chat_ctx.items[-1] is msgs[0]
