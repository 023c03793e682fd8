"""The rest of the public API called the way a careless caller (or an LLM-written tool) would.

Found by the sweep, each now refused at the call or construction with a ``TypeError`` /
``ValueError`` naming the argument, or (for user callbacks) isolated:

- ``TaskGroup``: a factory that is not callable, raises or builds no ``AgentTask``, or an
  ``on_task_completed`` that is not callable or raises, left the awaiting tool waiting for
  ever (the group stayed the current agent, with its ``*empty*`` instructions); the group
  now fails with the error, as LiveKit's does for its callback.
- ``session.on(name, 5)`` / an async callback were accepted and failed (or never ran) at
  every event; a callback taking no argument, which LiveKit's emitter calls without one,
  was never called here.
- ``commit_user_turn(transcript_timeout=-1)`` (NaN, a str, None) killed the session from
  the commit's task.
- ``Agent(chat_ctx=[...])`` killed the session at start.
- ``BackgroundAudioPlayer.play(AudioConfig(..., fade_in="1"))`` killed the player's mixer
  (and the block around it); a NaN volume silenced every background sound.
- ``function_tool(description=5)``, raw schemas without dict parameters: every LLM request
  carried them.
- truthy strings read as ``True`` (``set_audio_enabled("no")`` turned audio on).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio

from agents_trio import (Agent, AgentSession, AgentTask, AudioConfig, BackgroundAudioPlayer,
                         BuiltinAudioClip, ChatContext, FunctionCall, FunctionToolCall,
                         RunContext, function_tool)
from agents_trio.beta import EndCallTool
from agents_trio.beta.workflows import TaskGroup
from agents_trio.io.room_options import RoomOptions
from agents_trio.prebuilt import GetDtmfTask
from agents_trio.testing import FakeActions, FakeLLM, create_session

sys.path.insert(0, str(Path(__file__).parent))
from test_background_audio import FakeSession, Sink, _beep  # noqa: E402
from timeline import run_recorded  # noqa: E402


def _raise(*_: object) -> Any:
    raise ZeroDivisionError("boom")


# -- TaskGroup --------------------------------------------------------------------------------
class _Done(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="t")

    async def on_enter(self) -> None:
        self.complete("v")


def _make_group(kind: str) -> TaskGroup:
    group = TaskGroup(summarize_chat_ctx=False,
                      on_task_completed=_raise if kind == "raising callback" else None)
    factories: dict[str, Callable[[], Any]] = {
        "raising factory": _raise, "factory building None": lambda: None,
        "factory building an Agent": lambda: Agent(instructions="x")}
    group.add(factories.get(kind, _Done), id="a", description="d")
    return group


class _Parent(Agent):
    def __init__(self, kind: str) -> None:
        super().__init__(instructions="p")
        self.kind = kind

    @function_tool
    async def ask(self, ctx: RunContext) -> str:
        """Ask."""
        try:
            return f"got {await _make_group(self.kind)}"
        except Exception as e:
            return f"failed: {type(e).__name__}"


@pytest.mark.parametrize("kind", ["raising factory", "factory building None",
                                  "factory building an Agent", "raising callback"])
async def test_a_failing_task_group_step_fails_the_group_not_hangs_it(kind, autojump_clock):
    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="ask", arguments="{}", call_id="a1")],
              input="go")
    a.add_llm("fine", input="after")
    parent = _Parent(kind)
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(parent)
        with trio.fail_after(20):
            result = await session.run(user_input="go")
        outputs = [e.item.output for e in result.events if e.type == "function_call_output"]
        expected = "ZeroDivisionError" if "raising" in kind else "TypeError"
        assert outputs == [f"failed: {expected}"]
        assert session.current_agent is parent   # the parent has the floor back
        with trio.fail_after(10):
            after = await session.run(user_input="after")
        assert [e.item.text_content for e in after.events if e.type == "message"] == ["fine"]


async def test_a_raising_callback_with_return_exceptions_records_the_error(autojump_clock):
    # as LiveKit's: the step's result becomes the callback's exception, and the group goes on
    results: list[Any] = []

    class Parent(Agent):
        @function_tool
        async def ask(self) -> str:
            """Ask."""
            group = TaskGroup(summarize_chat_ctx=False, return_exceptions=True,
                              on_task_completed=_raise)
            group.add(_Done, id="a", description="d")
            results.append(await group)
            return "ok"

    a = FakeActions()
    a.add_llm("", tool_calls=[FunctionToolCall(name="ask", arguments="{}", call_id="a1")],
              input="go")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Parent(instructions="p"))
        with trio.fail_after(20):
            await session.run(user_input="go")
    assert isinstance(results[0].task_results["a"], ZeroDivisionError)


BAD_CONSTRUCTIONS: dict[str, tuple[Callable[[], object], type[Exception], str]] = {
    "TaskGroup(on_task_completed=5)": (lambda: TaskGroup(on_task_completed=5),
                                       TypeError, "on_task_completed"),
    "TaskGroup(summarize_chat_ctx='no')": (lambda: TaskGroup(summarize_chat_ctx="no"),
                                           TypeError, "summarize_chat_ctx"),
    "TaskGroup(return_exceptions='no')": (lambda: TaskGroup(return_exceptions="no"),
                                          TypeError, "return_exceptions"),
    "TaskGroup(chat_ctx=[])": (lambda: TaskGroup(chat_ctx=[]), TypeError, "chat_ctx"),
    "TaskGroup.add(5)": (lambda: TaskGroup().add(5, id="a", description="d"),
                         TypeError, "task_factory"),
    "TaskGroup.add(id=5)": (lambda: TaskGroup().add(_Done, id=5, description="d"),
                            TypeError, "id"),
    "TaskGroup.add(description=None)": (
        lambda: TaskGroup().add(_Done, id="a", description=None), TypeError, "description"),
    "Agent(id=5)": (lambda: Agent(instructions="x", id=5), TypeError, "id"),
    "Agent(chat_ctx=[])": (lambda: Agent(instructions="x", chat_ctx=[]), TypeError,
                           "chat_ctx"),
    "AgentTask(chat_ctx=a list)": (lambda: AgentTask(instructions="x", chat_ctx=[1]),
                                   TypeError, "chat_ctx"),
    "AgentTask(preserve_function_call_history='no')": (
        lambda: AgentTask(instructions="x", preserve_function_call_history="no"),
        TypeError, "preserve_function_call_history"),
    "Agent(use_tts_aligned_transcript='no')": (
        lambda: Agent(instructions="x", use_tts_aligned_transcript="no"),
        TypeError, "use_tts_aligned_transcript"),
    "AgentSession(use_tts_aligned_transcript='no')": (
        lambda: AgentSession(use_tts_aligned_transcript="no"),
        TypeError, "use_tts_aligned_transcript"),
    # function tools: what every later LLM request would carry
    "function_tool(5)": (lambda: function_tool(5), TypeError, "callable"),
    "function_tool(name=5)": (lambda: function_tool(lambda: None, name=5), TypeError, "name"),
    "function_tool(description=5)": (lambda: function_tool(lambda: None, description=5),
                                     TypeError, "description"),
    "function_tool(raw_schema=a JSON string)": (
        lambda: function_tool(lambda raw_arguments: None,
                              raw_schema='{"name": "a", "parameters": {}}'),
        TypeError, "raw_schema"),
    "function_tool(raw_schema name=5)": (
        lambda: function_tool(lambda raw_arguments: None,
                              raw_schema={"name": 5, "parameters": {}}), TypeError, "name"),
    "function_tool(raw_schema parameters='x')": (
        lambda: function_tool(lambda raw_arguments: None,
                              raw_schema={"name": "a", "parameters": "x"}),
        TypeError, "parameters"),
    "function_tool(raw_schema parameters=None)": (
        lambda: function_tool(lambda raw_arguments: None,
                              raw_schema={"name": "a", "parameters": None}),
        TypeError, "parameters"),
    "function_tool(raw_schema description=5)": (
        lambda: function_tool(lambda raw_arguments: None,
                              raw_schema={"name": "a", "description": 5, "parameters": {}}),
        TypeError, "description"),
    # prebuilt: what the task or tool would fail on when it runs (the call would not end)
    "GetDtmfTask(dtmf_input_timeout=nan)": (
        lambda: GetDtmfTask(num_digits=4, dtmf_input_timeout=math.nan), ValueError,
        "dtmf_input_timeout"),
    "GetDtmfTask(num_digits='4')": (lambda: GetDtmfTask(num_digits="4"), TypeError,
                                    "num_digits"),
    "EndCallTool(on_tool_called=5)": (lambda: EndCallTool(on_tool_called=5), TypeError,
                                      "on_tool_called"),
    "EndCallTool(on_tool_completed='x')": (lambda: EndCallTool(on_tool_completed="x"),
                                           TypeError, "on_tool_completed"),
    "EndCallTool(end_instructions=5)": (lambda: EndCallTool(end_instructions=5), TypeError,
                                        "end_instructions"),
    # room options: a callback that is not one, an identity that never matches
    "RoomOptions(text_input_cb=5)": (lambda: RoomOptions(text_input_cb=5), TypeError,
                                     "text_input_cb"),
    "RoomOptions(participant_identity=5)": (lambda: RoomOptions(participant_identity=5),
                                            TypeError, "participant_identity"),
}


@pytest.mark.parametrize("name", list(BAD_CONSTRUCTIONS))
def test_a_bad_construction_argument_is_refused(name):
    make, error, word = BAD_CONSTRUCTIONS[name]
    with pytest.raises(error, match=word):
        make()


def test_the_forms_livekit_takes_are_still_accepted():
    async def on_done(ev: object) -> None:
        pass

    TaskGroup(on_task_completed=on_done, chat_ctx=ChatContext()).add(_Done, id="a",
                                                                     description="d")
    Agent(instructions="x", chat_ctx=ChatContext(), use_tts_aligned_transcript=True)
    AgentSession(use_tts_aligned_transcript=None)
    function_tool(lambda raw_arguments: None, raw_schema={
        "name": "a", "description": "d", "parameters": {"type": "object", "properties": {}}})
    function_tool(lambda: None, name="b", description="")
    RoomOptions(participant_identity="user", text_input_cb=lambda sess, ev: None)
    GetDtmfTask(num_digits=4, dtmf_input_timeout=0)
    EndCallTool(end_instructions=None, on_tool_called=on_done, on_tool_completed=on_done)


# -- session events ---------------------------------------------------------------------------
async def _async_callback(ev: object) -> None:
    pass


@pytest.mark.parametrize("register", ["on", "once"])
@pytest.mark.parametrize("callback,error", [
    (5, TypeError), ("print", TypeError), (_async_callback, ValueError),
    (lambda a, b: None, TypeError)], ids=["an int", "a str", "an async function",
                                          "two required arguments"])
def test_a_callback_that_cannot_be_called_with_the_event_is_refused(register, callback, error):
    session = AgentSession()
    with pytest.raises(error, match="callback"):
        getattr(session, register)("conversation_item_added", callback)
    with pytest.raises(error, match="callback"):
        getattr(session, register)("conversation_item_added")(callback)


async def test_a_callback_without_argument_is_called_as_livekit_calls_it(autojump_clock):
    # LiveKit's emitter passes as many arguments as the callback takes
    seen: list[str] = []
    a = FakeActions()
    a.add_llm("fine", input="hi")
    session = AgentSession(llm=FakeLLM(a.llm_responses))

    @session.on("conversation_item_added")
    def added() -> None:
        seen.append("on")

    session.once("conversation_item_added", lambda: seen.append("once"))
    removed = session.on("conversation_item_added", lambda: seen.append("removed"))
    session.off("conversation_item_added", removed)
    session.on("conversation_item_added", lambda ev, extra=None: seen.append("default"))
    async with session:
        await session.start(Agent(instructions="x"))
        with trio.fail_after(10):
            await session.run(user_input="hi")
    assert seen[:3] == ["on", "once", "default"]
    assert seen.count("once") == 1 and "removed" not in seen
    assert seen.count("on") == seen.count("default") >= 2


# -- manual turns -----------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,error", [
    ({"transcript_timeout": -1}, ValueError), ({"transcript_timeout": math.nan}, ValueError),
    ({"transcript_timeout": "2"}, ValueError), ({"transcript_timeout": None}, ValueError),
    ({"stt_flush_duration": math.inf}, ValueError), ({"stt_flush_duration": "x"}, ValueError),
    ({"skip_reply": "no"}, TypeError)], ids=lambda v: repr(v))
async def test_a_bad_commit_argument_fails_the_call_not_the_session(kwargs, error,
                                                                    autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Hello there")
    a.add_llm("Hi!", input="Hello there")
    a.add_tts(1.0, input="Hi!")
    session = create_session(a, turn_handling={"turn_detection": "manual"})
    refused: list[BaseException] = []

    def bad_commit(s: AgentSession) -> None:
        try:
            s.commit_user_turn(**kwargs)
        except Exception as e:
            refused.append(e)

    rec = await run_recorded(session, Agent(instructions="x"), script=[
        (3.0, bad_commit), (4.0, lambda s: s.commit_user_turn())])
    assert len(refused) == 1 and isinstance(refused[0], error)
    assert next(iter(kwargs)) in str(refused[0])
    assert [ev.item.text_content for ev in rec.of("conversation_item_added")
            if ev.item.type == "message"] == ["Hello there", "Hi!"]


# -- calls on a running session ---------------------------------------------------------------
BAD_CALLS: dict[str, tuple[Callable[[AgentSession[Any]], object], type[Exception], str]] = {
    "input.set_audio_enabled('no')": (lambda s: s.input.set_audio_enabled("no"),
                                      TypeError, "enable"),
    "output.set_audio_enabled('no')": (lambda s: s.output.set_audio_enabled("no"),
                                       TypeError, "enabled"),
    "output.set_transcription_enabled('no')": (
        lambda s: s.output.set_transcription_enabled("no"), TypeError, "enabled"),
    "interrupt(force='no')": (lambda s: s.interrupt(force="no"), TypeError, "force"),
    "shutdown(drain='no')": (lambda s: s.shutdown(drain="no"), TypeError, "drain"),
    "shutdown(reason='bogus')": (lambda s: s.shutdown(reason="bogus"), ValueError, "reason"),
    "update_options(keyterms='abc')": (lambda s: s.update_options(keyterms="abc"),
                                       TypeError, "keyterms"),
    "update_options(keyterms=[5])": (lambda s: s.update_options(keyterms=[5]),
                                     TypeError, "keyterms"),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
async def test_a_bad_call_fails_at_the_call_and_changes_nothing(name, autojump_clock):
    call, error, word = BAD_CALLS[name]
    a = FakeActions()
    a.add_llm("fine", input="after")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Agent(instructions="x"))
        with pytest.raises(error, match=word):
            call(session)
        assert session.input.audio_enabled is True
        assert session.output.audio_enabled is True
        assert session.output.transcription_enabled is True
        assert session.keyterms == []
        await trio.sleep(2)
        with trio.fail_after(10):
            result = await session.run(user_input="after")
        assert [e.item.text_content for e in result.events if e.type == "message"] == ["fine"]


async def test_update_chat_ctx_takes_a_chat_context(autojump_clock):
    agent = Agent(instructions="x")
    for bad in ([], None):
        with pytest.raises(TypeError, match="chat_ctx"):
            await agent.update_chat_ctx(bad)
    await agent.update_chat_ctx(ChatContext())


# -- what a tool calls on its RunContext ------------------------------------------------------
def _context() -> RunContext:
    return RunContext(session=None, speech_handle=None,  # type: ignore[arg-type]
                      function_call=FunctionCall(call_id="c1", name="t", arguments="{}"))


@pytest.mark.parametrize("kwargs,error", [
    ({"delay": math.nan}, ValueError), ({"delay": "1"}, ValueError),
    ({"interval": math.nan}, ValueError), ({"max_steps": "3"}, TypeError),
    ({"max_steps": 2.5}, TypeError)], ids=lambda v: repr(v))
async def test_with_filler_refuses_what_would_kill_its_filler(kwargs, error):
    # a NaN delay or interval was accepted and the filler died of it later (logged): the tool
    # ran on without its filler
    with pytest.raises(error, match=next(iter(kwargs))):
        async with _context().with_filler("wait", **kwargs):
            pass


async def test_update_refuses_a_template_that_is_no_template():
    with pytest.raises(TypeError, match="template"):
        await _context().update("half way", template=5)


# -- background audio -------------------------------------------------------------------------
_CLIP = BuiltinAudioClip.OFFICE_AMBIENCE
BAD_PLAYS: dict[str, tuple[Callable[[BackgroundAudioPlayer], object], type[Exception], str]] = {
    "play(5)": (lambda p: p.play(5), TypeError, "audio"),
    "play(None)": (lambda p: p.play(None), TypeError, "audio"),
    "play([5])": (lambda p: p.play([5]), TypeError, "audio"),
    "play(loop='no')": (lambda p: p.play(_CLIP, loop="no"), TypeError, "loop"),
    "volume=nan": (lambda p: p.play(AudioConfig(_CLIP, volume=math.nan)), ValueError,
                   "volume"),
    "volume='1'": (lambda p: p.play(AudioConfig(_CLIP, volume="1")), ValueError, "volume"),
    "fade_in='1'": (lambda p: p.play(AudioConfig(_CLIP, fade_in="1")), ValueError,
                    "fade_in"),
    "fade_in=nan": (lambda p: p.play(AudioConfig(_CLIP, fade_in=math.nan)), ValueError,
                    "fade_in"),
    "fade_out=-1": (lambda p: p.play(AudioConfig(_CLIP, fade_out=-1)), ValueError,
                    "fade_out"),
    "probability=nan": (lambda p: p.play([AudioConfig(_CLIP, probability=math.nan)]),
                        ValueError, "probability"),
    "probability='x'": (lambda p: p.play([AudioConfig(_CLIP, probability="x")]),
                        ValueError, "probability"),
}


@pytest.mark.parametrize("name", list(BAD_PLAYS))
async def test_a_bad_play_is_refused_and_the_player_plays_on(name, autojump_clock):
    call, error, word = BAD_PLAYS[name]
    sink = Sink()
    async with BackgroundAudioPlayer() as player:
        await player.start(output=sink, agent_session=FakeSession())
        with pytest.raises(error, match=word):
            call(player)
        await trio.sleep(1)
        before = len(sink.frames)
        await player.play(_beep(1.0))
        assert len(sink.frames) - before >= 50
        assert max(peak for _, peak in sink.frames[before:]) > 0


@pytest.mark.parametrize("which", ["ambient_sound", "thinking_sound"])
def test_a_bad_ambient_or_thinking_sound_is_refused_at_construction(which):
    with pytest.raises(ValueError, match="volume"):
        BackgroundAudioPlayer(**{which: AudioConfig(_CLIP, volume=math.nan)})
    with pytest.raises(TypeError, match=which):
        BackgroundAudioPlayer(**{which: 5})
