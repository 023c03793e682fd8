"""A goodbye said in ``on_exit`` plays on a close that does not drain, as in LiveKit.

LiveKit's close (``AgentSession._teardown_activity``) first cancels the AgentTasks innermost
first, then interrupts the remaining agent's speeches with ``force`` and drains it: its
``on_exit`` runs while the agent can still speak, and what it says plays before the session
closes. Here the close used to cancel the agent's work before ``on_exit`` ran, so a
``say()`` there raised ``RuntimeError`` ("the session is not running") at every close.

The close keeps its promises meanwhile: the goodbye is bounded by ``close_grace`` (cut
there, its played part kept as interrupted), ``on_exit`` runs once, ``close`` is the last
event, every tool call is answered once, and a close asked for by a tool (``aclose()`` or
``shutdown()``) does not wait for that tool's own speech.
"""

from __future__ import annotations

import logging

import pytest
import trio

from agents_trio import (Agent, AgentTask, CloseReason, FunctionToolCall, RunContext,
                         function_tool)
from agents_trio.session import SessionState
from agents_trio.testing import FakeActions, FakeAudioOutput, create_session

GOODBYE = "Goodbye, thanks for calling."


def _call(name: str, call_id: str) -> list[FunctionToolCall]:
    return [FunctionToolCall(name=name, arguments="{}", call_id=call_id)]


class Hanging(Agent):
    """Says ``goodbye`` in ``on_exit`` (``say()``, or a reply with ``reply=True``)."""

    def __init__(self, journal: list[str], *, greeting: str | None = None,
                 goodbye: str | None = GOODBYE, reply: bool = False) -> None:
        super().__init__(instructions="You answer calls.", id="root")
        self.journal = journal
        self.greeting = greeting
        self.goodbye = goodbye
        self.reply = reply

    async def on_enter(self) -> None:
        self.journal.append("root.on_enter")
        if self.greeting:
            self.session.say(self.greeting)

    async def on_exit(self) -> None:
        self.journal.append("root.on_exit")
        if self.goodbye is None:
            return
        if self.reply:
            handle = self.session.generate_reply(instructions="say goodbye")
        else:
            handle = self.session.say(self.goodbye)
        await handle
        self.journal.append("root.goodbye_done")

    @function_tool
    async def hang_up(self, ctx: RunContext) -> str:
        """End the call."""
        self.journal.append("hang_up")
        await ctx.wait_for_playout()  # else the close's interruption cuts "hanging up"
        await ctx.session.aclose()
        self.journal.append("hang_up.after_aclose")  # never: the close cancels the caller
        return "closed"

    @function_tool
    async def hang_up_now(self, ctx: RunContext) -> str:
        """End the call at once."""
        self.journal.append("hang_up_now")
        await trio.sleep(1.0)   # while the reply of this tool's speech plays
        await ctx.session.aclose()
        return "closed"

    @function_tool
    async def schedule_hang_up(self, ctx: RunContext) -> str:
        """End the call once this tool returns."""
        self.journal.append("schedule_hang_up")
        ctx.session.shutdown(drain=False)
        await trio.sleep(30)  # the close cancels it: the goodbye does not wait for it
        return "closed"


class Record:
    """What a session did, from its events and its fake outputs."""

    def __init__(self, session: object) -> None:
        self.session = session
        self.events: list[str] = []
        self.errors: list[object] = []
        for name in ("close", "conversation_item_added", "agent_state_changed",
                     "function_tools_executed", "speech_created"):
            session.on(name, lambda ev, name=name: self.events.append(name))
        session.on("error", self.errors.append)

    @property
    def said(self) -> list[tuple[str, bool]]:
        return [(item.text_content, item.interrupted) for item in self.session.history.items
                if item.type == "message" and item.role == "assistant"]

    @property
    def played(self) -> list[tuple[float, bool]]:
        audio = self.session.output.audio
        assert isinstance(audio, FakeAudioOutput)
        return [(round(ev.playback_position, 2), ev.interrupted)
                for ev in audio.playback_finished_events]


def _goodbye_actions(duration: float = 1.0) -> FakeActions:
    a = FakeActions()
    a.add_tts(duration, input=GOODBYE)
    return a


async def _wait_closed(session: object) -> None:
    while session.state is not SessionState.CLOSED:
        await trio.sleep(0.05)


def _no_error_logged(caplog: pytest.LogCaptureFixture) -> None:
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert not errors, [r.getMessage() for r in errors]


def _assert_goodbye_played(record: Record, journal: list[str], *, duration: float = 1.0) -> None:
    assert journal.count("root.on_exit") == 1, journal
    assert "root.goodbye_done" in journal, journal
    assert (GOODBYE, False) in record.said
    assert (duration, False) in record.played
    assert record.errors == []
    assert record.events[-1] == "close"
    assert record.events.count("close") == 1


@pytest.mark.parametrize("how", ["aclose", "leave_block", "shutdown", "shutdown_for_error"])
async def test_a_goodbye_said_in_on_exit_plays_on_a_close_without_drain(
        autojump_clock, caplog, how):
    caplog.set_level(logging.WARNING)
    journal: list[str] = []
    session = create_session(_goodbye_actions())
    record = Record(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Hanging(journal))
            await trio.sleep(1.0)
            started = trio.current_time()
            if how == "aclose":
                await session.aclose()
            elif how == "shutdown":
                session.shutdown(drain=False)
                await _wait_closed(session)
            elif how == "shutdown_for_error":   # LiveKit's close for an error says it too
                session.shutdown(drain=False, reason=CloseReason.ERROR)
                await _wait_closed(session)
        took = trio.current_time() - started
    _assert_goodbye_played(record, journal)
    assert took < session.close_grace
    _no_error_logged(caplog)


class SlowEnter(Hanging):
    async def on_enter(self) -> None:
        self.journal.append("root.on_enter")
        try:
            await trio.sleep(30)
        finally:
            self.journal.append("root.on_enter.cancelled")


async def test_a_close_during_on_enter_cancels_it_then_the_goodbye_plays(autojump_clock):
    journal: list[str] = []
    session = create_session(_goodbye_actions())
    record = Record(session)
    with trio.fail_after(30):
        async with session:
            await session.start(SlowEnter(journal))
            await trio.sleep(1.0)
            started = trio.current_time()
    took = trio.current_time() - started
    assert journal == ["root.on_enter", "root.on_enter.cancelled", "root.on_exit",
                       "root.goodbye_done"]
    assert record.said == [(GOODBYE, False)] and record.played == [(1.0, False)]
    assert took < 2.0   # on_enter is not waited for
    assert record.events[-1] == "close"


async def test_a_goodbye_reply_generated_in_on_exit_plays_on_aclose(autojump_clock, caplog):
    caplog.set_level(logging.WARNING)
    a = FakeActions()
    a.add_llm("Bye now!", input="say goodbye")
    a.add_tts(1.5, input="Bye now!")
    journal: list[str] = []
    session = create_session(a)
    record = Record(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Hanging(journal, reply=True))
            await trio.sleep(1.0)
            await session.aclose()
    assert ("Bye now!", False) in record.said
    assert (1.5, False) in record.played
    assert journal.count("root.on_exit") == 1 and "root.goodbye_done" in journal
    assert record.errors == [] and record.events[-1] == "close"
    _no_error_logged(caplog)


async def test_the_close_interrupts_the_current_speech_before_the_goodbye(autojump_clock):
    a = _goodbye_actions()
    a.add_tts(10.0, input="Welcome to a very long greeting.")
    journal: list[str] = []
    session = create_session(a, turn_handling={"interruption": {"enabled": False}})
    record = Record(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Hanging(journal, greeting="Welcome to a very long greeting."))
            await trio.sleep(3.0)   # the greeting plays (uninterruptible: force cuts it)
            await session.aclose()
    # the played part of the greeting is kept as interrupted, then the goodbye plays in full
    (greeting, cut), goodbye = record.said
    assert cut and greeting and "Welcome to a very long greeting.".startswith(greeting)
    assert goodbye == (GOODBYE, False)
    assert len(record.played) == 2
    assert record.played[0][1] is True and 0.0 < record.played[0][0] < 10.0
    assert record.played[1] == (1.0, False)
    assert journal == ["root.on_enter", "root.on_exit", "root.goodbye_done"]
    assert record.events[-1] == "close"


async def test_a_goodbye_longer_than_the_grace_is_cut_there(autojump_clock):
    journal: list[str] = []
    session = create_session(_goodbye_actions(duration=30.0),
                             extra_kwargs={"close_grace": 2.0})
    record = Record(session)
    with trio.fail_after(60):
        async with session:
            await session.start(Hanging(journal))
            await trio.sleep(1.0)
            started = trio.current_time()
            await session.aclose()
            took = trio.current_time() - started
    assert took <= 2.0 + 0.5
    # the goodbye was cut by the close: what played is kept as interrupted
    [(said, cut)] = record.said
    assert cut and said and GOODBYE.startswith(said) and said != GOODBYE
    assert len(record.played) == 1 and record.played[0][1] is True
    assert 0.0 < record.played[0][0] < 2.0
    assert journal == ["root.on_enter", "root.on_exit"]  # on_exit was cancelled, once
    assert record.events[-1] == "close"


async def test_aclose_from_a_tool_plays_the_goodbye_and_answers_the_tool(autojump_clock, caplog):
    caplog.set_level(logging.WARNING)
    a = _goodbye_actions()
    a.add_llm("Okay, hanging up.", tool_calls=_call("hang_up", "c_hang"), input="bye")
    a.add_tts(1.0, input="Okay, hanging up.")
    journal: list[str] = []
    session = create_session(a)
    record = Record(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Hanging(journal))
            started = trio.current_time()
            session.generate_reply(user_input="bye")
            await _wait_closed(session)
            took = trio.current_time() - started
    _assert_goodbye_played(record, journal)
    assert "hang_up.after_aclose" not in journal
    # no wait for the tool's own speech (it waits for the tool): the reply's 1 s, the
    # goodbye's 1 s and the models' latencies
    assert took < 3.0
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [o.call_id for o in outputs] == ["c_hang"]
    assert record.said == [("Okay, hanging up.", False), (GOODBYE, False)]
    _no_error_logged(caplog)


async def test_aclose_from_a_tool_while_its_speech_plays_cuts_it_then_says_goodbye(
        autojump_clock):
    """The close interrupts the speech of the very tool that asked for it (as LiveKit's
    ``interrupt(force=True)``) and does not wait for that speech's tool."""
    a = _goodbye_actions()
    a.add_llm("Okay, let me hang up this call for you now.",
              tool_calls=_call("hang_up_now", "c_now"), input="bye", duration=0.1)
    a.add_tts(5.0, input="Okay, let me hang up this call for you now.")
    journal: list[str] = []
    session = create_session(a)
    record = Record(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Hanging(journal))
            started = trio.current_time()
            session.generate_reply(user_input="bye")
            await _wait_closed(session)
            took = trio.current_time() - started
    (reply, cut), goodbye = record.said
    assert cut and "Okay, let me hang up this call for you now.".startswith(reply)
    assert goodbye == (GOODBYE, False)
    assert record.played[-1] == (1.0, False)
    assert took < 3.0
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [o.call_id for o in outputs] == ["c_now"]
    assert record.events[-1] == "close"


async def test_shutdown_without_drain_from_a_tool_plays_the_goodbye(autojump_clock):
    a = _goodbye_actions()
    a.add_llm("", tool_calls=_call("schedule_hang_up", "c_sched"), input="bye")
    journal: list[str] = []
    session = create_session(a)
    record = Record(session)
    with trio.fail_after(30):
        async with session:
            await session.start(Hanging(journal))
            started = trio.current_time()
            session.generate_reply(user_input="bye")
            await _wait_closed(session)
            took = trio.current_time() - started
    _assert_goodbye_played(record, journal)
    assert took < 3.0   # the tool sleeping 30 s is cancelled, not waited for
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [(o.call_id, o.is_error) for o in outputs] == [("c_sched", True)]


class Survey(AgentTask[str]):
    def __init__(self, journal: list[str]) -> None:
        super().__init__(instructions="survey", id="survey")
        self.journal = journal

    async def on_enter(self) -> None:
        self.journal.append("survey.on_enter")
        self.session.say("One question first.")

    async def on_exit(self) -> None:
        self.journal.append("survey.on_exit")
        await self.session.say("The survey is over.")
        self.journal.append("survey.goodbye_done")

    @function_tool
    async def hang_up_in_task(self, ctx: RunContext) -> str:
        """End the call from the survey."""
        self.journal.append("hang_up_in_task")
        await ctx.session.aclose()
        return "closed"


class WithSurvey(Hanging):
    @function_tool
    async def survey(self, ctx: RunContext) -> str:
        """Run the survey."""
        try:
            return await Survey(self.journal)
        except Exception as e:
            self.journal.append(f"survey.error: {e}")
            raise


def _survey_actions() -> FakeActions:
    a = _goodbye_actions()
    a.add_llm("", tool_calls=_call("survey", "c_survey"), input="survey please")
    a.add_tts(1.0, input="One question first.")
    a.add_tts(1.0, input="The survey is over.")
    return a


async def test_a_close_during_an_agent_task_plays_the_task_goodbye_then_the_root_one(
        autojump_clock):
    journal: list[str] = []
    session = create_session(_survey_actions())
    record = Record(session)
    with trio.fail_after(30):
        async with session:
            await session.start(WithSurvey(journal))
            session.generate_reply(user_input="survey please")
            with trio.fail_after(10):
                while "survey.on_enter" not in journal:
                    await trio.sleep(0.1)
            await trio.sleep(2.0)   # the task's question played
            started = trio.current_time()
            await session.aclose()
            took = trio.current_time() - started
    exits = [e for e in journal if e.endswith(".on_exit")]
    assert exits == ["survey.on_exit", "root.on_exit"]
    assert journal.index("survey.goodbye_done") < journal.index("root.on_exit")
    assert record.said == [("One question first.", False), ("The survey is over.", False),
                           (GOODBYE, False)]
    assert record.played[-2:] == [(1.0, False), (1.0, False)]
    assert "survey.error: AgentTask survey is cancelled" in journal
    outputs = [i for i in session.history.items if i.type == "function_call_output"]
    assert [o.call_id for o in outputs] == ["c_survey"]
    assert took < 2 * session.close_grace
    assert record.events[-1] == "close"


async def test_aclose_from_a_tool_of_an_agent_task_still_plays_the_root_goodbye(
        autojump_clock):
    a = _survey_actions()
    a.add_llm("", tool_calls=_call("hang_up_in_task", "c_hang"), input="hang up")
    journal: list[str] = []
    session = create_session(a)
    record = Record(session)
    with trio.fail_after(30):
        async with session:
            await session.start(WithSurvey(journal))
            session.generate_reply(user_input="survey please")
            with trio.fail_after(10):
                while "survey.on_enter" not in journal:
                    await trio.sleep(0.1)
            await trio.sleep(2.0)
            session.generate_reply(user_input="hang up")
            await _wait_closed(session)
    exits = [e for e in journal if e.endswith(".on_exit")]
    assert exits == ["survey.on_exit", "root.on_exit"]
    assert "root.goodbye_done" in journal
    assert (GOODBYE, False) in record.said
    assert record.played[-1] == (1.0, False)
    calls = [i.call_id for i in session.history.items if i.type == "function_call"]
    outputs = [i.call_id for i in session.history.items if i.type == "function_call_output"]
    assert sorted(calls) == sorted(outputs)
    assert record.events[-1] == "close"


class SlowTurnHook(Agent):
    """``on_user_turn_completed`` takes 1 s; ``on_exit`` takes 1 s before its goodbye."""

    def __init__(self, journal: list[str]) -> None:
        super().__init__(instructions="You answer calls.", id="root")
        self.journal = journal

    async def on_user_turn_completed(self, turn_ctx: object, new_message: object) -> None:
        await trio.sleep(1.0)
        self.journal.append("turn hook done")

    async def on_exit(self) -> None:
        self.journal.append("root.on_exit")
        await trio.sleep(1.0)
        handle = self.session.say(GOODBYE)
        await handle
        self.journal.append(f"goodbye interrupted={handle.interrupted}")


async def test_a_user_turn_whose_hook_ends_during_the_close_is_not_answered(autojump_clock):
    """Fuzz find (TaskGroup goodbyes): a user turn still in ``on_user_turn_completed`` when
    the close began went on to generate its reply while ``on_exit`` ran (the agent still
    ran then), and the close, waiting for that reply to stop, spent the goodbye's grace on
    it: ``on_exit`` was cut and its goodbye refused. A turn whose agent stopped taking
    turns meanwhile is not answered there; the close records it."""
    a = FakeActions()
    a.add_user_speech(0.5, 1.0, "I have a question", stt_delay=0.1)
    a.add_llm("Here is a long answer.", input="I have a question", ttft=0.5, duration=0.5)
    a.add_tts(2.0, ttfb=0.3, duration=0.3)
    journal: list[str] = []
    session = create_session(a, extra_kwargs={"close_grace": 3.0})
    with trio.fail_after(30):
        async with session:
            await session.start(SlowTurnHook(journal))
            session.input.audio.push(0.1)
            await trio.sleep(2.0)   # the turn ended at ~1.5; its hook runs until ~2.5
            await session.aclose()
    assert journal == ["root.on_exit", "turn hook done", "goodbye interrupted=False"], journal
    said = [i.text_content for i in session.history.items
            if i.type == "message" and i.role == "assistant"]
    assert said == [GOODBYE], said
    users = [i.text_content for i in session.history.items
             if i.type == "message" and i.role == "user"]
    assert users == ["I have a question"], users
