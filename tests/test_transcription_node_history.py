"""The history keeps the text the agent's ``transcription_node`` produced, as on LiveKit.

LiveKit runs the transcription node on the LLM's text before anything else reads it: the
node's output is what the transcription output gets (through the transcript synchronizer),
what the assistant message in the history holds (so what the next LLM request and
``conversation_item_added`` see) and, when the reply is interrupted, what is cut at the
played position. The TTS still gets the LLM's text (``tts_text_transforms`` apply to it
alone). ``say()`` goes through the same node. A node left as the default changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator

import trio

from agents_trio import Agent, AgentSession, ModelSettings
from agents_trio.testing import (FakeActions, FakeAudioInput, FakeAudioOutput,
                                 FakeRealtimeModel, FakeTextOutput, create_session)

JSON_REPLY = json.dumps({"mood": "cheerful", "response": "Hello there, friend."})
JSON_BYE = json.dumps({"mood": "calm", "response": "Bye."})
LONG = "One two three four five six seven eight nine ten eleven twelve."


class Upper(Agent):
    """Shouts its transcription (and nothing else)."""

    def __init__(self) -> None:
        super().__init__(instructions="x")
        self.node_inputs: list[str] = []

    async def transcription_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                                 ) -> AsyncIterator[str]:
        seen = ""
        async for chunk in text:
            seen += chunk
            yield chunk.upper()
        self.node_inputs.append(seen)


class ResponseOnly(Agent):
    """Answers in JSON; its transcription is the ``response`` field alone (LiveKit's
    ``structured_output`` example, in short)."""

    def __init__(self) -> None:
        super().__init__(instructions="x")

    async def transcription_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                                 ) -> AsyncIterator[str]:
        so_far = ""
        async for chunk in text:
            so_far += chunk
        yield json.loads(so_far)["response"]


class FailsMidway(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")

    async def transcription_node(self, text: AsyncIterable[str], model_settings: ModelSettings
                                 ) -> AsyncIterator[str]:
        said = 0
        async for chunk in text:
            if said >= 6:
                raise RuntimeError("transcription node failed")
            said += len(chunk)
            yield chunk.upper()


def _assistant(session: AgentSession) -> list[str]:
    return [m.text_content or "" for m in session.history.messages() if m.role == "assistant"]


def _added(session: AgentSession) -> list[str]:
    added: list[str] = []
    session.on("conversation_item_added",
               lambda ev: added.append(ev.item.text_content)
               if ev.item.type == "message" and ev.item.role == "assistant" else None)
    return added


def _request_texts(session: AgentSession, index: int) -> list[tuple[str, str]]:
    items = session.llm.calls[index]["chat_ctx"].items  # type: ignore[union-attr]
    return [(i.role, i.text_content) for i in items if i.type == "message"]


async def test_a_completed_reply_keeps_the_nodes_text(autojump_clock):
    a = FakeActions()
    a.add_llm(JSON_REPLY, input="hi")
    a.add_tts(1.0)
    a.add_llm(JSON_BYE, input="bye")
    a.add_tts(0.5)
    session = create_session(a)
    added = _added(session)
    with trio.fail_after(60):
        async with session:
            await session.start(ResponseOnly())
            session.input.audio.push(0.1)
            await session.generate_reply(user_input="hi")
            await session.generate_reply(user_input="bye")
    assert _assistant(session) == ["Hello there, friend.", "Bye."]
    assert added == ["Hello there, friend.", "Bye."]
    # the next request sees what the node made of the first reply
    assert _request_texts(session, 1)[-2:] == [("assistant", "Hello there, friend."),
                                               ("user", "bye")]
    # the TTS got the LLM's own text; the transcription output the node's
    assert session.tts.inputs == [JSON_REPLY, JSON_BYE]  # type: ignore[union-attr]
    assert session.output.transcription.messages == ["Hello there, friend.", "Bye."]


async def test_a_text_only_reply_keeps_the_nodes_text(autojump_clock):
    a = FakeActions()
    a.add_llm(JSON_REPLY, input="hi")
    a.add_llm(JSON_BYE, input="bye")
    session = create_session(a)
    session.output.audio = None
    added = _added(session)
    with trio.fail_after(60):
        async with session:
            await session.start(ResponseOnly())
            await session.generate_reply(user_input="hi")
            await session.generate_reply(user_input="bye")
    assert _assistant(session) == ["Hello there, friend.", "Bye."]
    assert added == ["Hello there, friend.", "Bye."]
    assert _request_texts(session, 1)[-2:] == [("assistant", "Hello there, friend."),
                                               ("user", "bye")]
    assert session.output.transcription.messages == ["Hello there, friend.", "Bye."]


async def test_the_node_runs_once_on_the_llms_text_as_generated(autojump_clock):
    a = FakeActions()
    a.add_llm("Hi there.", input="hi")
    a.add_tts(1.0)
    session = create_session(a)
    agent = Upper()
    with trio.fail_after(60):
        async with session:
            await session.start(agent)
            session.input.audio.push(0.1)
            await session.generate_reply(user_input="hi")
    assert agent.node_inputs == ["Hi there."]
    assert _assistant(session) == ["HI THERE."]
    assert session.output.transcription.messages == ["HI THERE."]


async def test_an_interrupted_reply_keeps_the_played_part_of_the_nodes_text(autojump_clock):
    a = FakeActions()
    a.add_llm(LONG, input="hi")
    a.add_tts(6.0)
    session = create_session(a)
    with trio.fail_after(60):
        async with session:
            await session.start(Upper())
            session.input.audio.push(0.1)
            handle = session.generate_reply(user_input="hi")
            await trio.sleep(3.5)  # about half of the 6 s of audio played
            handle.interrupt()
            await handle
    [msg] = [m for m in session.history.messages() if m.role == "assistant"]
    text = msg.text_content or ""
    assert msg.interrupted is True
    assert 0 < len(text) < len(LONG) - 10, text
    assert LONG.upper().startswith(text) and text.startswith("ONE TWO"), text
    # what the transcription output showed is what was kept
    assert session.output.transcription.messages[-1].strip() == text


async def test_an_interrupted_reply_without_transcription_output_keeps_the_nodes_text(
        autojump_clock):
    a = FakeActions()
    a.add_llm(LONG, input="hi")
    a.add_tts(6.0)
    session = create_session(a)
    session.output.transcription = None
    with trio.fail_after(60):
        async with session:
            await session.start(Upper())
            session.input.audio.push(0.1)
            handle = session.generate_reply(user_input="hi")
            await trio.sleep(3.5)
            handle.interrupt()
            await handle
    [text] = _assistant(session)
    assert 0 < len(text) < len(LONG) - 10, text
    assert LONG.upper().startswith(text) and text.startswith("ONE TWO"), text


async def test_the_default_node_keeps_the_llms_text(autojump_clock):
    a = FakeActions()
    a.add_llm(JSON_REPLY, input="hi")
    a.add_tts(1.0)
    a.add_llm(LONG, input="bye")
    a.add_tts(6.0)
    session = create_session(a)
    with trio.fail_after(60):
        async with session:
            await session.start(Agent(instructions="x"))
            session.input.audio.push(0.1)
            await session.generate_reply(user_input="hi")
            handle = session.generate_reply(user_input="bye")
            await trio.sleep(3.5)
            handle.interrupt()
            await handle
    first, second = _assistant(session)
    assert first == JSON_REPLY
    assert _request_texts(session, 1)[-2:] == [("assistant", JSON_REPLY), ("user", "bye")]
    assert 0 < len(second) < len(LONG) - 10 and LONG.startswith(second), second
    assert session.output.transcription.messages == [JSON_REPLY, second]


async def test_say_keeps_the_nodes_text(autojump_clock):
    a = FakeActions()
    a.add_tts(1.0, input="Welcome aboard.")
    a.add_tts(1.0, input="Not recorded.")
    session = create_session(a)
    added = _added(session)
    with trio.fail_after(60):
        async with session:
            await session.start(Upper())
            session.input.audio.push(0.1)
            await session.say("Welcome aboard.")
            await session.say("Not recorded.", add_to_chat_ctx=False)
    assert _assistant(session) == ["WELCOME ABOARD."]
    assert added == ["WELCOME ABOARD."]
    assert session.tts.inputs == ["Welcome aboard.", "Not recorded."]  # type: ignore[union-attr]
    assert session.output.transcription.messages == ["WELCOME ABOARD.", "NOT RECORDED."]


async def test_a_failing_node_keeps_what_it_made_and_reports_the_error(autojump_clock):
    a = FakeActions()
    a.add_llm("Hello there, friend.", input="hi")
    a.add_tts(1.0)
    session = create_session(a)
    errors: list[str] = []
    session.on("error", lambda ev: errors.append(str(ev.error)))
    with trio.fail_after(60):
        async with session:
            await session.start(FailsMidway())
            session.input.audio.push(0.1)
            await session.generate_reply(user_input="hi")
    assert errors == ["transcription node failed"]
    assert _assistant(session) == ["HELLO"]  # (the history strips the text's ends)


def _realtime_session(model: FakeRealtimeModel, *, audio: bool) -> AgentSession:
    session = AgentSession(llm=model)
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput() if audio else None
    session.output.transcription = FakeTextOutput()
    return session


async def test_a_realtime_reply_keeps_the_nodes_text(autojump_clock):
    for audio in (True, False):
        model = FakeRealtimeModel()
        model.add_response("greet", "Hi there, friend.", audio_duration=1.0)
        session = _realtime_session(model, audio=audio)
        added = _added(session)
        with trio.fail_after(60):
            async with session:
                await session.start(Upper())
                await session.generate_reply(instructions="greet")
        assert _assistant(session) == ["HI THERE, FRIEND."], audio
        assert added == ["HI THERE, FRIEND."], audio
        assert session.output.transcription.messages == ["HI THERE, FRIEND."], audio


async def test_an_interrupted_realtime_reply_truncates_at_the_nodes_text(autojump_clock):
    model = FakeRealtimeModel()
    model.add_response("greet", LONG, audio_duration=6.0)
    session = _realtime_session(model, audio=True)
    with trio.fail_after(60):
        async with session:
            await session.start(Upper())
            handle = session.generate_reply(instructions="greet")
            await trio.sleep(3.0)
            handle.interrupt()
            await handle
    [text] = _assistant(session)
    # the model's audio streams in real time, so the synchronizer paced the words at the
    # standard rate: the history keeps the words it showed by the cut, as LiveKit keeps
    # the synchronized transcript
    assert 0 < len(text) < len(LONG), text
    assert LONG.upper().startswith(text) and text.startswith("ONE TWO"), text
    assert session.output.transcription.messages[-1].strip() == text
    [(_, _, transcript)] = [arg for name, arg in model.sessions[0].calls if name == "truncate"]
    assert transcript.strip() == text
