"""FakeLLM records every request cheaply: consecutive requests share the items they have in
common instead of each keeping a copy of the whole chat context (issue 15, item 19: a flood
test grew quadratically)."""

from __future__ import annotations

import tracemalloc

from agents_trio.chat import ChatContext, ChatMessage
from agents_trio.testing import FakeLLM
from agents_trio.testing.actions import FakeLLMResponse


async def ask(llm: FakeLLM, ctx: ChatContext) -> str:
    async with llm.chat(chat_ctx=ctx) as stream:
        return "".join([chunk.content or "" async for chunk in stream])


def texts(call: dict) -> list[str]:
    return [item.text_content for item in call["chat_ctx"].items]


async def test_recorded_requests_show_the_context_each_request_had() -> None:
    llm = FakeLLM([FakeLLMResponse(input="c", content="C!", ttft=0, duration=0)])
    a, b, c = (ChatMessage(role="user", content=[t]) for t in "abc")
    x = ChatMessage(role="user", content=["x"])
    contexts = [[a, b], [a, b, c], [a, c], [x], [], [x, a]]
    for items in contexts:
        await ask(llm, ChatContext(list(items)))
    assert [texts(call) for call in llm.calls] == [[i.text_content for i in items]
                                                   for items in contexts]
    assert llm.calls[1]["chat_ctx"].items[-1] is c


async def test_a_recorded_request_does_not_change_when_the_caller_mutates_its_context() -> None:
    llm = FakeLLM()
    ctx = ChatContext()
    ctx.add_message(role="user", content=["first"])
    await ask(llm, ctx)
    ctx.add_message(role="user", content=["second"])
    ctx.items[0] = ChatMessage(role="user", content=["replaced"])
    await ask(llm, ctx)
    assert texts(llm.calls[0]) == ["first"]
    assert texts(llm.calls[1]) == ["replaced", "second"]


async def test_recording_a_growing_conversation_keeps_linear_memory() -> None:
    llm = FakeLLM()
    ctx = ChatContext()
    for i in range(200):   # warm up allocator pools and interned strings
        ctx.add_message(role="user", content=[f"w{i}"])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(2000):
            ctx.add_message(role="user", content=[f"m{i}"])
            await ask(llm, ctx.copy())   # the runtime gives each request its own copy
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # a copy per request keeps ~2000 lists of ~1200 references (> 19 MB); the 2000 new
    # messages themselves take about 2 MB
    assert retained < 6_000_000, retained
    assert len(llm.calls) == 2000 and len(llm.calls[-1]["chat_ctx"].items) == 2200
