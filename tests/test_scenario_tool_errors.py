"""Reference 10.2 item 11 and 5.1/5.2: tool failures become error outputs shown to the model.

The user speaks 0.5-2.5; the LLM (run preemptively from 2.7) answers with a silent tool call at
3.0, when the reply is authorized and the tool runs. An error output asks for a tool reply like
any other output (LiveKit's ``reply_required`` defaults to True for errors); unless scripted, the
tool reply finds no response and the agent returns to listening.
"""

from __future__ import annotations

from agents_trio import Agent, FunctionToolCall, RunContext, ToolError, function_tool
from agents_trio.testing import FakeActions, create_session
from timeline import Recorder, near, run_recorded


class WeatherAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a helpful assistant.")
        self.weather_calls: list[str] = []

    @function_tool
    async def get_weather(self, location: str) -> str:
        """Called when the user asks about the weather.

        Args:
            location: The location to get the weather for
        """
        self.weather_calls.append(location)
        return f"The weather in {location} is sunny today."

    @function_tool
    async def goodbye(self) -> None:
        """Called when the user says goodbye."""


class BrokenToolAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a helpful assistant.")

    @function_tool
    async def get_weather(self, ctx: RunContext, location: str) -> str:
        """Always blows up.

        Args:
            location: The location
        """
        raise RuntimeError("kaboom: secret database password leaked")


class RefusingToolAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a helpful assistant.")

    @function_tool
    async def get_weather(self, location: str) -> str:
        """Refuses some places.

        Args:
            location: The location
        """
        raise ToolError(f"Weather for {location} is not available, ask for another city.")


async def _run(agent: Agent, transcript: str, call: FunctionToolCall,
               reply: tuple[str, str] | None = None):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, transcript)
    a.add_llm("", tool_calls=[call])
    if reply is not None:
        a.add_llm(reply[1], input=reply[0])
        a.add_tts(2.0)
    session = create_session(a)
    rec = await run_recorded(session, agent)
    return session, rec


def _single_step(rec: Recorder, name: str):
    """The one tools event at 3.0, with exactly one call/output pair, both for ``name``."""
    tools = rec.of("function_tools_executed")
    assert len(tools) == 1, rec.dump()
    ev = tools[0]
    assert near(rec.t(ev), 3.0), rec.dump()
    assert [c.name for c in ev.function_calls] == [name]
    assert len(ev.function_call_outputs) == 1 and ev.function_call_outputs[0] is not None
    out = ev.function_call_outputs[0]
    assert out.call_id == ev.function_calls[0].call_id == "1"
    assert out.is_error is True
    return ev.function_calls[0], out


def _check_tool_reply_request(session, rec: Recorder, output: str) -> None:
    """An error output is shown to the model: the step asks for a tool reply (reference
    5.2/5.3), so the LLM runs twice: the user turn, then the tool reply ending with the error
    output."""
    assert rec.of("function_tools_executed")[0].has_tool_reply is True, rec.dump()
    calls = session.llm.calls
    assert len(calls) == 2, [c["chat_ctx"].items[-1] for c in calls]
    last = calls[1]["chat_ctx"].items[-1]
    assert last.type == "function_call_output" and last.output == output and last.is_error
    assert calls[1]["tool_choice"] == "auto"


def _check_ctx_pair(agent: Agent, session, name: str, output: str) -> None:
    """The call and its error output are both kept, once, in the agent ctx and the history."""
    for items in (agent.chat_ctx.items, session.history.items):
        calls = [i for i in items if i.type == "function_call"]
        outputs = [i for i in items if i.type == "function_call_output"]
        assert [(c.name, c.call_id) for c in calls] == [(name, "1")], items
        assert [(o.call_id, o.output, o.is_error) for o in outputs] == [("1", output, True)], items
        assert items.index(calls[0]) < items.index(outputs[0])


def _check_back_to_listening(rec: Recorder) -> None:
    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "listening"], rec.dump()
    assert near(states[1][1], 3.0) and near(states[2][1], 3.0), rec.dump()
    assert rec.of("playback_finished") == [], rec.dump()


async def test_unknown_function_call_gets_an_error_output_listing_the_tools(autojump_clock):
    agent = WeatherAgent()
    session, rec = await _run(
        agent, "Check the weather",
        FunctionToolCall(name="nonexistent_tool", arguments='{"location": "Tokyo"}',
                         call_id="1"),
        # keyed by a prefix only: the tool reply finds no scripted response
        reply=("Unknown function: nonexistent_tool", "I don't have access to that function."))
    call, out = _single_step(rec, "nonexistent_tool")
    assert out.output == ("Unknown function: nonexistent_tool - available tools: "
                          "get_weather, goodbye")
    assert agent.weather_calls == []
    _check_ctx_pair(agent, session, "nonexistent_tool", out.output)
    _check_tool_reply_request(session, rec, out.output)
    error_outputs = [i for i in agent.chat_ctx.items
                     if i.type == "function_call_output" and i.is_error]
    assert len(error_outputs) == 1
    assert "Unknown function: nonexistent_tool" in error_outputs[0].output
    _check_back_to_listening(rec)


async def test_invalid_tool_arguments_surface_as_a_tool_error_naming_the_field(autojump_clock):
    agent = WeatherAgent()
    session, rec = await _run(agent, "What's the weather?",
                              FunctionToolCall(name="get_weather", arguments="{}", call_id="1"))
    call, out = _single_step(rec, "get_weather")
    assert out.output.startswith("Error parsing arguments for `get_weather`"), out.output
    assert "location" in out.output
    assert "An internal error occurred" not in out.output
    assert agent.weather_calls == []          # the tool body never ran
    _check_ctx_pair(agent, session, "get_weather", out.output)
    _check_tool_reply_request(session, rec, out.output)
    _check_back_to_listening(rec)


async def test_tool_internal_exception_returns_the_generic_error(autojump_clock):
    agent = BrokenToolAgent()
    session, rec = await _run(
        agent, "What's the weather in Tokyo?",
        FunctionToolCall(name="get_weather", arguments='{"location": "Tokyo"}', call_id="1"))
    call, out = _single_step(rec, "get_weather")
    assert out.output == "An internal error occurred"
    assert "kaboom" not in out.output and "secret" not in out.output
    _check_ctx_pair(agent, session, "get_weather", "An internal error occurred")
    _check_tool_reply_request(session, rec, "An internal error occurred")
    _check_back_to_listening(rec)
    assert rec.of("error") == [], rec.dump()    # a tool failure is not a session error


async def test_tool_error_message_is_shown_to_the_model_as_is(autojump_clock):
    agent = RefusingToolAgent()
    message = "Weather for Atlantis is not available, ask for another city."
    session, rec = await _run(
        agent, "What's the weather in Atlantis?",
        FunctionToolCall(name="get_weather", arguments='{"location": "Atlantis"}', call_id="1"),
        reply=(message, "Sorry, which other city?"))
    call, out = _single_step(rec, "get_weather")
    assert out.output == message
    _check_ctx_pair(agent, session, "get_weather", message)
    _check_tool_reply_request(session, rec, message)

    # the error output is what the model answers: the tool reply speaks on the same handle
    states = rec.agent_states()
    assert [s for s, _ in states] == ["listening", "thinking", "speaking", "listening"], \
        rec.dump()
    for (state, t), want in zip(states, [0.0, 3.0, 3.5, 5.5]):
        assert near(t, want), f"{state} at {t}, expected {want}\n{rec.dump()}"
    assistant = [i for i in agent.chat_ctx.items
                 if i.type == "message" and i.role == "assistant"]
    assert [m.text_content for m in assistant] == ["Sorry, which other city?"]
    assert agent.chat_ctx.items[-1] is assistant[0]
