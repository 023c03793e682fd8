"""``llm.ChoiceDelta`` and LiveKit's ``ChatChunk(id=..., delta=...)``: a chunk built LiveKit's
way is spoken and recorded as one built with ``content=``; chunks of the default node carry a
``delta`` a LiveKit-style override can read and change."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agents_trio import Agent, AgentSession, ChatContext, FunctionToolCall, ModelSettings
from agents_trio.llm import ChatChunk, ChoiceDelta, CompletionUsage
from agents_trio.testing import FakeActions, FakeLLM

lk_llm = pytest.importorskip("livekit.agents.llm")


def test_has_response_and_fields_agree_with_livekits() -> None:
    call = FunctionToolCall(call_id="c1", name="f", arguments="{}")
    lk_call = lk_llm.FunctionToolCall(call_id="c1", name="f", arguments="{}")
    cases = [({"content": "hi"}, {"content": "hi"}),
             ({"content": ""}, {"content": ""}),
             ({"tool_calls": [call]}, {"tool_calls": [lk_call]}),
             ({}, None)]
    for delta, lk_delta in cases:
        ours = ChatChunk(id="x", delta=ChoiceDelta(**delta) if delta else None)
        theirs = lk_llm.ChatChunk(id="x", delta=lk_llm.ChoiceDelta(**lk_delta)
                                  if lk_delta is not None else None)
        assert ours.has_response() == theirs.has_response(), delta
    usage_only = ChatChunk(id="x", usage=CompletionUsage(completion_tokens=3))
    assert usage_only.delta is None and not usage_only.has_response()


def test_both_forms_fill_both_sides_and_conflicts_are_refused() -> None:
    ours = ChatChunk(content="hi")
    assert ours.delta is not None and ours.delta.content == "hi"
    assert ours.delta.role == "assistant"
    livekits = ChatChunk(id="r1", delta=ChoiceDelta(content="yo"))
    assert livekits.content == "yo"
    with pytest.raises(ValueError, match="not both"):
        ChatChunk(content="a", delta=ChoiceDelta(content="b"))


class LiveKitStyle(Agent):
    """Yields chunks built LiveKit's way, and a tool call through a delta."""

    async def llm_node(self, chat_ctx: ChatContext, tools: list, model_settings: ModelSettings
                       ) -> AsyncIterator[object]:
        yield ChatChunk(id="r1", delta=ChoiceDelta(role="assistant", content="Built "))
        yield ChatChunk(id="r1", delta=ChoiceDelta(content="the LiveKit way."))
        yield ChatChunk(id="r1", usage=CompletionUsage(completion_tokens=5, total_tokens=5))


async def test_a_chunk_built_livekits_way_is_the_reply(autojump_clock) -> None:
    async with AgentSession(llm=FakeLLM()) as session:
        await session.start(LiveKitStyle(instructions="x"))
        result = await session.run(user_input="hi")
    msg = result.expect.next_event().is_message(role="assistant").event().item
    assert msg.text_content == "Built the LiveKit way."


class Editing(Agent):
    """Reads and changes ``chunk.delta.content`` on the default node's chunks (LiveKit's
    usual override)."""

    async def llm_node(self, chat_ctx: ChatContext, tools: list, model_settings: ModelSettings
                       ) -> AsyncIterator[object]:
        async for chunk in Agent.default.llm_node(self, chat_ctx, tools, model_settings):
            if isinstance(chunk, ChatChunk) and chunk.delta and chunk.delta.content:
                chunk.delta.content = chunk.delta.content.upper()
            yield chunk


async def test_an_override_changes_the_delta_of_the_default_chunks(autojump_clock) -> None:
    a = FakeActions()
    a.add_llm("I like cats", input="hi")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Editing(instructions="x"))
        result = await session.run(user_input="hi")
    msg = result.expect.next_event().is_message(role="assistant").event().item
    assert msg.text_content == "I LIKE CATS"
