"""An ``on_enter`` that asks for a greeting and then awaits an AgentTask at once: the greeting
plays first, whatever order Trio wakes the tasks in.

Found by the run property of ``test_handoffs_over_on_enter_tasks.py``: the parent's pause
held the speeches it found queued (only the one already playing finished first), so a
greeting the scheduler had not taken yet waited for the task to return. A ``session.run()``
watching that greeting then never returned while the task waited for the user. LiveKit's
pause plays out the queue first; so does this one now.
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import Agent, AgentSession, AgentTask, RunContext, function_tool
from agents_trio.testing import FakeLLM, FakeLLMResponse
from test_adversarial import PROPERTY


class Ask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="ask", id="ask")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask the question")

    @function_tool
    async def answer(self, ctx: RunContext, value: str) -> None:
        """Record the answer.

        Args:
            value: The answer
        """
        self.complete(value)


class Greeter(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="greeter", id="greeter")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet")
        await Ask()


async def _play() -> None:
    llm = FakeLLM([FakeLLMResponse(content="hello there", input="greet", ttft=0.2,
                                   duration=1.0),
                   FakeLLMResponse(content="what is your name?", input="ask the question")])
    async with AgentSession(llm=llm) as session:
        with trio.fail_after(30):
            run = await session.start(Greeter(), capture_run=True)
            assert run is not None
            await run  # the start's run settles: the task waits for the user
        said = [(i.type, i.text_content if i.type == "message" else i.new_agent_id)
                for i in session.history.items if i.type in ("message", "agent_handoff")]
        assert said == [("agent_handoff", "greeter"), ("message", "hello there"),
                        ("agent_handoff", "ask"), ("message", "what is your name?")], said


@settings(PROPERTY, max_examples=30)
@given(st.random_module())  # seeds Trio's scheduler (registered with Hypothesis) per example
def test_the_greeting_asked_for_before_awaiting_a_task_plays_first(_: object) -> None:
    trio.run(_play, clock=trio.testing.MockClock(autojump_threshold=0))
