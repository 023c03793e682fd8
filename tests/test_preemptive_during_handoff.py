"""Preemptive generation meeting a handoff, and the user resuming speech around the end of
their turn.

A final transcript arriving while the agent drains for a handoff (its ``on_exit`` still
running) started a preemptive reply: the agent took no new turn, so nothing ever used or
discarded it, and the drain waited for it for ever (the next agent never started). As in
LiveKit, no preemptive reply starts once new turns are blocked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import Agent
from agents_trio.testing import FakeActions, FakeLLM, create_session


class SlowExit(Agent):
    """Its on_exit takes a second: the drain for a handoff is still running meanwhile."""

    def __init__(self) -> None:
        super().__init__(instructions="You are the first agent.", id="first")

    async def on_exit(self) -> None:
        await trio.sleep(1.0)


class Second(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the second agent.", id="second")
        self.entered = trio.Event()

    async def on_enter(self) -> None:
        self.entered.set()


class OpenRequests(FakeLLM):
    """A FakeLLM that counts its requests still open."""

    def __init__(self, inner: FakeLLM) -> None:
        super().__init__(inner.responses)
        self.open = 0

    @asynccontextmanager
    async def chat(self, **kwargs: Any) -> AsyncIterator[Any]:
        self.open += 1
        try:
            async with super().chat(**kwargs) as stream:
                yield stream
        finally:
            self.open -= 1


def _script(second_speech_at: float | None = None) -> FakeActions:
    a = FakeActions()
    a.add_user_speech(0.5, 2.0, "Hello there", stt_delay=0.1)   # final transcript at 2.1
    if second_speech_at is not None:
        a.add_user_speech(second_speech_at, second_speech_at + 1.0, "and more", stt_delay=0.1)
    for said in ("Hello there", "and more", "Hello there and more"):
        a.add_llm(f"reply to {said}", input=said, ttft=0.2, duration=1.0)
        a.add_tts(1.0, input=f"reply to {said}")
    return a


async def test_a_final_transcript_during_a_handoffs_drain_does_not_hold_the_handoff(
        autojump_clock) -> None:
    session = create_session(_script(), turn_handling={"preemptive_generation": {
        "enabled": True}})
    async with session:
        await session.start(SlowExit())
        session.input.audio.push(0.1)
        await trio.sleep(1.5)   # the user is speaking
        second = Second()
        session.update_agent(second)
        with trio.fail_after(5):
            await second.entered.wait()


@settings(database=None, deadline=None, max_examples=150)
@given(gap=st.integers(6, 14).map(lambda q: q / 10),
       handoff_at=st.one_of(st.none(), st.integers(15, 40).map(lambda q: q / 10)),
       _=st.random_module())
def test_preemptive_replies_around_a_resumed_turn_and_a_handoff(
        gap: float, handoff_at: float | None, _: object) -> None:
    """The user resumes speaking ``gap`` after their first words (the end of the turn, when
    the preemptive reply is used, is at 0.5; the fake VAD needs its 0.5 s of silence between
    two speeches), with a handoff at any moment or none: the handoff completes, no
    message is answered twice, no more replies than user messages, and no LLM request is
    left running once the conversation is over."""
    session = create_session(_script(2.0 + gap), turn_handling={"preemptive_generation": {
        "enabled": True}})
    llm = OpenRequests(session.llm)
    session.llm = llm
    said: list[tuple[str, str | None]] = []
    session.on("conversation_item_added", lambda ev: said.append(
        (ev.item.role, ev.item.text_content)) if ev.item.type == "message" else None)

    async def main() -> None:
        with trio.fail_after(60):
            async with session:
                await session.start(Agent(instructions="You are the first agent.", id="first"))
                session.input.audio.push(0.1)
                if handoff_at is not None:
                    await trio.sleep(handoff_at)
                    second = Second()
                    session.update_agent(second)
                    await trio.sleep(12 - handoff_at)
                    assert second.entered.is_set(), said
                else:
                    await trio.sleep(12)
                assert llm.open == 0, said

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    users = [text for role, text in said if role == "user"]
    replies = [text for role, text in said if role == "assistant"]
    assert len(set(replies)) == len(replies), said
    assert len(replies) <= len(users), said
