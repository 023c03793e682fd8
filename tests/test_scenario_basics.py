"""Reference 10.2 items 1, 2, 3, 6 and 7: the basic timelines, exact in virtual time."""

from __future__ import annotations

import pytest

from agents_trio import Agent, FunctionToolCall, RunContext, function_tool
from agents_trio.testing import FakeActions, create_session
from timeline import near, run_recorded

STORY = "Here is a long story for you, about a brave knight."


class WeatherAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a helpful assistant.")

    @function_tool
    async def get_weather(self, ctx: RunContext, location: str) -> str:
        """Get the weather.

        Args:
            location: The city
        """
        return f"The weather in {location} is sunny today."


async def _run(actions: FakeActions, agent: Agent | None = None, **kwargs):
    session = create_session(actions, **kwargs)
    agent = agent or WeatherAgent()
    rec = await run_recorded(session, agent)
    return session, agent, rec


async def test_events_and_metrics_follow_the_reference_timeline(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Hello, how are you?", stt_delay=0.2)
    a.add_llm("I'm doing well, thank you!", ttft=0.1, duration=0.3)
    a.add_tts(2.0, ttfb=0.2, duration=0.3)
    session, agent, rec = await _run(a)

    items = rec.of("conversation_item_added")
    assert [i.item.type for i in items] == ["agent_handoff", "message", "message"]
    assert items[1].item.role == "user" and items[1].item.text_content == "Hello, how are you?"
    assert near(rec.t(items[1]), 3.0)
    assert items[2].item.role == "assistant" and near(rec.t(items[2]), 5.2)

    finals = [ev for ev in rec.of("user_input_transcribed") if ev.is_final]
    assert finals[-1].transcript == "Hello, how are you?" and near(rec.t(finals[-1]), 2.7)

    user_states = [(ev.new_state, rec.t(ev)) for ev in rec.of("user_state_changed")]
    assert [s for s, _ in user_states] == ["speaking", "listening"]
    assert near(user_states[0][1], 0.5) and near(user_states[1][1], 2.5)

    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "speaking", "listening"]
    for (_, t), expected in zip(states, [0.0, 3.0, 3.2, 5.2]):
        assert near(t, expected)

    metrics = [ev.metrics for ev in rec.of("metrics_collected") if ev.metrics.type != "vad_metrics"]
    assert [m.type for m in metrics] == ["eou_metrics", "llm_metrics", "tts_metrics"]
    eou, llm, tts = metrics
    assert near(eou.end_of_utterance_delay, 0.5) and near(eou.transcription_delay, 0.2)
    assert near(llm.ttft, 0.1) and near(llm.duration, 0.3)
    assert near(tts.ttfb, 0.2) and near(tts.audio_duration, 2.0)
    assert eou.speech_id == llm.speech_id == tts.speech_id
    assert rec.events[-1][0] == "close"


async def test_tool_call_runs_during_playout_and_replies_on_the_same_speech(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "What's the weather in Tokyo?")
    a.add_llm("Let me check the weather for you.", tool_calls=[FunctionToolCall(
        name="get_weather", arguments='{"location": "Tokyo"}', call_id="1")])
    a.add_tts(2.0)
    a.add_llm("The weather in Tokyo is sunny today.", input="The weather in Tokyo is sunny today.")
    a.add_tts(3.0)
    session, agent, rec = await _run(a)

    finished = session.output.audio.playback_finished_events
    assert [round(ev.playback_position, 1) for ev in finished] == [2.0, 3.0]
    assert not any(ev.interrupted for ev in finished)
    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "speaking", "thinking",
                                      "speaking", "listening"]
    assert near(states[3][1], 5.2) and near(states[4][1], 5.7)
    (tools_ev,) = rec.of("function_tools_executed")
    assert [(c.name, c.arguments, c.call_id) for c in tools_ev.function_calls] == [
        ("get_weather", '{"location": "Tokyo"}', "1")]
    assert tools_ev.function_call_outputs[0].output == "The weather in Tokyo is sunny today."
    assert near(rec.t(tools_ev), 5.2)

    ctx = agent.chat_ctx.items
    assert [i.type for i in ctx] == ["message", "agent_config_update", "message", "message",
                                     "function_call", "function_call_output", "message"]
    assert [getattr(i, "role", None) for i in ctx if i.type == "message"] == [
        "system", "user", "assistant", "assistant"]
    assert ctx[3].text_content == "Let me check the weather for you."
    assert ctx[6].text_content == "The weather in Tokyo is sunny today."
    handles = [ev.speech_handle for ev in rec.of("speech_created")]
    assert len(handles) == 1 and handles[0].num_steps == 2


@pytest.mark.parametrize("resume_false_interruption", [False, True])
async def test_interruption_keeps_the_played_prefix(autojump_clock, resume_false_interruption):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Tell me a story.")
    a.add_llm(STORY)
    a.add_tts(10.0)
    a.add_user_speech(5.0, 6.0, "Stop!")
    session, agent, rec = await _run(a, turn_handling={"interruption": {
        "resume_false_interruption": resume_false_interruption}})

    ctx = agent.chat_ctx.items
    assert len(ctx) == 5
    assert ctx[1].type == "agent_config_update"
    assert ctx[3].role == "assistant" and ctx[3].interrupted
    assert STORY.startswith(ctx[3].text_content) and ctx[3].text_content != STORY
    assert ctx[4].role == "user" and ctx[4].text_content == "Stop!"
    states = rec.agent_states()
    assert len(states) == 6
    assert states[3][0] == "listening" and near(states[3][1], 5.5)
    assert states[4][0] == "thinking" and near(states[4][1], 6.5)
    assert states[5][0] == "listening" and near(states[5][1], 6.5)
    (finished,) = session.output.audio.playback_finished_events
    assert finished.interrupted and near(finished.playback_position, 2.3)


@pytest.mark.parametrize("can_pause_audio", [False, True])
async def test_interruption_before_speaking_leaves_no_assistant_message(
        autojump_clock, can_pause_audio):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Tell me a story.")
    a.add_llm(STORY, duration=1.0)
    a.add_tts(10.0)
    a.add_user_speech(3.0, 4.0, "Stop!")
    session, agent, rec = await _run(a, can_pause_audio=can_pause_audio)

    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "listening", "thinking",
                                      "listening"]
    assert near(states[2][1], 3.5)
    assert "speaking" not in [s for s, _ in states]
    finished = session.output.audio.playback_finished_events
    if can_pause_audio:
        # the first frames were held by the pre-pause, then cleared when "Stop!" arrived
        assert len(finished) == 1 and finished[0].interrupted
        assert finished[0].playback_position == 0.0
    else:
        assert finished == []
    assert [(i.role, i.text_content) for i in agent.chat_ctx.items if i.type == "message"] == [
        ("system", "You are a helpful assistant."), ("user", "Tell me a story."),
        ("user", "Stop!")]


async def test_false_interruption_resumes_after_the_timeout(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Tell me a story.")
    a.add_llm(STORY)
    a.add_tts(10.0)
    a.add_user_speech(5.0, 6.0, "")  # noise: only the VAD hears it
    session, agent, rec = await _run(a, can_pause_audio=True)

    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "speaking", "listening",
                                      "speaking", "listening"]
    assert near(states[3][1], 5.5)
    assert near(states[4][1], 8.5)
    (false_int,) = rec.of("agent_false_interruption")
    assert false_int.resumed and near(rec.t(false_int), 8.5)
    (finished,) = session.output.audio.playback_finished_events
    assert not finished.interrupted and near(finished.playback_position, 10.0)
    assert near(rec.t(finished), 16.2)
    assistant = [i for i in agent.chat_ctx.items if getattr(i, "role", None) == "assistant"]
    assert [(m.text_content, m.interrupted) for m in assistant] == [(STORY, False)]


async def test_noise_without_pausable_output_interrupts_at_the_vad_threshold(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "Tell me a story.")
    a.add_llm(STORY)
    a.add_tts(10.0)
    a.add_user_speech(5.0, 6.0, "")
    session, agent, rec = await _run(a)
    assert rec.of("agent_false_interruption") == []
    (finished,) = session.output.audio.playback_finished_events
    assert finished.interrupted and near(rec.t(finished), 5.5)
    assistant = [i for i in agent.chat_ctx.items if getattr(i, "role", None) == "assistant"]
    assert len(assistant) == 1 and assistant[0].interrupted
