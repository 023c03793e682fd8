"""A speech handle's done callbacks are the user's code: one that raises is logged and the
others still run, as asyncio logs a raising future callback in LiveKit; the session goes on.
(Before, the error escaped from the activity and closed the whole session.) What cannot be a
callback fails at ``add_done_callback``."""

from __future__ import annotations

import logging

import pytest
import trio

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeActions, FakeLLM


def _raises(_handle: object) -> None:
    raise ZeroDivisionError("the user's callback")


@pytest.mark.parametrize("bad", [_raises, lambda: None], ids=["raises", "takes no argument"])
async def test_a_failing_done_callback_is_logged_and_the_session_goes_on(bad, autojump_clock,
                                                                         caplog):
    a = FakeActions()
    a.add_llm("fine", input="after")
    ran: list[str] = []
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Agent(instructions="x"))
        handle = session.say("hello")
        handle.add_done_callback(bad)
        handle.add_done_callback(lambda h: ran.append(h.id))
        with trio.fail_after(10):
            await handle
        assert ran == [handle.id]   # the one after the failing one ran
        with trio.fail_after(10):
            result = await session.run(user_input="after")
        assert [e.item.text_content for e in result.events if e.type == "message"] == ["fine"]
        # added once done: called at once, and its failure is logged the same way
        handle.add_done_callback(bad)
    logged = [r for r in caplog.records if r.levelno == logging.ERROR and "done callback" in
              r.getMessage()]
    assert len(logged) == 2, caplog.text


async def test_what_is_not_callable_fails_at_add_done_callback(autojump_clock):
    async with AgentSession(llm=FakeLLM([])) as session:
        await session.start(Agent(instructions="x"))
        handle = session.say("hello")
        with pytest.raises(TypeError, match="callable"):
            handle.add_done_callback(5)
        with pytest.raises(TypeError, match="allow_interruptions"):
            handle.allow_interruptions = "no"
        with trio.fail_after(10):
            await handle
