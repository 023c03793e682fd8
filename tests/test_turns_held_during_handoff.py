"""A user turn that ends while the agent holding the floor leaves it is answered by the next
agent, not dropped.

Found by fresh draws of the task properties (`AGENTS_TRIO_FUZZ=1`): a
completed AgentTask drained while one of its tools hung, and the user's words meanwhile were
dropped, not even recorded at the close. LiveKit drops such a turn too ("skipping user
input"); here the session holds it, the next agent to take the floor answers it, and the
close records what is still held. The quiet-input invariant checks such turns; the last test
here is one calibration of what it calls quiet.
"""

from __future__ import annotations

import functools

import trio
import trio.testing

from adversary_agents import Desk, Farewells
from agents_trio.chat import ChatMessage
from agents_trio.testing import Reply, Schedule, ToolCall, UserSpeech, run_conversation

_INSTANT = {"ttft": 0.0, "duration": 0.0, "tts_ttfb": 0.0}


def _play(schedule: Schedule, farewells: Farewells):
    return trio.run(functools.partial(run_conversation, lambda: Desk(farewells=farewells),
                                      schedule),
                    clock=trio.testing.MockClock(autojump_threshold=0))


#: the greeting hands off to sales; the desk's goodbye plays from 1.1 s to 3.35 s and the
#: user speaks over it (the desk drains: it takes no turn)
_SPOKEN_OVER_A_GOODBYE = Schedule(
    actions=(UserSpeech(at=1.0, duration=0.1, transcript="wait a moment", stt_delay=0.0,
                        reply=Reply(text="sure.", audio=0.2, **_INSTANT)),),
    greeting=Reply(text="okay.", calls=(ToolCall(name="transfer"),), audio=0.5, **_INSTANT),
    close_at=12.0, audio_output=True, preemptive=False, close_grace=0.5)


def test_words_said_during_a_handoff_goodbye_are_answered_by_the_next_agent() -> None:
    record = _play(_SPOKEN_OVER_A_GOODBYE, Farewells(mode="say"))
    history = list(record.history)
    user = [i for i in history if isinstance(i, ChatMessage) and i.role == "user"]
    assert [m.text_content for m in user] == ["wait a moment"], history
    handoff = next(k for k, i in enumerate(history)
                   if i.type == "agent_handoff" and i.new_agent_id == "sales")
    assert history.index(user[0]) > handoff  # committed by sales, after the handoff
    answers = [r for r in record.llm_requests
               if r.trigger == "user" and list(r.trigger_ids) == [user[0].id]]
    assert len(answers) == 1, record.llm_requests
    assert any(i.text_content == "You are sales." for i in answers[0].chat_ctx.items
               if isinstance(i, ChatMessage) and i.role == "system"), answers[0].chat_ctx.items


def test_words_held_for_a_next_agent_that_never_comes_are_recorded_at_the_close() -> None:
    """The fuzz find: the details task completes (``finish``, 0.5 s) as the user's first
    input arrives; its reply to that input calls ``deeper``, which hangs, so the completed
    task drains until the close (as LiveKit's drain waits for running tools). What the user
    says meanwhile is in the history, unanswered."""
    from agents_trio.testing import TextInput

    record = _play(Schedule(
        actions=(TextInput(at=0.5, text="hello there", reply=Reply(
                     calls=(ToolCall(name="deeper", outcome="hang"),), audio=0.2,
                     **_INSTANT)),
                 UserSpeech(at=1.6, duration=0.1, transcript="are you there", stt_delay=0.0,
                            reply=Reply(text="yes.", audio=0.2, **_INSTANT))),
        greeting=Reply(calls=(ToolCall(name="ask_details"),
                              ToolCall(name="finish", arguments='{"value": "42"}',
                                       latency=0.5)), audio=0.2, **_INSTANT),
        close_at=4.95, audio_output=False, preemptive=False, close_grace=5.0),
        Farewells())
    said = [i.text_content for i in record.history
            if isinstance(i, ChatMessage) and i.role == "user"]
    assert said == ["hello there", "are you there"], list(record.history)


def test_the_quiet_input_invariant_checks_words_said_during_a_handoff() -> None:
    """The invariant holds the runtime to it: a turn spoken while the floor changed hands
    counts as a quiet input (answered once the handoff is done), and it passes."""
    from agents_trio.testing.answers import every_quiet_input_answered, quiet_inputs

    record = _play(_SPOKEN_OVER_A_GOODBYE, Farewells(mode="say"))
    assert [q.words for q in quiet_inputs(record)] == ["wait a moment"]
    assert list(every_quiet_input_answered(record)) == []


def test_an_input_while_the_user_still_speaks_is_not_quiet() -> None:
    """Fuzz find (the voice properties): text typed at the instant a 1 s speech ends, which
    started 1.0 s earlier. The invariant compared only the other action's start with the
    input's window (and 1.6 - 1.0 is a hair above 0.6), so it called the input quiet; the
    user's turn then rightly interrupted the text's reply. An action counts from its start
    to its end now."""
    from agents_trio.testing import TextInput
    from agents_trio.testing.answers import quiet_inputs

    record = _play(Schedule(
        actions=(UserSpeech(at=0.6, duration=1.0, transcript="hello there", stt_delay=0.0,
                            reply=Reply(text="okay.", audio=0.2, **_INSTANT)),
                 TextInput(at=1.6, text="typed meanwhile", reply=Reply(text="okay.", audio=0.2,
                                                                      **_INSTANT))),
        greeting=Reply(text="okay.", audio=0.2, **_INSTANT),
        close_at=9.0, audio_output=True, preemptive=False, close_grace=0.5), Farewells())
    assert "typed meanwhile" not in [q.words for q in quiet_inputs(record)]
