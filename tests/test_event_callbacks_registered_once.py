"""``session.on`` registers a callback once per event, as LiveKit's emitter does (its
callbacks are the keys of a dict): an agent that registers its handler in ``on_enter`` and is
entered again (a handoff back to it) must not have it called twice per event; ``off`` then
removes it."""

from __future__ import annotations

import trio

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeActions, FakeLLM


async def test_a_callback_registered_twice_is_called_once_per_event(autojump_clock):
    a = FakeActions()
    a.add_llm("one", input="first")
    a.add_llm("two", input="second")
    reference: list[object] = []   # registered once
    with_event: list[object] = []
    without_event: list[str] = []

    def on_item(ev: object) -> None:
        with_event.append(ev)

    def on_item_no_arg() -> None:
        without_event.append("called")

    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        session.on("conversation_item_added", reference.append)
        for _ in range(2):
            session.on("conversation_item_added", on_item)
            session.on("conversation_item_added", on_item_no_arg)
        await session.start(Agent(instructions="x"))
        with trio.fail_after(10):
            await session.run(user_input="first")
        assert len(reference) >= 2   # the user's message and the reply
        assert with_event == reference
        assert len(without_event) == len(reference)
        session.off("conversation_item_added", on_item)
        session.off("conversation_item_added", on_item_no_arg)
        before = len(reference)
        with trio.fail_after(10):
            await session.run(user_input="second")
        assert len(reference) > before
        assert len(with_event) == len(without_event) == before   # one off() removed each
