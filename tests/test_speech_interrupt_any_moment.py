"""Interrupting speeches at any moment: while queued behind another, while playing, exactly as
they finish, one or both, or the whole session. (An attack that found nothing; kept as a
regression test.) Every handle ends, and the history agrees with it: a speech that reports
itself interrupted is either absent (cut before any audio) or recorded as interrupted, and a
speech that was not interrupted is recorded whole."""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import Agent
from agents_trio.testing import FakeActions, create_session


@settings(database=None, deadline=None, max_examples=60)
@given(at=st.integers(0, 30).map(lambda q: q / 10),
       which=st.sampled_from(["first", "second", "both", "session"]),
       _=st.random_module())
def test_every_handle_ends_and_the_history_agrees_with_it(at: float, which: str,
                                                          _: object) -> None:
    a = FakeActions()
    a.add_tts(1.0, input="Alpha one.")
    a.add_tts(1.0, input="Bravo two.")
    session = create_session(a)
    recorded: dict[str, bool] = {}
    session.on("conversation_item_added", lambda ev: recorded.__setitem__(
        ev.item.text_content, ev.item.interrupted) if ev.item.type == "message" else None)
    interrupted: dict[str, bool] = {}

    async def main() -> None:
        with trio.fail_after(60):
            async with session:
                await session.start(Agent(instructions="You talk."))
                first, second = session.say("Alpha one."), session.say("Bravo two.")
                await trio.sleep(at)
                if which in ("first", "both"):
                    first.interrupt()
                if which in ("second", "both"):
                    second.interrupt()
                if which == "session":
                    await session.interrupt()
                with trio.fail_after(10):
                    await first
                    await second
                interrupted.update({"Alpha one.": first.interrupted,
                                    "Bravo two.": second.interrupted})

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    for text, was_interrupted in interrupted.items():
        if text in recorded:
            assert recorded[text] == was_interrupted, (recorded, interrupted)
        else:
            assert was_interrupted, (recorded, interrupted)
