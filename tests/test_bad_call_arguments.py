"""A call with a wrong argument fails at the call, with a clear error, and loses nothing.

Found by calling the session's public methods the way a careless caller (or an LLM-written
tool) would: ``update_agent("x")`` was accepted and then killed the whole session from its
handoff worker; ``say(5)``, ``generate_reply(tool_choice="bogus")``, a list as ``chat_ctx``,
``allow_interruptions="no"`` were accepted and failed (or did the wrong thing) later, inside
the speech; ``generate_reply(user_input=5)`` raised an ``AttributeError`` about ``strip``.
Now each raises ``TypeError``/``ValueError`` naming the argument before anything is
scheduled, and the session goes on answering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import trio

from agents_trio import Agent, AgentSession
from agents_trio.testing import FakeActions, FakeLLM

BAD_CALLS: dict[str, tuple[Callable[[AgentSession[Any]], object], type[Exception], str]] = {
    "say(None)": (lambda s: s.say(None), TypeError, "text"),
    "say(5)": (lambda s: s.say(5), TypeError, "text"),
    "say(a list)": (lambda s: s.say(["a", "b"]), TypeError, "text"),
    "say(allow_interruptions='no')": (lambda s: s.say("hi", allow_interruptions="no"),
                                      TypeError, "allow_interruptions"),
    "say(add_to_chat_ctx='no')": (lambda s: s.say("hi", add_to_chat_ctx="no"),
                                  TypeError, "add_to_chat_ctx"),
    "generate_reply(tool_choice='bogus')": (lambda s: s.generate_reply(tool_choice="bogus"),
                                            ValueError, "tool_choice"),
    "generate_reply(tool_choice=5)": (lambda s: s.generate_reply(tool_choice=5),
                                      TypeError, "tool_choice"),
    "generate_reply(tool_choice={'name': 'f'})": (
        lambda s: s.generate_reply(tool_choice={"name": "f"}), ValueError, "tool_choice"),
    "generate_reply(instructions=5)": (lambda s: s.generate_reply(instructions=5),
                                       TypeError, "instructions"),
    "generate_reply(user_input=5)": (lambda s: s.generate_reply(user_input=5),
                                     TypeError, "user_input"),
    "generate_reply(chat_ctx=[])": (lambda s: s.generate_reply(chat_ctx=[]),
                                    TypeError, "chat_ctx"),
    "generate_reply(allow_interruptions='no')": (
        lambda s: s.generate_reply(allow_interruptions="no"), TypeError, "allow_interruptions"),
    "update_agent('x')": (lambda s: s.update_agent("x"), TypeError, "Agent"),
    "update_agent(None)": (lambda s: s.update_agent(None), TypeError, "Agent"),
    "update_agent(the Agent class)": (lambda s: s.update_agent(Agent), TypeError, "Agent"),
}


@pytest.mark.parametrize("name", list(BAD_CALLS))
async def test_a_bad_argument_fails_at_the_call_and_the_session_goes_on(name, autojump_clock):
    call, error, word = BAD_CALLS[name]
    a = FakeActions()
    a.add_llm("fine", input="after")
    agent = Agent(instructions="x")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(agent)
        with pytest.raises(error, match=word):
            call(session)
        await trio.sleep(2)
        assert session.current_agent is agent
        with trio.fail_after(10):
            result = await session.run(user_input="after")
        assert [e.item.text_content for e in result.events if e.type == "message"] == ["fine"]


@pytest.mark.parametrize("choice", ["auto", "required", "none",
                                    {"type": "function", "function": {"name": "lookup"}}])
async def test_the_tool_choices_livekit_names_are_accepted(choice, autojump_clock):
    a = FakeActions()
    a.add_llm("fine", input="")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        await session.start(Agent(instructions="x"))
        session.generate_reply(tool_choice=choice)


@pytest.mark.parametrize("bad", ["x", None, Agent], ids=["a str", "None", "the Agent class"])
async def test_start_with_something_not_an_agent_fails_at_the_call(bad, autojump_clock):
    # it failed inside the session's nursery with an AttributeError about `id`, in a group
    a = FakeActions()
    a.add_llm("fine", input="after")
    async with AgentSession(llm=FakeLLM(a.llm_responses)) as session:
        with pytest.raises(TypeError, match="Agent"):
            await session.start(bad)
        await session.start(Agent(instructions="x"))   # nothing was started: this one runs
        with trio.fail_after(10):
            result = await session.run(user_input="after")
        assert [e.item.text_content for e in result.events if e.type == "message"] == ["fine"]
