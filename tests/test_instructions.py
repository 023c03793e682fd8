"""``Instructions`` per modality (LiveKit's ``beta.Instructions``): each reply renders the
agent's instructions for the modality of the input it answers."""

from __future__ import annotations

import pytest

from agents_trio import Agent, AgentSession
from agents_trio.beta import Instructions
from agents_trio.testing import FakeActions, FakeLLM, create_session, run_session

lk_chat = pytest.importorskip("livekit.agents.llm.chat_context")

CASES = [
    Instructions("Be kind."),
    Instructions("Be kind.", audio="Short sentences.", text="Use markdown."),
    Instructions("", audio="Only audio."),
    Instructions("Base.", text="Typed.", dynamic="Now: noon."),
    Instructions("Hello {name}.", audio="Say {name} slowly."),
]


@pytest.mark.parametrize("ours", CASES, ids=repr)
@pytest.mark.parametrize("modality", [None, "audio", "text"])
def test_renders_as_livekit_does(ours: Instructions, modality: str | None) -> None:
    theirs = lk_chat.Instructions(ours.common, audio=ours.audio, text=ours.text,
                                  dynamic=ours.dynamic)
    assert ours.render(modality=modality) == theirs.render(modality=modality)
    assert ours.render_static(modality=modality) == theirs.render_static(modality=modality)
    data = {"name": "Ada"}
    assert ours.render(modality=modality, data=data) == theirs.render(modality=modality,
                                                                       data=data)
    assert str(ours) == str(theirs)


def test_resolve_template_as_livekit_does() -> None:
    template = "You are {persona}. {style} Ask for {what}."
    part = Instructions("Be brief.", audio="Speak slowly.", text="Use digits.")
    for kwargs in ({"persona": "a clerk", "style": part, "what": "the date"},
                   {"persona": "a clerk", "style": "Plain.", "what": "the date"}):
        lk_kwargs = {k: (lk_chat.Instructions(v.common, audio=v.audio, text=v.text)
                         if isinstance(v, Instructions) else v) for k, v in kwargs.items()}
        ours = Instructions.resolve_template(template, **kwargs)
        theirs = lk_chat.Instructions.resolve_template(template, **lk_kwargs)
        assert (ours.common, ours.audio, ours.text) == (theirs.common, theirs.audio, theirs.text)


def test_equality_with_a_string_and_bad_values() -> None:
    assert Instructions("x") == "x"
    assert Instructions("x", text="y") != "x"
    with pytest.raises(TypeError, match="instructions"):
        Agent(instructions=42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="audio"):
        Instructions("x", audio=3)  # type: ignore[arg-type]


INSTR = Instructions("You help.", audio="Keep it short.", text="Use lists.")


def _system_text(call: dict) -> str:
    return "\n".join(i.text_content for i in call["chat_ctx"].items
                     if getattr(i, "role", None) == "system")


async def test_a_typed_turn_gets_the_text_rendering_and_a_spoken_one_the_audio(
        autojump_clock) -> None:
    actions = FakeActions()
    actions.add_llm("Typed answer.", input="typed question")
    actions.add_user_speech(1.0, 2.0, "spoken question", stt_delay=0.2)
    actions.add_llm("Spoken answer.", input="spoken question")
    actions.add_tts(1.0)
    session = create_session(actions)
    llm = session.llm
    assert isinstance(llm, FakeLLM)
    handles = []
    session.on("speech_created", lambda ev: handles.append(ev.speech_handle))

    class Helper(Agent):
        def __init__(self) -> None:
            super().__init__(instructions=INSTR)

        async def on_enter(self) -> None:
            self.session.generate_reply(user_input="typed question")

    await run_session(session, Helper())
    systems = [_system_text(c) for c in llm.calls]
    assert systems == [INSTR.render(modality="text"), INSTR.render(modality="audio")]
    assert [h.input_details.modality for h in handles] == ["text", "audio"]
    # the agent's context keeps the spoken rendering, as LiveKit's does
    assert session.current_agent.chat_ctx.items[0].text_content == INSTR.render(
        modality="audio")


async def test_input_modality_overrides_and_per_call_instructions_render(autojump_clock) -> None:
    llm = FakeLLM()
    async with AgentSession(llm=llm) as session:
        await session.start(Agent(instructions=INSTR))
        handle = session.generate_reply(
            user_input="hi", input_modality="audio",
            instructions=Instructions("Extra.", audio="Extra audio.", text="Extra text."))
        await handle
        assert handle.input_details.modality == "audio"
        result = await session.run(user_input="again")
        assert result is not None
    first, second = (_system_text(c) for c in llm.calls)
    assert first == INSTR.render(modality="audio") + "\nExtra.\n\nExtra audio."
    assert second == INSTR.render(modality="text")
