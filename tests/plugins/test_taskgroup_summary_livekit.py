"""TaskGroup's chat summary sends the same request as LiveKit Agents 1.8.9's and leaves the
same context: both sides run with ``FakePluginLLM`` recording what it is asked (LiveKit's
``ChatContext._summarize`` under ``asyncio.run``, ours on Trio through the plugin bridge) and
the requests are compared message by message (the prompt wording is our own, so the system
message is compared by its place and role only)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents", reason="compares with LiveKit's own summary")

from livekit.agents import llm as lk_llm

import agents_trio
from agents_trio import AgentSession, AgentTask
from agents_trio.chat import AgentHandoff, ChatContext, FunctionCall, FunctionCallOutput
from agents_trio.chat_summary import summarize_chat_ctx
from agents_trio.model_resolution import resolve_model
from agents_trio.testing.livekit_fakes import FakePluginLLM
from agents_trio.workflows import TaskGroup

SUMMARY = "Ann booked Tuesday."


def _shape(request: dict[str, Any]) -> dict[str, Any]:
    items = request["chat_ctx"].items
    return {"messages": [(i.type, getattr(i, "role", None)) for i in items],
            "texts": [i.text_content for i in items[1:]],
            "tools": request["tools"], "tool_choice": request["tool_choice"]}


def _livekit_summary(items: list[lk_llm.ChatItem]) -> tuple[dict[str, Any], list[Any]]:
    fake = FakePluginLLM(default=SUMMARY, ttft=0, word_delay=0)

    async def run() -> lk_llm.ChatContext:
        return await lk_llm.ChatContext(items)._summarize(llm_v=fake, keep_last_turns=0)

    result = asyncio.run(run())
    (request,) = fake.requests
    return _shape(request), [_item(i) for i in result.items]


def _item(item: Any) -> tuple[Any, ...]:
    if item.type == "message":
        return (item.type, item.role, item.text_content, item.extra.get("is_summary"))
    return (item.type,)


def test_the_summary_request_and_result_match_livekits() -> None:
    lk_items: list[lk_llm.ChatItem] = [
        lk_llm.ChatMessage(role="system", content=["be kind"]),
        lk_llm.ChatMessage(role="assistant", content=["<chat_history_summary>\nold\n"
                                                      "</chat_history_summary>"],
                           extra={"is_summary": True}),
        lk_llm.AgentHandoff(old_agent_id="a", new_agent_id="b"),
        lk_llm.ChatMessage(role="user", content=["I am Ann"]),
        lk_llm.ChatMessage(role="assistant", content=["  "]),
        lk_llm.FunctionCall(call_id="c1", name="book", arguments='{"day": "tue"}'),
        lk_llm.FunctionCallOutput(call_id="c1", name="book", output="booked",
                                  is_error=False),
        lk_llm.FunctionCall(call_id="c2", name="pay", arguments="{}"),
        lk_llm.FunctionCallOutput(call_id="c2", name="pay", output="declined", is_error=True),
        lk_llm.ChatMessage(role="assistant", content=["Booked for Tuesday."]),
    ]
    ours = ChatContext()
    ours.add_message(role="system", content="be kind")
    ours.add_message(role="assistant", content="<chat_history_summary>\nold\n"
                     "</chat_history_summary>", extra={"is_summary": True})
    ours.insert(AgentHandoff(old_agent_id="a", new_agent_id="b"))
    ours.add_message(role="user", content="I am Ann")
    ours.add_message(role="assistant", content="  ")
    ours.insert(FunctionCall(call_id="c1", name="book", arguments='{"day": "tue"}'))
    ours.insert(FunctionCallOutput(call_id="c1", name="book", output="booked"))
    ours.insert(FunctionCall(call_id="c2", name="pay", arguments="{}"))
    ours.insert(FunctionCallOutput(call_id="c2", name="pay", output="declined", is_error=True))
    ours.add_message(role="assistant", content="Booked for Tuesday.")
    fake = FakePluginLLM(default=SUMMARY, ttft=0, word_delay=0)

    async def run() -> ChatContext:
        async with agents_trio.open_bridge():
            llm = resolve_model("test", "llm", fake)
            return await summarize_chat_ctx(ours, llm)  # type: ignore[arg-type]

    result = trio.run(run)
    (request,) = fake.requests
    expected_request, expected_items = _livekit_summary(lk_items)
    assert _shape(request) == expected_request
    # the comparison covers the error form
    assert '<function_call_output call_id="c2" name="pay">\n<error>' in expected_request[
        "texts"][-1]
    assert [_item(i) for i in result.items] == expected_items


async def test_a_task_groups_summary_request_matches_livekits(
        autojump_clock: trio.testing.MockClock) -> None:
    class Quick(AgentTask[str]):
        def __init__(self) -> None:
            super().__init__(instructions="quick")

        async def on_enter(self) -> None:
            self.session.say("quick question")
            self.complete("fine")

    class Host(agents_trio.Agent):
        async def on_enter(self) -> None:
            group = TaskGroup()
            group.add(Quick, id="quick", description="quick")
            await group
            contexts.append(group.chat_ctx)

    contexts: list[ChatContext] = []
    fake = FakePluginLLM(default=SUMMARY, ttft=0.1, word_delay=0)
    async with AgentSession(llm=fake) as session:
        await session.start(Host(instructions="host"))
        with trio.fail_after(10):
            while not contexts:
                await trio.sleep(0.1)
    summary_requests = [r for r in fake.requests if r["chat_ctx"].items
                        and "Conversation to summarize" in (
                            r["chat_ctx"].items[-1].text_content or "")]
    (request,) = summary_requests
    # LiveKit's side runs on asyncio, in a thread of its own (this test is on Trio)
    expected_request, expected_items = await trio.to_thread.run_sync(_livekit_summary, [
        lk_llm.ChatMessage(role="system", content=["*empty*"]),
        lk_llm.ChatMessage(role="assistant", content=["quick question"])])
    assert _shape(request) == expected_request
    # the group's context also holds its steps' config updates (kept, as LiveKit keeps them)
    messages = [_item(i) for i in contexts[0].items if i.type == "message"]
    assert messages == expected_items
    assert {i.type for i in contexts[0].items} == {"message", "agent_config_update"}
