"""Handoffs queued one behind another while each agent's ``on_enter`` awaits a chain of
AgentTasks (each task's ``on_enter`` awaits the next one), with a close at any moment.

A property over the chain's depth, the number of queued handoffs, the goodbyes and the
close's time, with Trio's scheduler seeded per example. What must hold:

- the history's handoffs form one chain: each leaves the agent the one before entered;
- every awaited task answers its awaiter once (a result or a ``ToolError``), also the
  tasks a handoff replaces and those the close cancels (or the close cancels the awaiting
  ``on_enter`` itself);
- an awaiter told that its task ended that awaits a new one is answered too (the new task
  is refused while its agent leaves);
- a goodbye said in ``on_exit`` while the session is not closed yet can be said;
- the close ends within its bound and leaves no speech handle pending;
- without a close, the last agent asked for ends up holding the floor (under its tasks).
"""

from __future__ import annotations

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from agents_trio import Agent, AgentSession, AgentTask, SpeechHandle, ToolError
from agents_trio.testing import (FakeAudioOutput, FakeLLM, FakeLLMResponse, FakeTTS,
                                 FakeTTSResponse)
from test_adversarial import PROPERTY


class Log:
    """What the hooks did: awaits and their answers, goodbyes and whether they could be
    said, and the speech handles made."""

    def __init__(self, goodbyes: bool, retries: int = 0) -> None:
        self.goodbyes = goodbyes
        self.retries = retries  # how many times an awaiter told ToolError awaits a new task
        self.awaited: list[str] = []
        self.answered: list[str] = []
        self.refused_goodbyes: list[tuple[str, str]] = []
        self.handles: list[SpeechHandle] = []
        self.entered: list[str] = []
        self.closing = False

    def goodbye(self, agent: Agent) -> None:
        if not self.goodbyes:
            return
        try:
            self.handles.append(agent.session.say(f"{agent.id} says goodbye"))
        except RuntimeError as e:
            if not self.closing:
                self.refused_goodbyes.append((agent.id, str(e)))

    async def await_chain(self, agent: Agent, depth: int, name: str) -> None:
        if depth == 0:
            return
        for attempt in range(self.retries + 1):
            task = Step(self, depth - 1, f"{name}.t{depth}")
            self.awaited.append(task.id)
            try:
                await task
                self.answered.append(task.id)
                return
            except ToolError:
                self.answered.append(task.id)
            except trio.Cancelled:
                if self.closing:  # the close ends on_enter: an answer too
                    self.answered.append(task.id)
                raise


class Step(AgentTask[str]):
    """Speaks, then awaits the next task of the chain; never completes by itself."""

    def __init__(self, log: Log, depth: int, name: str) -> None:
        super().__init__(instructions=f"step {name}", id=name)
        self.log, self.depth = log, depth

    async def on_enter(self) -> None:
        self.log.handles.append(self.session.generate_reply(instructions=f"ask as {self.id}"))
        await self.log.await_chain(self, self.depth, self.id)

    async def on_exit(self) -> None:
        self.log.goodbye(self)


class Seller(Agent):
    def __init__(self, log: Log, depth: int, name: str) -> None:
        super().__init__(instructions=f"seller {name}", id=name)
        self.log, self.depth = log, depth

    async def on_enter(self) -> None:
        self.log.entered.append(self.id)
        self.log.handles.append(self.session.generate_reply(instructions=f"greet as {self.id}"))
        await self.log.await_chain(self, self.depth, self.id)

    async def on_exit(self) -> None:
        self.log.goodbye(self)


class Front(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="front", id="front")


def _chain_breaks(session: AgentSession) -> list[str]:
    handoffs = [i for i in session.history.items if i.type == "agent_handoff"]
    breaks = []
    for before, after in zip(handoffs, handoffs[1:]):
        if after.old_agent_id != before.new_agent_id:
            breaks.append(f"{before.old_agent_id}->{before.new_agent_id} then "
                          f"{after.old_agent_id}->{after.new_agent_id}")
    return breaks


def _replies(handoffs: int, depth: int, ttft: float, duration: float) -> list[FakeLLMResponse]:
    """Each agent's and task's opening reply, taking ``ttft`` + ``duration`` to generate."""
    out = []
    for k in range(handoffs):
        name = f"s{k}"
        out.append(FakeLLMResponse(content=f"hello from {name}", input=f"greet as {name}",
                                   ttft=ttft, duration=duration))
        for d in range(depth, 0, -1):
            name = f"{name}.t{d}"
            out.append(FakeLLMResponse(content=f"question from {name}", input=f"ask as {name}",
                                       ttft=ttft, duration=duration))
    return out


def _voices(replies: list[FakeLLMResponse], audio: float) -> FakeTTS:
    """``audio`` seconds of speech for every reply and every goodbye."""
    ids = [r.input.split(" as ")[1] for r in replies]
    texts = [*(r.content for r in replies), *(f"{i} says goodbye" for i in ids)]
    return FakeTTS([FakeTTSResponse(input=t, audio_duration=audio, ttfb=0.1) for t in texts])


async def _play(depth: int, handoffs: int, goodbyes: bool, gap: float,
                close_at: float | None, grace: float, ttft: float, duration: float,
                audio: float | None, retries: int = 0, run_at: float | None = None) -> None:
    log = Log(goodbyes, retries)
    runs: list[str] = []
    sellers = [Seller(log, depth, f"s{k}") for k in range(handoffs)]
    replies = _replies(handoffs, depth, ttft, duration)
    session = AgentSession(llm=FakeLLM(replies), close_grace=grace,
                           tts=_voices(replies, audio) if audio is not None else None,
                           aec_warmup_duration=None)
    if audio is not None:
        session.output.audio = FakeAudioOutput()
    async def run_input(at: float) -> None:
        await trio.sleep_until(at)
        try:
            await session.run(user_input="are you there")
            runs.append("returned")
        except Exception as e:  # refused or ended by the close: answered all the same
            runs.append(f"{type(e).__name__}: {e}")

    with trio.fail_after(120):
        async with session, trio.open_nursery() as nursery:
            await session.start(Front())
            t0 = trio.current_time()
            if run_at is not None:
                nursery.start_soon(run_input, t0 + run_at)
            for seller in sellers:
                session.update_agent(seller)
                if gap:
                    await trio.sleep(gap)
            if close_at is None:
                while sellers[-1].id not in log.entered:  # every handoff done (fail_after)
                    await trio.sleep(0.5)
                await trio.sleep(5)
                floor = session.current_agent
                while isinstance(floor, Step):  # the tasks of the last seller's chain
                    floor = next(a for a in [*sellers] if floor.id.startswith(a.id + "."))
                assert floor is sellers[-1], (floor.id, [i for i in session.history.items
                                                         if i.type == "agent_handoff"])
            else:
                await trio.sleep_until(t0 + close_at)
            if close_at is None and run_at is not None:
                with trio.fail_after(60):  # a run with time to settle returns
                    while not runs:
                        await trio.sleep(0.5)
            log.closing = True
            asked = trio.current_time()
            await session.aclose()
            took = trio.current_time() - asked
    # the run (if any) ended: the nursery waited for it, within fail_after
    # a goodbye per stack level, each within the grace, and the task's return: generous
    assert took <= grace * (2 * depth + 3) + 1.0, took
    assert not _chain_breaks(session), _chain_breaks(session)
    assert sorted(log.awaited) == sorted(log.answered), (log.awaited, log.answered)
    assert not log.refused_goodbyes, log.refused_goodbyes
    assert all(h.done() for h in log.handles), [h for h in log.handles if not h.done()]


@settings(PROPERTY, max_examples=150)
@given(depth=st.integers(0, 3), handoffs=st.integers(1, 3), goodbyes=st.booleans(),
       gap=st.sampled_from([0.0, 0.0, 0.05, 0.3, 1.0]),
       close_at=st.none() | st.floats(0.0, 4.0).map(lambda t: round(t, 2)),
       grace=st.sampled_from([0.3, 1.0, 3.0]), ttft=st.sampled_from([0.0, 0.1, 0.5]),
       duration=st.sampled_from([0.0, 0.3, 1.5]),
       audio=st.none() | st.sampled_from([0.2, 1.0, 2.5]), _=st.random_module())
def test_queued_handoffs_over_on_enter_task_chains(depth: int, handoffs: int, goodbyes: bool,
                                                   gap: float, close_at: float | None,
                                                   grace: float, ttft: float, duration: float,
                                                   audio: float | None, _: object) -> None:
    trio.run(_play, depth, handoffs, goodbyes, gap, close_at, grace, ttft, duration, audio,
             clock=trio.testing.MockClock(autojump_threshold=0))


@settings(PROPERTY, max_examples=100)
@given(depth=st.integers(1, 2), handoffs=st.integers(1, 2), goodbyes=st.booleans(),
       gap=st.sampled_from([0.0, 0.3]),
       close_at=st.none() | st.floats(0.0, 4.0).map(lambda t: round(t, 2)),
       grace=st.sampled_from([0.3, 3.0]), ttft=st.sampled_from([0.0, 0.5]),
       duration=st.sampled_from([0.0, 1.5]), audio=st.none() | st.sampled_from([0.2, 2.5]),
       retries=st.integers(1, 2), _=st.random_module())
def test_an_awaiter_that_retries_its_replaced_task(depth: int, handoffs: int, goodbyes: bool,
                                                   gap: float, close_at: float | None,
                                                   grace: float, ttft: float, duration: float,
                                                   audio: float | None, retries: int,
                                                   _: object) -> None:
    """Hostile code: told its task ended (``ToolError``), the awaiter awaits a new one."""
    trio.run(_play, depth, handoffs, goodbyes, gap, close_at, grace, ttft, duration, audio,
             retries, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(PROPERTY, max_examples=100)
@given(depth=st.integers(0, 2), handoffs=st.integers(1, 2), goodbyes=st.booleans(),
       gap=st.sampled_from([0.0, 0.3]),
       close_at=st.none() | st.floats(0.0, 4.0).map(lambda t: round(t, 2)),
       grace=st.sampled_from([0.3, 3.0]), ttft=st.sampled_from([0.0, 0.5]),
       duration=st.sampled_from([0.0, 1.5]), audio=st.none() | st.sampled_from([0.2, 2.5]),
       run_at=st.floats(0.0, 4.0).map(lambda t: round(t, 2)), _=st.random_module())
def test_a_run_while_handoffs_replace_tasks_is_answered(depth: int, handoffs: int,
                                                        goodbyes: bool, gap: float,
                                                        close_at: float | None, grace: float,
                                                        ttft: float, duration: float,
                                                        audio: float | None, run_at: float,
                                                        _: object) -> None:
    """``session.run()`` at any moment of the handoffs: it returns (or is refused) once the
    conversation waits for the user, and it never outlives the close."""
    trio.run(_play, depth, handoffs, goodbyes, gap, close_at, grace, ttft, duration, audio,
             0, run_at, clock=trio.testing.MockClock(autojump_threshold=0))
