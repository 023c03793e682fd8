"""Reference 10.2 item 8: ``generate_reply`` from on_enter and from a tool, ``say`` from
on_user_turn_completed.

on_enter greets ("What can I do for you!", 2 s); the user says "bye" (3.0-4.0);
on_user_turn_completed says a 1 s sentence; the LLM answers "bye" with a call to ``goodbye``,
whose body awaits an inner ``generate_reply`` ("Goodbye! have a nice day!", 3 s) and then asks
the session to shut down.
"""

from __future__ import annotations

import trio

from agents_trio import Agent, ChatContext, ChatMessage, FunctionToolCall, function_tool
from agents_trio.testing import FakeActions, create_session
from timeline import near, run_recorded

HELLO = "What can I do for you!"
GOODBYE = "Goodbye! have a nice day!"
SAY = "session.say from on_user_turn_completed"


class GreeterAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a helpful assistant.")
        self.goodbye_returned_at: float | None = None

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="instructions:say hello to the user")

    async def on_user_turn_completed(self, turn_ctx: ChatContext,
                                     new_message: ChatMessage) -> None:
        self.session.say(SAY)

    @function_tool
    async def goodbye(self) -> None:
        """Called when the user says goodbye."""
        await self.session.generate_reply(instructions="instructions:say goodbye to the user")
        self.goodbye_returned_at = trio.current_time()
        self.session.shutdown()


async def test_generate_reply_from_on_enter_and_from_a_tool(autojump_clock):
    a = FakeActions()
    a.add_llm(HELLO, input="instructions:say hello to the user")
    a.add_tts(2.0)
    a.add_llm(GOODBYE, input="instructions:say goodbye to the user")
    a.add_tts(3.0)
    a.add_tts(1.0, ttfb=0, input=SAY)
    a.add_user_speech(3.0, 4.0, "bye")
    a.add_llm("", tool_calls=[FunctionToolCall(name="goodbye", arguments="", call_id="1")])
    session = create_session(a)
    agent = GreeterAgent()
    # a long drain delay: without the tool's shutdown the session would close at 14.2
    rec = await run_recorded(session, agent, drain_delay=10.0)

    # playback: greeting (2 s), say (1 s), inner goodbye reply (3 s); none interrupted
    finished = rec.of("playback_finished")
    assert [(round(ev.playback_position, 1), ev.interrupted) for ev in finished] == [
        (2.0, False), (1.0, False), (3.0, False)], rec.dump()
    for ev, want in zip(finished, [2.5, 5.5, 9.0]):
        assert near(rec.t(ev), want), rec.dump()
    assert session.output.audio.playback_finished_events == finished

    # the greeting starts at once; the say plays right at the turn (4.5); the inner reply
    # starts when the tool runs (5.5, after the say) plus LLM 0.3 and TTS 0.2
    states = rec.agent_states()
    assert states[0] == ("listening", 0.0), rec.dump()
    assert states[1][0] == "thinking" and near(states[1][1], 0.0), rec.dump()
    speaking = [t for s, t in states if s == "speaking"]
    assert len(speaking) == 3, rec.dump()
    for t, want in zip(speaking, [0.5, 4.5, 6.0]):
        assert near(t, want), rec.dump()
    assert any(s == "thinking" and near(t, 4.5) for s, t in states), rec.dump()

    # one tool step: goodbye, output "" (it returned None), no tool reply
    tools = rec.of("function_tools_executed")
    assert len(tools) == 1, rec.dump()
    assert [c.name for c in tools[0].function_calls] == ["goodbye"]
    assert tools[0].function_calls[0].call_id == "1"
    out = tools[0].function_call_outputs[0]
    assert out is not None and out.output == "" and out.is_error is False
    assert tools[0].has_tool_reply is False
    assert near(rec.t(tools[0]), 9.0), rec.dump()
    assert agent.goodbye_returned_at is not None
    assert near(agent.goodbye_returned_at - rec.t0, 9.0)

    # conversation_item_added
    added = rec.of("conversation_item_added")
    assert [ev.item.type for ev in added] == ["agent_handoff", "message", "message", "message",
                                              "message"], rec.dump()
    expected = [("assistant", HELLO, 2.5), ("user", "bye", 4.5), ("assistant", SAY, 5.5),
                ("assistant", GOODBYE, 9.0)]
    for ev, (role, text, t) in zip(added[1:], expected):
        assert ev.item.role == role and ev.item.text_content == text, rec.dump()
        assert near(rec.t(ev), t), f"{text!r} added at {rec.t(ev)}, expected {t}"

    # agent chat context: the inner reply sorts between the call and its output
    items = agent.chat_ctx.items
    assert [i.type for i in items] == ["message", "agent_config_update", "message", "message",
                                       "message", "function_call", "message",
                                       "function_call_output"], items
    assert items[0].role == "system"
    assert items[2].role == "assistant" and items[2].text_content == HELLO
    assert items[3].role == "user" and items[3].text_content == "bye"
    assert items[4].role == "assistant" and items[4].text_content == SAY
    assert items[5].name == "goodbye" and items[5].call_id == "1"
    assert items[6].role == "assistant" and items[6].text_content == GOODBYE
    assert items[7].call_id == "1" and items[7].output == ""

    # the tool's shutdown closed the session right after the step, not the harness at 14.2
    closes = rec.of("close")
    assert len(closes) == 1 and closes[0].reason == "user_initiated", rec.dump()
    assert 9.0 - 0.1 <= rec.t(closes[0]) <= 9.5, rec.dump()
