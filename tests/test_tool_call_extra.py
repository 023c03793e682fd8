"""A tool call's provider data (``extra``: e.g. Google's thought signature, which the provider
needs back with the call) is kept on the history's ``FunctionCall``, as LiveKit keeps it."""

from __future__ import annotations

import trio

from agents_trio import Agent, AgentSession, FunctionToolCall, function_tool
from agents_trio.testing import FakeActions, FakeLLM

SIGNATURE = {"google": {"thought_signature": "c2lnbmF0dXJl"}}


@function_tool
async def lookup() -> str:
    """Look it up."""
    return "found"


async def test_a_tool_calls_provider_data_reaches_the_history(autojump_clock) -> None:
    actions = FakeActions()
    actions.add_llm("", tool_calls=[FunctionToolCall(name="lookup", arguments="{}",
                                                     call_id="c1", extra=SIGNATURE)],
                    input="look it up")
    actions.add_llm("It is found.", input="found")
    async with AgentSession(llm=FakeLLM(actions.llm_responses)) as session:
        await session.start(Agent(instructions="You look things up.", tools=[lookup]))
        with trio.fail_after(30):
            await session.run(user_input="look it up")
    (call,) = [i for i in session.history.items if i.type == "function_call"]
    assert call.call_id == "c1" and call.extra == SIGNATURE
