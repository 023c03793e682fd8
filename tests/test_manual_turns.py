"""Manual turn detection as LiveKit's: with ``turn_detection="manual"`` nothing answers the
user until ``session.commit_user_turn()``; ``skip_reply`` records the words without a reply;
``clear_user_turn()`` drops them. The commit hands back the turn's transcript."""

from __future__ import annotations

from typing import Any

import pytest

from agents_trio import Agent, AgentSession
from agents_trio.manual_turns import CommitCancelledError, PendingTranscript
from agents_trio.testing import FakeActions, create_session
from timeline import Recorder, drive, run_recorded


def _manual_session(a: FakeActions) -> AgentSession:
    return create_session(a, turn_handling={"turn_detection": "manual"})


def _messages(rec: Any) -> list[tuple[str, str | None]]:
    return [(ev.item.role, ev.item.text_content) for ev in rec.of("conversation_item_added")
            if ev.item.type == "message"]


async def test_nothing_answers_until_the_turn_is_committed(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Hello there")
    a.add_llm("Hi!", input="Hello there")
    a.add_tts(1.0, input="Hi!")
    commits: list[PendingTranscript] = []
    seen_at_commit: list[list[tuple[str, str | None]]] = []
    rec: Any = None

    def commit(session: AgentSession) -> None:
        seen_at_commit.append(_messages(rec))
        commits.append(session.commit_user_turn())

    session = _manual_session(a)
    rec = Recorder(session)
    await drive(session, Agent(instructions="x"), rec, [(5.0, commit)])
    assert seen_at_commit == [[]]   # 2.5 s after the user stopped: still unanswered
    assert _messages(rec) == [("user", "Hello there"), ("assistant", "Hi!")]
    assert await commits[0] == "Hello there"
    user_added = next(ev for ev in rec.of("conversation_item_added")
                      if ev.item.type == "message")
    assert rec.t(user_added) >= 5.0


async def test_skip_reply_records_the_words_without_an_answer(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Just noting this")
    commits: list[PendingTranscript] = []
    session = _manual_session(a)
    rec = await run_recorded(session, Agent(instructions="x"), script=[
        (4.0, lambda s: commits.append(s.commit_user_turn(skip_reply=True)))])
    assert _messages(rec) == [("user", "Just noting this")]
    assert await commits[0] == "Just noting this"
    assert session.llm.calls == []


async def test_a_cleared_turn_is_forgotten(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Never mind")
    commits: list[PendingTranscript] = []
    session = _manual_session(a)
    rec = await run_recorded(session, Agent(instructions="x"), script=[
        (4.0, lambda s: s.clear_user_turn()),
        (5.0, lambda s: commits.append(s.commit_user_turn(skip_reply=True,
                                                          transcript_timeout=0.5)))])
    assert _messages(rec) == []
    assert await commits[0] == ""


async def test_a_newer_commit_replaces_one_still_waiting(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(0.5, 6.0, "A long sentence", stt_delay=0.2)
    commits: list[PendingTranscript] = []
    session = _manual_session(a)

    def commit(s: AgentSession) -> None:
        commits.append(s.commit_user_turn(skip_reply=True, transcript_timeout=10.0))

    rec = await run_recorded(session, Agent(instructions="x"), script=[(1.0, commit),
                                                                          (2.0, commit)])
    with pytest.raises(CommitCancelledError):
        await commits[0]
    assert await commits[1] == "A long sentence"
    assert _messages(rec) == [("user", "A long sentence")]


async def test_commit_and_clear_need_a_running_session() -> None:
    session = AgentSession()
    with pytest.raises(RuntimeError, match="isn't running"):
        session.commit_user_turn()
    with pytest.raises(RuntimeError, match="isn't running"):
        session.clear_user_turn()


async def test_a_commit_waiting_for_its_transcript_ends_with_the_close(autojump_clock) -> None:
    """The commit belongs to the session's work: the close cancels it (the awaiter is told)
    and leaving the session does not wait for its transcript timeout."""
    import trio

    a = FakeActions()
    a.add_user_speech(0.5, 6.0, "A long sentence", stt_delay=0.2)
    session = _manual_session(a)
    with trio.fail_after(60):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            await trio.sleep(1.0)
            commit = session.commit_user_turn(transcript_timeout=30.0)
            await trio.sleep(0.5)
            closing_at = trio.current_time()
            await session.aclose()
        left_after = trio.current_time() - closing_at
    assert left_after < session.close_grace
    with pytest.raises(CommitCancelledError):
        await commit
    with pytest.raises(RuntimeError, match="isn't running"):
        session.commit_user_turn()
    with pytest.raises(RuntimeError, match="isn't running"):
        session.clear_user_turn()
