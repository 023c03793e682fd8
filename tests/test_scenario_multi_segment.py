"""Reference 10.2 item 12 and 3.5 step 7: a reply split by ``FlushSentinel`` into segments.

The agent's ``llm_node`` yields "Hello there. ", a FlushSentinel and "How are you?" (it never
calls the LLM); each segment has its own TTS response (ttfb 0.1). The user speaks 0.5-2.5, the
turn commits at 3.0.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio

from agents_trio import Agent, AgentSession, ChatContext, FlushSentinel, ModelSettings
from agents_trio.testing import FakeActions, create_session
from timeline import Recorder

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


def _near(value: float, expected: float, tol: float = 0.1) -> bool:
    return abs(value - expected) <= tol


async def _drive(session: AgentSession, agent: Agent, rec: Recorder,
                 script: list[tuple[float, Callable[[AgentSession], object]]], *,
                 drain_delay: float = 5.0) -> None:
    """Like ``run_session``, plus callbacks run at given script times (also during drain)."""

    async def call_at(at: float, fn: Callable[[AgentSession], object]) -> None:
        await trio.sleep_until(rec.t0 + at)
        fn(session)

    async with session:
        await session.start(agent)
        rec.t0 = trio.current_time()
        session.input.audio.push(0.1)
        async with trio.open_nursery() as nursery:
            for at, fn in script:
                nursery.start_soon(call_at, at, fn)
            await session.stt.speeches_done.wait()
            await trio.sleep(drain_delay)
            try:
                await session.drain()
            except RuntimeError:
                pass
        await session.aclose()


async def _run(first_segment_audio: float, script=(), drain_delay: float = 5.0):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Hello, how are you?", stt_delay=0.2)
    a.add_tts(first_segment_audio, input=SEGMENT_1, ttfb=0.1, duration=0.1)
    a.add_tts(1.0, input=SEGMENT_2, ttfb=0.1, duration=0.1)
    session = create_session(a)
    rec = Recorder(session)
    agent = FlushMultiSegmentAgent()
    try:
        with trio.fail_after(120):
            await _drive(session, agent, rec, list(script), drain_delay=drain_delay)
    except trio.TooSlowError:
        pytest.fail("the session did not finish within 120 s of script time:\n" + rec.dump())
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
        assert _near(t, want), f"{state} at {t}, expected {want}\n{rec.dump()}"

    started = rec.of("playback_started")
    assert [round(rec.t(ev), 1) for ev in started] == [3.1, 4.1], rec.dump()
    finished = rec.of("playback_finished")
    assert len(finished) == 2, rec.dump()
    assert all(not ev.interrupted for ev in finished)
    for ev, want in zip(finished, [4.1, 5.1]):
        assert _near(rec.t(ev), want) and _near(ev.playback_position, 1.0), rec.dump()
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
    assert len(added) == 1 and _near(rec.t(added[0]), 5.1), rec.dump()


async def test_interrupting_the_first_segment_drops_the_second(autojump_clock):
    session, agent, rec = await _run(15.0, script=[(5.0, lambda s: s.interrupt())],
                                     drain_delay=0.5)

    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "speaking", "listening"], \
        rec.dump()
    for (state, t), want in zip(states, [0.0, 3.0, 3.1, 5.0]):
        assert _near(t, want), f"{state} at {t}, expected {want}\n{rec.dump()}"

    # only the first segment played, cut at 1.9 s; the second was never forwarded
    finished = rec.of("playback_finished")
    assert len(finished) == 1, rec.dump()
    assert finished[0].interrupted is True
    assert _near(finished[0].playback_position, 1.9) and _near(rec.t(finished[0]), 5.0)
    assert len(rec.of("playback_started")) == 1, rec.dump()
    assert SEGMENT_2 not in "".join(session.output.transcription.messages)

    msgs = _assistant_messages(agent)
    assert len(msgs) == 1, agent.chat_ctx.items
    assert msgs[0].interrupted is True
    assert "How are you?" not in (msgs[0].text_content or "")
    assert msgs[0].text_content == "Hello"
    assert agent.chat_ctx.items[-1] is msgs[0]
