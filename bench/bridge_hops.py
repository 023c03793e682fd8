"""How many hops audio costs across the asyncio bridge, and how long each path takes.

    python bench/bridge_hops.py [--frames 2000]

A hop is one crossing that schedules work on the other side: an asyncio task or loop
callback started from Trio, or a Trio task woken from asyncio. Three directions, each
measured the naive way (one call per frame) and the batched way the runtime uses:

- agent voice, Trio -> asyncio ``AudioSource.capture_frame`` (a real SDK source with a queue
  large enough that capture never waits for playout, so only overhead is timed);
- user audio, asyncio async iterator -> Trio (a burst, as after a scheduling stall);
- frames pushed into a plugin stream (a sync ``push_frame`` inside the loop).

Wall-clock timings (allowed in bench/): per frame, median of 5 runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import numpy as np
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from livekit import rtc

from agents_trio import open_bridge
from agents_trio.io.room_audio import _merge

RATE = 24000
FRAME = RATE // 100  # 10 ms, what most TTS plugins emit


def frames(n: int) -> list[rtc.AudioFrame]:
    data = np.full(FRAME, 100, dtype=np.int16).tobytes()
    return [rtc.AudioFrame(data, RATE, 1, FRAME) for _ in range(n)]


async def measure(fn: Callable[[Any, list[rtc.AudioFrame]], Awaitable[dict[str, int]]],
                  n: int, runs: int = 5) -> tuple[float, dict[str, int]]:
    times = []
    counts: dict[str, int] = {}
    for _ in range(runs):
        async with open_bridge() as bridge:
            batch = frames(n)
            before = bridge.statistics()
            t0 = time.perf_counter()
            extra = await fn(bridge, batch)
            times.append(time.perf_counter() - t0)
            after = bridge.statistics()
            counts = {"asyncio tasks": after.calls - before.calls,
                      "loop callbacks": (after.callbacks - before.callbacks
                                         + after.sync_calls - before.sync_calls),
                      "trio wakeups": after.trio_wakeups - before.trio_wakeups,
                      "asyncio wakeups": after.asyncio_wakeups - before.asyncio_wakeups,
                      **extra}
    return statistics.median(times) / n * 1e6, counts


# -- agent voice: Trio -> AudioSource ----------------------------------------------------------
async def _source(bridge: Any) -> Any:
    return await bridge.run_sync(rtc.AudioSource, RATE, 1, queue_size_ms=600_000)


async def voice_per_frame(bridge: Any, batch: list[rtc.AudioFrame]) -> dict[str, int]:
    source = await _source(bridge)
    for f in batch:
        await bridge.run(source.capture_frame, f)
    await bridge.run(source.aclose)
    return {"sdk captures": len(batch)}


async def voice_send_channel(bridge: Any, batch: list[rtc.AudioFrame], merge: bool = False
                             ) -> dict[str, int]:
    source = await _source(bridge)
    captures = 0

    async def consume(items: list[rtc.AudioFrame]) -> None:
        nonlocal captures
        chunks = ([f for _, f in _merge([(None, f) for f in items], 0.05)]  # type: ignore
                  if merge else items)
        for chunk in chunks:
            captures += 1
            await source.capture_frame(chunk)

    async with bridge.open_send_channel(consume, max_buffer_size=20) as chan:
        for f in batch:
            await chan.send(f)
        await chan.aclose()
    await bridge.run(source.aclose)
    return {"sdk captures": captures}


async def voice_merged(bridge: Any, batch: list[rtc.AudioFrame]) -> dict[str, int]:
    return await voice_send_channel(bridge, batch, merge=True)


# -- user audio: asyncio iterator -> Trio ------------------------------------------------------
async def _burst(batch: list[rtc.AudioFrame]) -> Any:
    for f in batch:
        yield f


async def input_aio_as_trio(bridge: Any, batch: list[rtc.AudioFrame]) -> dict[str, int]:
    import trio_asyncio

    got = 0
    async for _ in trio_asyncio.aio_as_trio(_burst(batch)):  # one asyncio task per item
        got += 1
    return {"items": got, "asyncio tasks (trio-asyncio)": got + 1}


async def input_receive(bridge: Any, batch: list[rtc.AudioFrame]) -> dict[str, int]:
    got = 0
    async with bridge.open_receive_channel(_burst(batch), max_buffer_size=100) as chan:
        async for _ in chan:
            got += 1
    return {"items": got}


async def input_receive_batch(bridge: Any, batch: list[rtc.AudioFrame]) -> dict[str, int]:
    got = 0
    async with bridge.open_receive_channel(_burst(batch), max_buffer_size=100) as chan:
        while True:
            try:
                got += len(await chan.receive_batch())
            except trio.EndOfChannel:
                break
    return {"items": got}


# -- frames into a plugin stream: Trio -> sync push_frame in the loop -----------------------------
async def push_call_soon(bridge: Any, batch: list[rtc.AudioFrame]) -> dict[str, int]:
    pushed: list[rtc.AudioFrame] = []
    for f in batch:
        bridge.call_soon(pushed.append, f)
        await trio.lowlevel.checkpoint()  # frames arrive one per pump iteration
    await bridge.run_sync(lambda: None)
    return {"items": len(pushed)}


async def push_feeder(bridge: Any, batch: list[rtc.AudioFrame]) -> dict[str, int]:
    pushed: list[rtc.AudioFrame] = []
    feeder = bridge.feeder(pushed.append)
    for f in batch:
        feeder.feed(f)
        await trio.lowlevel.checkpoint()
    await bridge.run_sync(lambda: None)
    return {"items": len(pushed)}


async def push_feeder_burst(bridge: Any, batch: list[rtc.AudioFrame]) -> dict[str, int]:
    pushed: list[rtc.AudioFrame] = []
    feeder = bridge.feeder(pushed.append)
    for f in batch:  # e.g. a VAD and STT catching up after a stall
        feeder.feed(f)
    await bridge.run_sync(lambda: None)
    return {"items": len(pushed)}


CASES = [
    ("voice", "bridge.run(capture_frame) per frame", voice_per_frame),
    ("voice", "send channel, batches", voice_send_channel),
    ("voice", "send channel, batches merged to 50 ms", voice_merged),
    ("input", "trio_asyncio.aio_as_trio(iterator)", input_aio_as_trio),
    ("input", "receive channel, receive()", input_receive),
    ("input", "receive channel, receive_batch()", input_receive_batch),
    ("push", "call_soon per frame", push_call_soon),
    ("push", "feeder, one frame per checkpoint", push_feeder),
    ("push", "feeder, burst", push_feeder_burst),
]


async def main(n: int) -> None:
    print(f"{n} frames of 10 ms per run; per-frame wall time is the median of 5 runs\n")
    print(f"{'path':6} {'method':42} {'µs/frame':>9}  hops and calls")
    for kind, label, fn in CASES:
        per_frame, counts = await measure(fn, n)
        shown = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        print(f"{kind:6} {label:42} {per_frame:9.1f}  {shown}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--frames", type=int, default=2000)
    trio.run(main, parser.parse_args().frames)
