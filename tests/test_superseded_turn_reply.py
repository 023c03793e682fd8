"""A user turn whose reply is superseded by a newer turn before it is scheduled.

A turn's reply is made unscheduled, then scheduled once ``on_user_turn_completed`` returned;
when a newer turn is already waiting, it is dropped (interrupted, its message kept). With
interruptions disabled the drop raised (the reply does not allow interruptions) before the
reply was scheduled: the reply's speech waited to be scheduled forever, so the agent's drain
(a handoff, ``shutdown(drain=True)``) never ended. As in LiveKit, where interrupting it
fails once it is scheduled, such a reply plays.
"""

from __future__ import annotations

import logging

import pytest
import trio

from agents_trio import Agent
from agents_trio.testing import FakeActions, create_session


class SlowHook(Agent):
    """Takes 2 s to accept each turn: the second one arrives while the first is handled."""

    def __init__(self) -> None:
        super().__init__(instructions="You answer slowly.")

    async def on_user_turn_completed(self, turn_ctx: object, new_message: object) -> None:
        await trio.sleep(2.0)


def _two_quick_turns() -> FakeActions:
    a = FakeActions()
    a.add_user_speech(0.5, 1.5, "first question")
    a.add_llm("first answer")
    a.add_tts(1.0)
    a.add_user_speech(2.5, 3.0, "second question")
    a.add_llm("second answer")
    a.add_tts(1.0)
    return a


@pytest.mark.parametrize("interruptions", [True, False])
async def test_a_superseded_reply_never_holds_the_drain(
        interruptions: bool, autojump_clock: object, caplog: pytest.LogCaptureFixture) -> None:
    session = create_session(_two_quick_turns(),
                             turn_handling={"interruption": {"enabled": interruptions}})
    said: list[tuple[str, str]] = []
    session.on("conversation_item_added", lambda ev: said.append(
        (ev.item.role, ev.item.text_content)) if ev.item.type == "message" else None)
    drained_at: list[float] = []
    with trio.fail_after(60), caplog.at_level(logging.ERROR):
        async with session:
            await session.start(SlowHook())
            session.input.audio.push(0.1)
            await trio.sleep(10)
            with trio.move_on_after(10):
                await session.drain()
                drained_at.append(trio.current_time())
    assert drained_at, "the drain waited for a reply that was never scheduled"
    assert not [r for r in caplog.records if "user turn failed" in r.getMessage()]
    replies = [text for role, text in said if role == "assistant"]
    # both questions are kept; the first answer plays only when it cannot be interrupted
    assert [text for role, text in said if role == "user"] == ["first question",
                                                                "second question"]
    assert replies == (["second answer"] if interruptions
                       else ["first answer", "second answer"])
