"""Soak: 1,000 conversations one after another in one process (one Trio run, virtual time),
failing on growth per session of memory, open files or live tasks.

The sessions cycle through schedules that exercise every part of a session: voice turns with
tools, typed text and ``session.run``, interruptions, handoffs and a nested AgentTask, model
faults the runtime recovers from, and a close in the middle of a tool. After a warm-up (caches,
interned strings, first imports), the test measures after every batch of 100 sessions, with a
full garbage collection first:

- Python memory (``sys.getallocatedblocks()``, the objects Python's allocator holds; free of
  the overhead of ``tracemalloc``): the least-squares slope over the batches must stay under
  4 blocks per session. One leaked session is thousands of blocks (its history, events,
  speech handles, models), and even one leaked small object per session counts 1; the
  allocator's own noise (free lists, caches warming up) stays well below over 900 sessions.
- Resident memory (``/proc/self/statm``): slope under 16 KiB per session; RSS moves in pages
  and arenas are not returned eagerly, so this only guards against leaks outside Python's
  allocator (native buffers such as audio frames).
- Open file descriptors (``/proc/self/fd``) and live Trio tasks: back to the warm-up count
  after every batch, exactly — nothing a session opens or starts may outlive it.
"""

from __future__ import annotations

import gc
import logging
import os
import resource
import sys

import pytest
import trio
import trio.testing

from adversary_agents import Desk
from agents_trio.testing import (Interrupt, Reply, RunInput, Schedule, StreamFault, TextInput,
                                 ToolCall, UserSpeech, live_tasks, run_conversation)

SESSIONS = 1000
BATCH = 100
WARMUP = 100
MAX_BLOCKS_PER_SESSION = 4.0
MAX_RSS_BYTES_PER_SESSION = 16 * 1024

_LOOKUP = '{"topic": "weather"}'
SCHEDULES = [
    Schedule(actions=(
        UserSpeech(at=0.5, duration=1.0, transcript="what's the weather (0)", reply=Reply(
            calls=(ToolCall(name="lookup", arguments=_LOOKUP, latency=1.0),))),
        UserSpeech(at=2.0, duration=0.8, transcript="stop (1)"),
        TextInput(at=6.0, text="thanks (2)")), close_at=12.0),
    Schedule(actions=(
        TextInput(at=0.5, text="transfer me (0)", reply=Reply(calls=(ToolCall(name="transfer"),))),
        RunInput(at=5.0, text="how much (1)", reply=Reply(calls=(
            ToolCall(name="note", arguments='{"text": "x"}'),))),
        TextInput(at=9.0, text="back please (2)", reply=Reply(calls=(ToolCall(name="back"),)))),
        close_at=15.0, audio_output=False),
    Schedule(actions=(
        TextInput(at=0.5, text="ask me (0)", reply=Reply(calls=(ToolCall(name="ask_details"),))),
        TextInput(at=5.0, text="go deeper (1)", reply=Reply(calls=(ToolCall(name="deeper"),))),
        TextInput(at=9.0, text="it is 42 (2)", reply=Reply(calls=(
            ToolCall(name="finish", arguments='{"value": "42"}'),)))),
        close_at=12.0, audio_output=False),
    Schedule(actions=(
        UserSpeech(at=0.5, duration=1.5, transcript="tell me a story (0)", reply=Reply(
            audio=5.0, llm_fault=None, tts_fault=None)),
        Interrupt(at=3.0),
        TextInput(at=4.0, text="slow one (2)", reply=Reply(calls=(
            ToolCall(name="lookup", arguments=_LOOKUP, latency=4.0, outcome="raise_after"),
        )))),
        faults=(StreamFault(model="stt", at=1.0, kind="recoverable_api_error"),),
        close_at=5.0),  # closes in the middle of the tool
]


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _slope(samples: list[tuple[int, int]]) -> float:
    """Least-squares growth per session of (sessions, value) samples."""
    n = len(samples)
    mx = sum(x for x, _ in samples) / n
    my = sum(y for _, y in samples) / n
    var = sum((x - mx) ** 2 for x, _ in samples)
    return sum((x - mx) * (y - my) for x, y in samples) / var


async def _soak(agent_factory, schedules: list[Schedule], sessions: int, measure) -> None:
    for n in range(sessions):
        record = await run_conversation(agent_factory, schedules[n % len(schedules)])
        assert record.escaped is None and not record.timed_out, record.timeline()
        del record
        if (n + 1) % BATCH == 0:
            gc.collect()
            measure(n + 1, len(live_tasks()))


def _measure(agent_factory, schedules: list[Schedule], sessions: int
             ) -> dict[str, list[tuple[int, int]]]:
    """Run ``sessions`` conversations; (sessions, value) samples after each batch from the
    end of the warm-up on."""
    samples: dict[str, list[tuple[int, int]]] = {"blocks": [], "rss": [], "fds": [],
                                                 "tasks": []}

    def measure(done: int, tasks: int) -> None:
        if done >= WARMUP:
            samples["blocks"].append((done, sys.getallocatedblocks()))
            samples["rss"].append((done, _rss()))
            samples["fds"].append((done, _fds()))
            samples["tasks"].append((done, tasks))

    logging.disable(logging.CRITICAL)  # the runtime logs every injected failure
    try:
        trio.run(_soak, agent_factory, schedules, sessions, measure,
                 clock=trio.testing.MockClock(autojump_threshold=0))
    finally:
        logging.disable(logging.NOTSET)
    return samples


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
def test_a_thousand_sessions_leak_no_memory_files_or_tasks() -> None:
    samples = _measure(Desk, SCHEDULES, SESSIONS)
    report = {k: [v for _, v in s] for k, s in samples.items()}
    assert len(samples["blocks"]) == (SESSIONS - WARMUP) // BATCH + 1, report
    blocks, rss = _slope(samples["blocks"]), _slope(samples["rss"])
    print(f"\nsoak: {SESSIONS} sessions; growth per session: {blocks:.2f} blocks, "
          f"{rss:.0f} B RSS; {report}")
    assert blocks < MAX_BLOCKS_PER_SESSION, f"{blocks:.1f} blocks/session: {report}"
    assert rss < MAX_RSS_BYTES_PER_SESSION, f"RSS grows {rss:.0f} B/session: {report}"
    assert len(set(report["fds"])) == 1, f"open files grow: {report['fds']}"
    assert len(set(report["tasks"])) == 1, f"live tasks grow: {report['tasks']}"


_LEAKED: list[object] = []


class LeakyDesk(Desk):
    """Keeps one small object per session alive: the soak must see it."""

    async def on_enter(self) -> None:
        _LEAKED.append(object())
        await super().on_enter()


def test_the_soak_measurement_sees_one_leaked_object_per_session() -> None:
    quick = [Schedule(actions=(TextInput(at=0.5, text="hi (0)"),), close_at=1.0)]
    clean = _slope(_measure(Desk, quick, 400)["blocks"])
    leaky = _slope(_measure(LeakyDesk, quick, 400)["blocks"])
    _LEAKED.clear()
    assert clean < 0.5 <= leaky, (clean, leaky)
