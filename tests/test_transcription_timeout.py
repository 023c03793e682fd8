"""``AgentSession(transcription_timeout=...)``: speech the VAD heard but the STT never
transcribed is reported as a ``user_transcription_timeout`` event (LiveKit's), the timeout
counted from the end of that speech; a transcript, or new speech, disarms it."""

from __future__ import annotations

from typing import Any

import pytest

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeActions, create_session
from timeline import near, run_recorded


async def _timeouts(a: FakeActions, timeout: float | None) -> tuple[Any, list[Any]]:
    session = create_session(a, extra_kwargs={"transcription_timeout": timeout})
    seen: list[Any] = []
    session.on("user_transcription_timeout", seen.append)
    # (the VAD-only speeches count as done at once: the drain waits long enough)
    rec = await run_recorded(session, Agent(instructions="x"), drain_delay=10.0)
    return rec, seen


async def test_untranscribed_speech_times_out(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(1.0, 2.5, "")          # only the VAD hears it
    rec, seen = await _timeouts(a, 2.0)
    assert len(seen) == 1
    ev = seen[0]
    assert ev.type == "user_transcription_timeout"
    assert near(ev.speech_duration, 1.5, tol=0.1)
    assert near(ev.vad_speech_started_at - rec.t0, 1.0, tol=0.1)
    assert near(rec.t(ev), 4.5, tol=0.1)      # 2.0 s after the speech ended


async def test_a_transcript_disarms_the_timeout(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(1.0, 2.5, "Hello there")
    a.add_llm("Hi!", input="Hello there")
    a.add_tts(1.0, input="Hi!")
    _, seen = await _timeouts(a, 2.0)
    assert seen == []


async def test_speech_resuming_before_the_timeout_restarts_it(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(1.0, 2.0, "")
    a.add_user_speech(3.0, 4.0, "")
    rec, seen = await _timeouts(a, 2.0)
    assert len(seen) == 1
    assert near(rec.t(seen[0]), 6.0, tol=0.1)
    assert near(seen[0].speech_duration, 2.0, tol=0.1)   # both stretches of the turn


async def test_no_timeout_by_default(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(1.0, 2.5, "")
    _, seen = await _timeouts(a, None)
    assert seen == []


def test_a_negative_timeout_is_refused() -> None:
    with pytest.raises(ValueError, match="transcription_timeout"):
        AgentSession(transcription_timeout=-1.0)
