"""Helpers for timeline tests: record every session event with its script time, and run a
scripted session under a deadline."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import trio

from agents_trio import Agent, AgentSession
from agents_trio.testing import run_session

Script = Sequence[tuple[float, Callable[[AgentSession], object]]]


def near(value: float, expected: float, tol: float = 0.1) -> bool:
    return abs(value - expected) <= tol


class Recorder:
    """Records session events and playback events; ``t0`` is set after the run."""

    NAMES = ["agent_state_changed", "user_state_changed", "user_input_transcribed",
             "conversation_item_added", "function_tools_executed", "metrics_collected",
             "speech_created", "agent_false_interruption", "error", "close"]

    def __init__(self, session: AgentSession) -> None:
        self.events: list[tuple[str, Any]] = []
        self.t0 = 0.0
        for name in self.NAMES:
            session.on(name, lambda ev, name=name: self.events.append((name, ev)))
        session.output.audio.on("playback_finished",
                                lambda ev: self.events.append(("playback_finished", ev)))
        session.output.audio.on("playback_started",
                                lambda ev: self.events.append(("playback_started", ev)))

    def of(self, name: str) -> list[Any]:
        return [ev for n, ev in self.events if n == name]

    def t(self, ev: Any) -> float:
        return ev.created_at - self.t0

    def agent_states(self) -> list[tuple[str, float]]:
        return [(ev.new_state, round(self.t(ev), 2)) for ev in self.of("agent_state_changed")]

    def dump(self) -> str:
        lines = []
        for name, ev in self.events:
            if name == "metrics_collected" and ev.metrics.type == "vad_metrics":
                continue
            detail = {k: getattr(ev, k) for k in ev.__struct_fields__
                      if k not in ("created_at", "type", "speech_handle")}
            lines.append(f"{self.t(ev):7.2f} {name} {detail}")
        return "\n".join(lines)


async def drive(session: AgentSession, agent: Agent, rec: Recorder, script: Script, *,
                drain_delay: float = 5.0) -> None:
    """Like ``run_session``, plus callbacks ``fn(session)`` run at given script times (also
    during the drain delay). Sets ``rec.t0`` once the agent has started."""

    async def call_at(at: float, fn: Callable[[AgentSession], object]) -> None:
        await trio.sleep_until(rec.t0 + at)
        fn(session)

    async with session:
        await session.start(agent)
        rec.t0 = trio.current_time()
        session.input.audio.push(0.1)
        async with trio.open_nursery() as nursery:
            for at, fn in script:
                nursery.start_soon(call_at, at, fn)
            await session.stt.speeches_done.wait()
            await trio.sleep(drain_delay)
            try:
                await session.drain()
            except RuntimeError:
                pass
        await session.aclose()


async def run_recorded(session: AgentSession, agent: Agent, *, script: Script | None = None,
                       drain_delay: float = 5.0, limit: float = 120.0) -> Recorder:
    """Record ``session`` while it runs ``agent`` to the end: ``run_session``, or ``drive``
    when a ``script`` is given (even an empty one). Fails the test with the event dump if
    the run takes longer than ``limit`` seconds of script time."""
    rec = Recorder(session)
    try:
        with trio.fail_after(limit):
            if script is not None:
                await drive(session, agent, rec, script, drain_delay=drain_delay)
            else:
                rec.t0 = await run_session(session, agent, drain_delay=drain_delay)
    except trio.TooSlowError:
        if script is None:  # run_session gives t0 only when it returns
            rec.t0 = rec.events[0][1].created_at if rec.events else 0.0
        pytest.fail(f"the session did not finish within {limit:g} s of script time:\n"
                    + rec.dump())
    return rec
