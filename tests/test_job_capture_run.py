"""``session.start(agent, room=ctx.room, capture_run=True)`` in a job (the session owned by
the job, LiveKit's way): returns the RunResult of the start's first turn, as LiveKit's."""

from __future__ import annotations

import trio
import trio.testing

from agents_trio import Agent, AgentSession, JobContext, RunResult
from agents_trio.job import run_job
from agents_trio.testing import FakeActions, FakeLLM, open_fake_room


class Greeter(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Greet the user.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="say hello")


async def test_a_job_owned_start_captures_what_on_enter_says(
        autojump_clock: trio.testing.MockClock) -> None:
    a = FakeActions()
    a.add_llm("Hello! How can I help?", input="say hello", ttft=0.2, duration=0.5)
    seen: dict[str, object] = {}

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession(llm=FakeLLM(a.llm_responses))
        run = await session.start(Greeter(), room=ctx.room, capture_run=True)
        assert isinstance(run, RunResult)
        seen["done at start"] = run.done()
        with trio.fail_after(10):
            await run
        run.expect.skip_next_event_if(type="agent_handoff")
        item = run.expect.next_event().is_message(role="assistant").event().item
        seen["said"] = item.text_content
        run.expect.no_more_events()
        seen["running"] = session.state.value
        session.shutdown()

    with trio.fail_after(30):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert seen == {"done at start": False, "said": "Hello! How can I help?",
                    "running": "running"}


async def test_a_job_owned_start_without_capture_returns_none(
        autojump_clock: trio.testing.MockClock) -> None:
    seen: list[object] = []

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession(llm=FakeLLM([]))
        seen.append(await session.start(Agent(instructions="x"), room=ctx.room))
        session.shutdown()

    with trio.fail_after(30):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert seen == [None]
