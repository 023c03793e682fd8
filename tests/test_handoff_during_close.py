"""A handoff that meets the session's close: asked for just before ``shutdown()``, or while
``shutdown(drain=True)`` lets the current agent finish.

The handoff used to complete during the close: while the close waited for the user's last
words to be transcribed, the new agent started and its ``on_enter`` ran in a closing session.
As in LiveKit (which skips starting the next agent once the session is closing), a close
ends the handoffs: the current agent drains (with ``drain=True``) and exits, and the new
agent never starts.
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import Agent
from agents_trio.session import SessionState
from agents_trio.testing import FakeActions, create_session


class Hooked(Agent):
    def __init__(self, name: str, log: list[str], greeting: str | None = None) -> None:
        super().__init__(instructions=f"You are {name}.", id=name)
        self.log = log
        self.greeting = greeting

    async def on_enter(self) -> None:
        self.log.append(f"{self.id}.enter")
        if self.greeting:
            self.session.say(self.greeting)

    async def on_exit(self) -> None:
        self.log.append(f"{self.id}.exit")


def _talking_session() -> tuple[object, FakeActions]:
    """The first agent greets for 3 s (uninterruptible: the user talks over it); the user
    talks on past the close, so the close waits for their last words."""
    a = FakeActions()
    a.add_tts(3.0, input="Hello there.")
    a.add_user_speech(0.2, 20.0, "I keep talking and talking", stt_delay=0.5)
    return create_session(a, turn_handling={"interruption": {"enabled": False}}), a


async def _run(order: str) -> tuple[list[str], list[str]]:
    log: list[str] = []
    session, _ = _talking_session()
    heard: list[str] = []
    session.on("conversation_item_added", lambda ev: heard.append(ev.item.text_content)
               if ev.item.type == "message" and ev.item.role == "assistant" else None)
    with trio.fail_after(30):
        async with session:
            await session.start(Hooked("first", log, "Hello there."))
            session.input.audio.push(0.1)
            await trio.sleep(0.5)   # the greeting plays
            if order == "handoff-then-shutdown":
                session.update_agent(Hooked("second", log))
                session.shutdown(drain=True)
            else:  # the handoff comes while the shutdown lets the greeting finish
                session.shutdown(drain=True)
                await trio.sleep(0.5)
                session.update_agent(Hooked("second", log))
            while session.state is not SessionState.CLOSED:
                await trio.sleep(0.1)
    return log, heard


async def test_a_handoff_in_progress_when_the_session_shuts_down_is_not_completed(
        autojump_clock) -> None:
    log, heard = await _run("handoff-then-shutdown")
    assert log == ["first.enter", "first.exit"]
    assert heard == ["Hello there."]   # the drain let the greeting finish


async def test_a_handoff_asked_for_while_the_shutdown_drains_is_not_applied(
        autojump_clock) -> None:
    log, heard = await _run("shutdown-then-handoff")
    assert log == ["first.enter", "first.exit"]
    assert heard == ["Hello there."]


@settings(database=None, deadline=None, max_examples=100)
@given(close=st.sampled_from(["shutdown", "shutdown-drain", "aclose"]),
       close_at=st.integers(0, 14).map(lambda q: q / 4),
       _=st.random_module())
def test_a_close_at_any_moment_of_a_handoff_starts_no_agent_and_pairs_the_hooks(
        close: str, close_at: float, _: object) -> None:
    """A handoff asked for right after the start (the first agent greets for a second
    first), and a close at any moment after: the session closes once, no agent enters once
    the close began, and every agent that entered exits once."""
    log: list[str] = []
    entered_while_closing: list[str] = []
    close_began = False

    class Watched(Hooked):
        async def on_enter(self) -> None:
            if close_began:
                entered_while_closing.append(self.id)
            await super().on_enter()

    a = FakeActions()
    a.add_tts(1.0, input="Hello there.")
    # the user talks on past the close: the close waits for their last words
    a.add_user_speech(0.2, 20.0, "I keep talking and talking", stt_delay=0.5)
    session = create_session(a, turn_handling={"interruption": {"enabled": False}})
    closes: list[object] = []
    session.on("close", closes.append)

    async def main() -> None:
        nonlocal close_began
        with trio.fail_after(60):
            async with session:
                await session.start(Watched("first", log, "Hello there."))
                session.input.audio.push(0.1)
                session.update_agent(Watched("second", log))
                await trio.sleep(close_at)
                close_began = True
                if close == "aclose":
                    await session.aclose()
                else:
                    session.shutdown(drain=close == "shutdown-drain")
                    while session.state is not SessionState.CLOSED:
                        await trio.sleep(0.05)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert len(closes) == 1
    assert entered_while_closing == []
    assert log in (["first.enter", "first.exit"],
                   ["first.enter", "first.exit", "second.enter", "second.exit"]), log
