"""Realtime model sessions owned by the activity (reference §9, 7.6)."""

from __future__ import annotations

import trio

from agents_trio import (Agent, AgentSession, AgentTask, FunctionCallOutput, FunctionToolCall,
                         RunContext, function_tool)
from agents_trio.testing import FakeAudioInput, FakeAudioOutput, FakeRealtimeModel


def _session(model: FakeRealtimeModel, *, audio: bool = True, **kwargs) -> AgentSession:
    session = AgentSession(llm=model, **kwargs)
    if audio:
        session.input.audio = FakeAudioInput()
        session.output.audio = FakeAudioOutput()
    return session


def _outputs_pushed(session_calls) -> list[str]:
    return [i.call_id for name, ctx in session_calls if name == "update_chat_ctx"
            for i in ctx.items if isinstance(i, FunctionCallOutput)]


class Helper(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You help.")

    @function_tool
    async def get_weather(self, ctx: RunContext, city: str) -> str:
        """Get the weather.

        Args:
            city: The city
        """
        await trio.sleep(0.2)
        return f"sunny in {city}"


async def test_text_run_pushes_the_user_message_and_plays_the_response(autojump_clock):
    model = FakeRealtimeModel().add_response("hello", "Hi there!", audio_duration=1.0)
    session = _session(model, audio=False)
    async with session:
        await session.start(Helper())
        with trio.fail_after(10):
            result = await session.run(user_input="hello")
        assert result.expect.next_event().is_message(role="assistant").event().item.text_content \
            == "Hi there!"
        rt = model.sessions[0]
        assert rt.call_names()[:3] == ["update_instructions", "update_tools", "update_chat_ctx"]
        assert "generate_reply" in rt.call_names()
        assert rt.chat_ctx.items[-1].text_content == "hello"
    assert model.live_sessions == [] and model.violations == []
    roles = [i.role for i in session.history.items if i.type == "message"]
    assert roles == ["user", "assistant"]


async def test_server_turn_detection_flow_orders_user_before_assistant(autojump_clock):
    model = FakeRealtimeModel()
    session = _session(model)
    states: list[str] = []
    session.on("user_state_changed", lambda ev: states.append(ev.new_state))
    async with session:
        await session.start(Helper())
        session.input.audio.push(0.1)
        await trio.sleep(0.5)
        rt = model.sessions[0]
        assert rt.audio_pushed > 0  # the user's audio reaches the model
        rt.emit_speech_started()
        await trio.sleep(1.0)
        rt.emit_speech_stopped()
        rt.emit_transcription("what's up")
        rt.emit_generation("Not much, you?", audio_duration=2.0)
        await trio.sleep(3.0)
    assert states == ["speaking", "listening"]
    messages = [(i.role, i.text_content) for i in session.history.items if i.type == "message"]
    assert messages == [("user", "what's up"), ("assistant", "Not much, you?")]
    (finished,) = session.output.audio.playback_finished_events
    assert not finished.interrupted


async def test_barge_in_interrupts_and_truncates_at_the_played_position(autojump_clock):
    model = FakeRealtimeModel()
    session = _session(model)
    async with session:
        await session.start(Helper())
        rt = model.sessions[0]
        rt.emit_generation("Once upon a time there was a very long story.", audio_duration=5.0)
        await trio.sleep(1.5)
        rt.emit_speech_started()
        await trio.sleep(0.5)
        calls = rt.call_names()
        assert "interrupt" in calls
        (_, (message_id, audio_end_ms, transcript)) = [c for c in rt.calls
                                                       if c[0] == "truncate"][0]
        assert 1400 <= audio_end_ms <= 1600
        assert transcript and "Once upon a time there was a very long story.".startswith(
            transcript)
    (finished,) = session.output.audio.playback_finished_events
    assert finished.interrupted
    (assistant,) = [i for i in session.history.items if getattr(i, "role", "") == "assistant"]
    assert assistant.interrupted and assistant.text_content == transcript


async def test_the_framework_runs_tools_pushes_outputs_and_replies(autojump_clock):
    model = FakeRealtimeModel()
    model.add_response("weather in Oslo?", "Let me check.", audio_duration=0.5,
                       function_calls=[FunctionToolCall(name="get_weather",
                                                        arguments='{"city": "Oslo"}',
                                                        call_id="w1")])
    model.add_response("sunny in Oslo", "It's sunny in Oslo.", audio_duration=1.0)
    session = _session(model)
    async with session:
        await session.start(Helper())
        with trio.fail_after(10):
            result = await session.run(user_input="weather in Oslo?")
        result.expect.next_event().is_message(role="assistant")
        result.expect.next_event().is_function_call(name="get_weather")
        result.expect.next_event().is_function_call_output(output="sunny in Oslo")
        assert result.expect.next_event().is_message().event().item.text_content == \
            "It's sunny in Oslo."
        rt = model.sessions[0]
        assert _outputs_pushed(rt.calls).count("w1") >= 1
    assert model.violations == []


class Sales(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You sell.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet as sales")


class Front(Helper):
    @function_tool
    async def transfer(self, ctx: RunContext):
        """Transfer to sales."""
        return Sales()


async def test_handoff_closes_the_old_session_before_the_new_one_and_never_reuses_it(
        autojump_clock):
    """Regression: the asyncio runtime closed the connection on handoff while the old activity
    kept using it for chat-context updates and replies."""
    model = FakeRealtimeModel()
    model.add_response("sales please", "", function_calls=[FunctionToolCall(
        name="transfer", arguments="{}", call_id="t1")])
    model.add_response("greet as sales", "Hi, sales here.", audio_duration=1.0)
    session = _session(model)
    async with session:
        await session.start(Front())
        with trio.fail_after(10):
            result = await session.run(user_input="sales please")
        result.expect.contains_agent_handoff(new_agent_type=Sales)
        result.expect.contains_message(role="assistant")
        old, new = model.sessions
        assert old.closed and not new.closed
        assert new.instructions == "You sell."
    assert model.max_live_sessions == 1
    assert model.violations == []
    assert model.live_sessions == []


class Ask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask for a number.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask for a number")

    @function_tool
    async def got(self, ctx: RunContext, number: str) -> None:
        """Record the number.

        Args:
            number: The number
        """
        self.complete(number)


class Parent(Helper):
    @function_tool
    async def ask_number(self, ctx: RunContext) -> str:
        """Ask the user for a number."""
        return f"the number is {await Ask()}"


async def test_transfer_back_resumes_the_paused_parent_with_a_live_session(autojump_clock):
    """Regression: transferring back to a paused agent started a new activity instead of
    resuming it; tool responses went to the wrong session during a handoff."""
    model = FakeRealtimeModel()
    model.add_response("number please", "", function_calls=[FunctionToolCall(
        name="ask_number", arguments="{}", call_id="p1")])
    model.add_response("ask for a number", "Which number?", audio_duration=0.5)
    model.add_response("seven", "", function_calls=[FunctionToolCall(
        name="got", arguments='{"number": "7"}', call_id="g1")])
    model.add_response("the number is 7", "Thanks, seven it is.", audio_duration=0.5)
    session = _session(model)
    async with session:
        await session.start(Parent())
        parent_activity = session._activity
        with trio.fail_after(10):
            await session.run(user_input="number please")
        parent_rt, task_rt = model.sessions
        assert parent_rt.closed and not task_rt.closed  # the parent is paused, not running
        with trio.fail_after(10):
            result = await session.run(user_input="seven")
        result.expect.contains_agent_handoff(new_agent_type=Parent)
        assert result.expect[-1].is_message().event().item.text_content == \
            "Thanks, seven it is."
        assert session._activity is parent_activity  # resumed, not restarted
        resumed_rt = model.sessions[2]
        assert task_rt.closed and not resumed_rt.closed
        # each tool's output reached the session of the activity that ran it
        assert "g1" in _outputs_pushed(task_rt.calls)
        assert "p1" not in _outputs_pushed(task_rt.calls)
        assert "p1" in _outputs_pushed(resumed_rt.calls)
        assert "g1" not in _outputs_pushed(resumed_rt.calls)
    assert model.max_live_sessions == 1
    assert model.violations == []
    assert model.live_sessions == []


async def test_after_update_agent_nothing_more_reaches_the_old_session(autojump_clock):
    """Regression: the asyncio runtime kept sending chat-context updates and replies to the
    session it had just closed for a handoff."""
    model = FakeRealtimeModel()
    model.add_response("tell me more", "Sure, here is more.", audio_duration=3.0, ttft=0.5)
    model.add_response("greet as sales", "Hi, sales here.", audio_duration=1.0)
    session = _session(model)
    async with session:
        await session.start(Front())
        session.input.audio.push(0.1)
        old_activity = session._activity
        session.generate_reply(user_input="tell me more")
        await trio.sleep(0.2)  # the reply is waiting for the server's response
        old = model.sessions[0]
        sent, heard = len(old.calls), old.audio_pushed
        session.update_agent(Sales())
        assert old_activity.realtime.session is None  # at once, not eventually
        session.input.audio.push(0.5)
        with trio.fail_after(10):
            while len(model.sessions) < 2:
                await trio.sleep(0.1)
        await trio.sleep(2.0)
        assert old.calls[sent:] == [] and old.audio_pushed == heard
        assert old.closed
    assert model.violations == []


async def test_the_realtime_handoff_example_runs_with_one_live_session_at_a_time(
        autojump_clock, capsys):
    import importlib.util
    import pathlib
    import sys

    path = pathlib.Path(__file__).parents[1] / "examples" / "realtime_handoff.py"
    spec = importlib.util.spec_from_file_location("realtime_handoff", path)
    example = importlib.util.module_from_spec(spec)
    sys.modules["realtime_handoff"] = example
    spec.loader.exec_module(example)
    with trio.fail_after(30):
        await example.main()
    out = capsys.readouterr().out
    assert "handoff concierge -> booking_task" in out
    assert "handoff booking_task -> concierge" in out
    assert "assistant: Your table is booked for 8 pm." in out
    assert "handoff concierge -> sommelier" in out
    assert "after close: 0 live sessions, 4 opened in all, violations: none" in out
    for line in out.splitlines():
        if "live sessions:" in line:
            assert line.split("live sessions:")[1].count("rt_") <= 1


async def test_client_turn_detection_replies_to_local_transcripts(autojump_clock):
    from agents_trio import RealtimeCapabilities
    from agents_trio.testing import FakeActions, FakeSTT, FakeVAD

    actions = FakeActions().add_user_speech(0.5, 1.5, "hi there")
    model = FakeRealtimeModel(capabilities=RealtimeCapabilities(
        turn_detection=False, audio_output=True, message_truncation=True,
        mutable_chat_context=True))
    model.add_response("hi there", "Hello!", audio_duration=1.0)
    session = _session(model, vad=FakeVAD(actions.user_speeches),
                       stt=FakeSTT(actions.user_speeches))
    async with session:
        await session.start(Helper())
        session.input.audio.push(0.1)
        await trio.sleep(5)
    messages = [(i.role, i.text_content) for i in session.history.items if i.type == "message"]
    assert messages == [("user", "hi there"), ("assistant", "Hello!")]
    assert "generate_reply" in model.sessions[0].call_names()


async def test_say_uses_the_model_when_it_supports_it_and_reconnects_resync(autojump_clock):
    from agents_trio import RealtimeCapabilities

    model = FakeRealtimeModel(capabilities=RealtimeCapabilities(
        turn_detection=True, audio_output=True, supports_say=True, mutable_chat_context=True))
    session = _session(model)
    async with session:
        await session.start(Helper())
        with trio.fail_after(10):
            await session.say("Welcome back")
        rt = model.sessions[0]
        assert ("say", "Welcome back") in rt.calls
        syncs = rt.call_names().count("update_instructions")
        rt.emit_reconnected()
        await trio.sleep(0.1)
        assert rt.call_names().count("update_instructions") == syncs + 1
    (assistant,) = [i for i in session.history.items if getattr(i, "role", "") == "assistant"]
    assert assistant.text_content == "Welcome back"
