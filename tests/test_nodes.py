"""Overridable nodes delegating to the default with super(), and agent updates."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator

import trio

from agents_trio import (Agent, AgentConfigUpdate, ChatContext, FunctionToolCall, ModelSettings,
                         SpeechEvent, SpeechEventType, ToolFlag, function_tool)
from agents_trio.models import SpeechData
from agents_trio.testing import FakeActions, create_session, run_session


def _actions() -> FakeActions:
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "hello there")
    a.add_llm("General Kenobi!", input="HELLO THERE")
    a.add_tts(1.0)
    return a


class Shouting(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Be brief.")
        self.llm_inputs: list[str] = []
        self.frames = 0

    async def stt_node(self, audio: AsyncIterable, model_settings: ModelSettings
                       ) -> AsyncIterator[SpeechEvent]:
        async for ev in super().stt_node(audio, model_settings):
            if ev.type is SpeechEventType.FINAL_TRANSCRIPT:
                ev = SpeechEvent(type=ev.type, alternatives=[
                    SpeechData(text=ev.alternatives[0].text.upper())])
            yield ev

    async def llm_node(self, chat_ctx: ChatContext, tools: list, model_settings: ModelSettings):
        self.llm_inputs.append(chat_ctx.items[-1].text_content)
        async for chunk in super().llm_node(chat_ctx, tools, model_settings):
            yield chunk

    async def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings):
        async for frame in super().tts_node(text, model_settings):
            self.frames += 1
            yield frame

    async def transcription_node(self, text: AsyncIterable[str], model_settings: ModelSettings):
        async for chunk in super().transcription_node(text, model_settings):
            yield f"[{chunk}]"


async def test_nodes_can_transform_and_delegate_to_the_default(autojump_clock):
    session = create_session(_actions())
    finals: list[str] = []
    session.on("user_input_transcribed",
               lambda ev: finals.append(ev.transcript) if ev.is_final else None)
    agent = Shouting()
    with trio.fail_after(60):
        await run_session(session, agent)
    assert finals == ["HELLO THERE"]
    assert agent.llm_inputs == ["HELLO THERE"]
    assert agent.frames == 100  # 1.0 s of 10 ms frames
    # the transcription node gets the LLM's chunks (three characters each, from the fake),
    # as on LiveKit; what it makes is shown and kept in the history
    assert session.output.transcription.messages == ["[Gen][era][l K][eno][bi!]"]
    assert [m.text_content for m in session.history.messages()
            if m.role == "assistant"] == ["[Gen][era][l K][eno][bi!]"]
    assert [round(ev.playback_position, 2)
            for ev in session.output.audio.playback_finished_events] == [1.0]


class Updatable(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="first")

    async def on_enter(self) -> None:
        await self.update_instructions("second")
        await self.update_tools([self.extra])

    @function_tool
    async def base(self) -> str:
        """A tool."""
        return "x"

    @function_tool
    async def extra(self) -> str:
        """Another tool."""
        return "y"


async def test_update_instructions_and_tools_are_recorded(autojump_clock):
    session = create_session(FakeActions())
    agent = Updatable()
    with trio.fail_after(60):
        await run_session(session, agent, drain_delay=0.5)
    updates = [i for i in agent.chat_ctx.items if isinstance(i, AgentConfigUpdate)]
    assert [(u.instructions, u.tools_added, u.tools_removed) for u in updates] == [
        ("first", ["base", "extra"], None), ("second", None, None), (None, None, ["base"])]
    assert agent.chat_ctx.items[0].text_content == "second"
    assert [t.name for t in agent.tools] == ["extra"]


class Greeter(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="greets")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet")

    @function_tool
    async def keep(self) -> str:
        """Always available."""
        return "kept"

    @function_tool(flags=ToolFlag.IGNORE_ON_ENTER)
    async def end_call(self) -> str:
        """End the call."""
        return "ended"


async def test_ignore_on_enter_tools_are_hidden_from_the_greeting_and_its_tool_reply(
        autojump_clock):
    a = FakeActions()
    a.add_llm("Hi!", tool_calls=[FunctionToolCall(name="keep", arguments="{}", call_id="k")],
              input="greet")
    a.add_llm("Still here.", input="kept")
    a.add_user_speech(3.0, 4.0, "bye")
    a.add_llm("Bye.", input="bye")
    session = create_session(a)
    with trio.fail_after(60):
        await run_session(session, Greeter(), drain_delay=1.0)
    seen = [sorted(t.name for t in call["tools"]) for call in session.llm.calls]
    assert seen[:2] == [["keep"], ["keep"]]  # the greeting and its tool reply
    assert seen[-1] == ["end_call", "keep"]  # a later user turn sees every tool
