"""A ``session.run()`` issued while the agents keep handing off to one another.

What LiveKit does (livekit-agents 1.8.9, ``livekit/agents/voice``):

- ``AgentSession.run`` (agent_session.py:855-874) makes the run and calls ``generate_reply``
  at once, which gives the input to the current activity unless its scheduling is paused
  (agent_session.py:1638). ``AgentActivity._generate_reply`` schedules the speech at once
  (agent_activity.py:1901-1902) and the reply task commits the user message as soon as the
  speech is scheduled (agent_activity.py:3746-3748).
- A tool that is still running does not hold the queue: the reply that called it marks its
  generation done before waiting for the tool (agent_activity.py:4023), so the scheduling
  loop authorizes the next queued speech (agent_activity.py:2050-2078).
- When the tool returns an agent, ``update_agent`` is called (agent_activity.py:4110-4112)
  and the tool reply is queued behind what is already there (``force=True``,
  agent_activity.py:4179-4181). The old activity's ``drain`` then waits for its scheduling
  loop (``_pause_scheduling_task``, agent_activity.py:1425-1447), which goes on popping the
  queue while paused and ends only once nothing is left (2056-2111): the input is answered by
  the agent it was given to, before the handoff completes.
- The run watches the handoff task requested while it is open (agent_session.py:1782-1790),
  the new agent's ``on_enter`` (agent_session.py:2001-2012) and the speeches made during it
  (``generate_reply`` watches every new handle, 1658-1659), so a chain of handoffs keeps it
  open until the chain ends.

This runtime holds a run's input back until the conversation waits for the user (so that it
reaches the innermost AgentTask a pre-run reply started). Agents that hand off one to another,
each greeting with a tool that hands off again, never wait for the user: the input waited for
ever. Now a handoff leaves the departing agent with the waiting input, as in LiveKit: it
answers it before the handoff completes, and the run follows the chain.

The adversarial harness's ``every_quiet_input_answered`` asked such a run to return within
its answer window; it now moves that time with each handoff asked for while the run is open
(the last test shows it still catches a run that does not return).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest
import trio
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from adversary_agents import Desk
from agents_trio import Agent, AgentSession, FunctionToolCall, RunContext, function_tool
from agents_trio.chat import AgentHandoff, ChatMessage, FunctionCall
from agents_trio.testing import (DEFAULT_INVARIANTS, Reply, RunInput, Schedule, ToolCall,
                                 UserSpeech, check_conversation, violations)
from agents_trio.testing import FakeActions, FakeLLM
from agents_trio.testing.invariants import every_quiet_input_answered, quiet_inputs

HOPS = 4  # handoffs in the chain
LLM = 0.3  # each LLM request streams for this long (FakeActions' default)
TOOL_LATENCY = 3.0


class Hop(Agent):
    """Greets, and its greeting calls ``transfer``, which hands off to the next hop after
    ``TOOL_LATENCY`` seconds (the last hop only greets)."""

    def __init__(self, n: int) -> None:
        super().__init__(instructions=f"You are hop {n}.", id=f"hop{n}")
        self.n = n

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions=f"greet {self.n}")

    @function_tool
    async def transfer(self, ctx: RunContext) -> Any:
        """Transfer to the next agent."""
        await trio.sleep(TOOL_LATENCY)
        return Hop(self.n + 1), f"transferring to {self.n + 1}"


def _script() -> FakeActions:
    a = FakeActions()
    for n in range(HOPS):
        a.add_llm(f"hello from {n}", input=f"greet {n}", duration=LLM, tool_calls=[
            FunctionToolCall(name="transfer", arguments="{}", call_id=f"t{n}")])
        a.add_llm(f"bye from {n}", input=f"transferring to {n + 1}", duration=LLM)
    a.add_llm("hello from the last hop", input=f"greet {HOPS}", duration=LLM)
    a.add_llm("the answer", input="the question", duration=LLM)
    return a


def _texts(items: list[Any]) -> list[str]:
    out = []
    for item in items:
        if isinstance(item, AgentHandoff):
            out.append(f"handoff {item.old_agent_id} -> {item.new_agent_id}")
        elif isinstance(item, ChatMessage) and item.role in ("user", "assistant"):
            out.append(f"{item.role}: {item.text_content}")
        elif isinstance(item, FunctionCall):
            out.append(f"call {item.call_id}")
    return out


async def test_a_run_during_a_handoff_chain_is_answered_by_the_agent_it_was_given_to(
        autojump_clock):
    async with AgentSession(llm=FakeLLM(_script().llm_responses)) as session:
        committed: dict[str, float] = {}
        session.on("conversation_item_added", lambda ev: committed.setdefault(
            ev.item.id, trio.current_time()))
        t0 = trio.current_time()
        await session.start(Hop(0))
        await trio.sleep(1.0)  # hop 0's greeting was said; its transfer runs
        with trio.fail_after(60):
            result = await session.run(user_input="the question")
        returned = trio.current_time() - t0

        # the input waited for the running transfer (this runtime's rule), then hop 0 took it
        # when the transfer asked for the handoff: hop 0 answers it, then says its tool
        # reply, then hands off (LiveKit: the same order, the input committed at once)
        history = _texts(session.history.items)
        assert history[:8] == [
            "handoff None -> hop0", "assistant: hello from 0", "call t0",
            "user: the question", "assistant: the answer", "assistant: bye from 0",
            "handoff hop0 -> hop1", "assistant: hello from 1"], history
        user = next(i for i in session.history.items
                    if isinstance(i, ChatMessage) and i.role == "user")
        assert committed[user.id] - t0 == pytest.approx(LLM + TOOL_LATENCY)
        # the run watched the handoff asked for while it was open, and so on down the chain
        # (not hop 0's greeting, made before it: its tool reply "bye from 0" is not the run's)
        assert [e.item.text_content for e in result.events if e.type == "message"] == [
            "the answer", *(f"{said} from {n}" for n in range(1, HOPS)
                            for said in ("hello", "bye")),
            "hello from the last hop"]
        assert [e.new_agent.id for e in result.events if e.type == "agent_handoff"] == [
            f"hop{n}" for n in range(1, HOPS + 1)]
        # it returns once the last hop waits for the user: each hop greets, transfers and
        # says its tool reply (hop 0's answer is generated beside it), the last hop greets
        hop = LLM + TOOL_LATENCY + LLM
        assert returned == pytest.approx(HOPS * hop + LLM)
        assert session.current_agent.id == f"hop{HOPS}"


# -- the adversarial model's schedule ----------------------------------------------------------
# Desk's greeting transfers to sales after 3.05 s; sales' greeting calls `transfer` (not its
# tool), then `back`; back at the desk, the greeting transfers again: the agents hand off
# until the user speaks (19.25), and the run at 3.00 follows them, as LiveKit's would.

_OKAY = Reply(text="okay.", ttft=0.0, duration=0.0, audio=0.2, tts_ttfb=0.0)
PING_PONG = Schedule(
    actions=(RunInput(at=3.0, text="hello there (0)", reply=_OKAY),
             RunInput(at=16.25, text="hello there (1)", reply=_OKAY),
             UserSpeech(at=19.25, duration=0.9, transcript="hello there (2)", reply=_OKAY)),
    close_at=21.5,
    greeting=msgspec.structs.replace(_OKAY, calls=(ToolCall(
        name="transfer", latency=2.05, shield=1.0,
        reply=msgspec.structs.replace(_OKAY, calls=(ToolCall(name="back"),))),)),
    audio_output=True)


@settings(database=None, deadline=None, print_blob=False, max_examples=5,
          phases=[Phase.explicit, Phase.generate, Phase.shrink],
          suppress_health_check=[HealthCheck.too_slow])
@given(st.random_module())  # seeds Trio's scheduler (registered with Hypothesis) per example
def test_a_run_in_a_ping_pong_of_handoffs_is_committed_and_answered(_: object) -> None:
    # Trio's scheduler breaks ties between the tasks ready at one instant with its own RNG,
    # which Hypothesis seeds: five interleavings (fresh ones with AGENTS_TRIO_FUZZ=1)
    record = check_conversation(Desk, PING_PONG, invariants=DEFAULT_INVARIANTS)
    users = [i for i in record.history if isinstance(i, ChatMessage) and i.role == "user"]
    assert users[0].text_content == "hello there (0)"
    leaves_desk = next(i for i in record.history
                       if isinstance(i, AgentHandoff) and i.old_agent_id == "desk")
    assert record.history.index(users[0]) < record.history.index(leaves_desk)
    run = next(o for o in record.actions if isinstance(o.action, RunInput))
    assert run.error is None and run.ended_at is not None
    assert record.t(run.ended_at) > 19.25  # it followed the chain until the user spoke
    # a second run while the first is open is refused, as in LiveKit
    second = [o for o in record.actions if isinstance(o.action, RunInput)][1]
    assert isinstance(second.error, RuntimeError)


# -- the harness still catches a run that does not return -------------------------------------

ONE_HANDOFF = Schedule(
    actions=(RunInput(at=1.0, text="to sales (0)", reply=Reply(calls=(
        ToolCall(name="transfer"),))),),
    close_at=40.0)


def test_a_run_that_never_returns_is_caught_after_the_handoffs_it_followed() -> None:
    record = check_conversation(Desk, ONE_HANDOFF, invariants=DEFAULT_INVARIANTS)
    assert any(isinstance(i, AgentHandoff) and i.new_agent_id == "sales"
               for i in record.history)
    (quiet,) = quiet_inputs(record)
    stuck = dataclasses.replace(record, actions=[
        dataclasses.replace(o, ended_at=None) for o in record.actions])
    (found,) = violations(stuck, [every_quiet_input_answered])
    assert "session.run('to sales (0)') at 1.00 did not return by" in found, found
    due = float(found.split("did not return by ")[1].split(" ")[0])
    assert due > quiet.end  # moved by the handoff the run followed, still before the close
