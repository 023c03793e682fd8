"""What a node override may return, and what a failing one does (LiveKit's semantics):
``llm_node`` may return a string, a coroutine (resolving to a string or an async iterable) or
an async iterable of ``str`` / ``ChatChunk``; a node that raises ends its speech with an
``error`` event, and the session goes on to answer the next turn."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import pytest
import trio

from agents_trio import Agent, AgentSession, ChatContext, ModelSettings
from agents_trio.models import ChatChunk
from agents_trio.testing import FakeActions, FakeLLM, create_session, run_session


def _text_session(actions: FakeActions) -> AgentSession:
    return AgentSession(llm=FakeLLM(actions.llm_responses))


async def _reply_texts(agent: Agent, *turns: str, actions: FakeActions | None = None
                       ) -> tuple[list[list[str]], list[Any]]:
    a = actions or FakeActions()
    errors: list[Any] = []
    texts: list[list[str]] = []
    async with _text_session(a) as session:
        session.on("error", errors.append)
        await session.start(agent)
        for turn in turns:
            with trio.fail_after(10):
                result = await session.run(user_input=turn)
            texts.append([e.item.text_content for e in result.events
                          if e.type == "message" and e.item.role == "assistant"])
    return texts, errors


class ReturnsText(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")

    async def llm_node(self, chat_ctx: ChatContext, tools: list, model_settings: ModelSettings
                       ) -> str:
        return f"echo: {chat_ctx.items[-1].text_content}"


class ReturnsTextSync(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")

    def llm_node(self, chat_ctx: ChatContext, tools: list,  # type: ignore[override]
                 model_settings: ModelSettings) -> str:
        return "plain string"


async def _chunks() -> AsyncIterator[Any]:
    yield "Hel"
    yield ChatChunk(id="1", content="lo")
    yield 42  # not text: skipped, as LiveKit does


class ReturnsIterable(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")

    async def llm_node(self, chat_ctx: ChatContext, tools: list, model_settings: ModelSettings
                       ) -> AsyncIterable[Any]:
        return _chunks()


async def test_llm_node_returning_a_string(autojump_clock):
    texts, errors = await _reply_texts(ReturnsText(), "hi")
    assert texts == [["echo: hi"]] and errors == []


async def test_llm_node_returning_a_string_without_a_coroutine(autojump_clock):
    texts, errors = await _reply_texts(ReturnsTextSync(), "hi")
    assert texts == [["plain string"]] and errors == []


async def test_llm_node_coroutine_returning_an_async_iterable(autojump_clock):
    texts, errors = await _reply_texts(ReturnsIterable(), "hi")
    assert texts == [["Hello"]] and errors == []


class FailsOnce(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")
        self.calls = 0

    async def llm_node(self, chat_ctx: ChatContext, tools: list, model_settings: ModelSettings):
        self.calls += 1
        if self.calls == 1:
            raise ValueError("node bug")
        async for chunk in super().llm_node(chat_ctx, tools, model_settings):
            yield chunk


async def test_a_failing_llm_node_is_an_error_event_and_the_session_goes_on(autojump_clock):
    a = FakeActions()
    a.add_llm("Second answer.", input="again")
    errors: list[Any] = []
    async with _text_session(a) as session:
        session.on("error", errors.append)
        await session.start(FailsOnce())
        with trio.fail_after(10):
            # the run reports its speech's error (LiveKit's RunResult does too)
            with pytest.raises(ValueError, match="node bug"):
                await session.run(user_input="first")
            result = await session.run(user_input="again")
        assert [e.item.text_content for e in result.events
                if e.type == "message"] == ["Second answer."]
        assert [type(e.error).__name__ for e in errors] == ["ValueError"]


class TtsFailsOnce(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")
        self.calls = 0

    async def tts_node(self, text: AsyncIterable[str], model_settings: ModelSettings):
        self.calls += 1
        if self.calls == 1:
            raise ValueError("tts node bug")
        async for frame in super().tts_node(text, model_settings):
            yield frame


async def test_a_failing_tts_node_is_an_error_event_and_the_session_goes_on(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "hello")
    a.add_llm("First.", input="hello")
    a.add_tts(1.0)
    a.add_user_speech(8.0, 9.0, "again")
    a.add_llm("Second.", input="again")
    a.add_tts(1.0)
    session = create_session(a)
    errors: list[Any] = []
    session.on("error", errors.append)
    agent = TtsFailsOnce()
    await run_session(session, agent)
    assert [type(e.error).__name__ for e in errors] == ["ValueError"]
    said = [m.text_content for m in session.history.messages() if m.role == "assistant"]
    assert said[-1] == "Second."


async def _bracketed(text: AsyncIterable[str]) -> AsyncIterator[str]:
    async for chunk in text:
        yield f"<{chunk}>"


class TranscriptionViaCoroutine(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="x")

    async def transcription_node(self, text: AsyncIterable[str],  # type: ignore[override]
                                 model_settings: ModelSettings) -> AsyncIterable[str]:
        return _bracketed(text)


async def test_transcription_node_coroutine_returning_an_async_iterable(autojump_clock):
    a = FakeActions()
    a.add_user_speech(0.5, 2.5, "hello")
    a.add_llm("Hi there.", input="hello")
    a.add_tts(1.0)
    session = create_session(a)
    await run_session(session, TranscriptionViaCoroutine())
    # the node's stream carries the segment's text as the LLM generates it (each chunk
    # bracketed), one stream and one message per segment; the history keeps its output
    [message] = session.output.transcription.messages
    assert message.startswith("<Hi") and message.endswith(">")
    assert message.replace("<", "").replace(">", "") == "Hi there."
    assert [m.text_content for m in session.history.messages()
            if m.role == "assistant"] == [message]
