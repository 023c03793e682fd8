"""CPU per text turn as the conversation grows: both runtimes side by side.

    python -m bench.turn_cost                 # both runtimes, markdown on stdout
    python -m bench.turn_cost --out turn_cost.json

One session per configuration, no audio: the agent starts with H history items (alternating
user and assistant messages) and T function tools, and the user sends text turns one after
the other (``session.run(user_input=...)``); the LLM is a fake that answers one word at once.
The figure is process CPU time (``time.process_time``) per turn, averaged over the measured
turns after a few warm-up turns: the runtime's own per-turn work (history copies, tool
lists, events, the run's bookkeeping), which should not grow with H or T. Each runtime runs in
its own process.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .environment import have_livekit_agents

HISTORY_SIZES = (0, 1000, 5000)
TOOL_COUNTS = (1, 50, 200)
WARMUP_TURNS = 3
MEASURED_TURNS = 20
ROOT = Path(__file__).resolve().parent.parent


def configurations() -> list[tuple[int, int]]:
    """(history items, tools): the history sizes with one tool, then the tool counts with an
    empty history."""
    return [(h, 1) for h in HISTORY_SIZES] + [(0, t) for t in TOOL_COUNTS if t != 1]


def _tool_functions(count: int) -> list[Any]:
    def make(i: int) -> Any:
        async def lookup(city: str, days: int = 1) -> str:
            return f"{city}: {days}"
        lookup.__name__ = f"lookup_{i}"
        lookup.__doc__ = f"Look up item {i} for a city.\n\nArgs:\n    city: The city.\n" \
                         "    days: How many days."
        return lookup
    return [make(i) for i in range(count)]


def _fill(chat_ctx: Any, items: int) -> None:
    for i in range(items):
        role = "user" if i % 2 == 0 else "assistant"
        chat_ctx.add_message(role=role, content=f"message {i} of the earlier conversation")


# -- agents_trio -----------------------------------------------------------------------------
def run_trio() -> dict[str, float]:
    from contextlib import asynccontextmanager

    import trio

    from agents_trio import Agent, AgentSession, ChatContext, function_tool
    from agents_trio.models import ChatChunk

    class OneWordLLM:
        @asynccontextmanager
        async def chat(self, *, chat_ctx: Any, tools: Any = None, tool_choice: Any = None
                       ) -> Any:
            async def chunks() -> Any:
                yield ChatChunk(content="ok")
            yield chunks()

    out: dict[str, float] = {}

    async def one(history: int, tools: int) -> float:
        ctx = ChatContext()
        _fill(ctx, history)
        agent = Agent(instructions="Answer briefly.", chat_ctx=ctx,
                      tools=[function_tool(f) for f in _tool_functions(tools)])
        session = AgentSession(llm=OneWordLLM())
        async with session:
            await session.start(agent)
            for i in range(WARMUP_TURNS):
                await session.run(user_input=f"warm-up {i}")
            gc.collect()
            c = time.process_time()
            for i in range(MEASURED_TURNS):
                await session.run(user_input=f"question {i}")
            spent = time.process_time() - c
            await session.aclose()
        return spent / MEASURED_TURNS

    async def main() -> None:
        for h, t in configurations():
            out[f"{h},{t}"] = await one(h, t)

    trio.run(main)
    return out


# -- LiveKit Agents (asyncio) ----------------------------------------------------------------
def run_asyncio() -> dict[str, float]:
    import asyncio

    from livekit.agents import Agent, AgentSession, ChatContext, function_tool

    from agents_trio.testing.livekit_fakes import FakePluginLLM

    out: dict[str, float] = {}

    async def one(history: int, tools: int) -> float:
        ctx = ChatContext()
        _fill(ctx, history)
        agent = Agent(instructions="Answer briefly.", chat_ctx=ctx,
                      tools=[function_tool(f) for f in _tool_functions(tools)])
        session: AgentSession[Any] = AgentSession(
            llm=FakePluginLLM(default="ok", ttft=0.0, word_delay=0.0))
        async with session:
            await session.start(agent)
            for i in range(WARMUP_TURNS):
                await session.run(user_input=f"warm-up {i}")
            gc.collect()
            c = time.process_time()
            for i in range(MEASURED_TURNS):
                await session.run(user_input=f"question {i}")
            spent = time.process_time() - c
        return spent / MEASURED_TURNS

    async def main() -> None:
        for h, t in configurations():
            out[f"{h},{t}"] = await one(h, t)

    asyncio.run(main())
    return out


# -- report ----------------------------------------------------------------------------------
def markdown(results: dict[str, dict[str, float]]) -> list[str]:
    """The report section: ms of CPU per text turn per configuration and runtime."""
    ours, theirs = results.get("trio", {}), results.get("asyncio", {})
    lines = ["## CPU per text turn as the conversation grows", "",
             (f"One text-only session per row: the agent starts with the given history items "
              f"and function tools; {MEASURED_TURNS} text turns after {WARMUP_TURNS} warm-up "
              "turns, fake LLM answering one word at once; process CPU per turn "
              "(`python -m bench.turn_cost`)."), "",
             "| history items | tools | agents_trio ms / turn | LiveKit ms / turn | ratio |",
             "|---|---|---|---|---|"]
    for h, t in configurations():
        key = f"{h},{t}"
        a, b = ours.get(key), theirs.get(key)
        ratio = f"{a / b:.2f}" if a is not None and b else "–"
        lines.append(f"| {h} | {t} | {a * 1e3:.2f} | "
                     f"{'–' if b is None else f'{b * 1e3:.2f}'} | {ratio} |"
                     if a is not None else f"| {h} | {t} | – | – | – |")
    return lines + [""]


def measure_all(with_asyncio: bool = True, tree: Path = ROOT) -> dict[str, dict[str, float]]:
    """Each runtime in its own process (``--worker``); the results by runtime."""
    runtimes = ["trio"] + (["asyncio"] if with_asyncio and have_livekit_agents() else [])
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree) + os.pathsep + env.get("PYTHONPATH", "")
    results: dict[str, dict[str, float]] = {}
    for rt in runtimes:
        proc = subprocess.run([sys.executable, "-m", "bench.turn_cost", "--worker", rt],
                              cwd=tree, env=env, capture_output=True, text=True, check=False,
                              timeout=900)
        if proc.returncode != 0:
            raise RuntimeError(f"turn cost ({rt}) failed:\n{proc.stderr[-3000:]}")
        results[rt] = json.loads(proc.stdout.strip().splitlines()[-1])
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", choices=["trio", "asyncio"])
    ap.add_argument("--ours-only", action="store_true")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args(argv)
    if a.worker:
        import logging
        logging.disable(logging.WARNING)
        print(json.dumps(run_trio() if a.worker == "trio" else run_asyncio()))
        return 0
    results = measure_all(with_asyncio=not a.ours_only)
    if a.out:
        a.out.write_text(json.dumps(results, indent=1))
    print("\n".join(markdown(results)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
