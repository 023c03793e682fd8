"""One measured run: one runtime, N concurrent sessions, one process.

    python -m bench.worker --runtime trio --n 50 --out run.json
    python -m bench.worker --runtime trio-worker --n 50 --out run.json

``trio-worker`` is worker mode: LiveKit's own ``AgentServer`` as ``create_agent_server``
makes it (hosted jobs, unregistered) dispatches N fake jobs (``simulate_job(fake_job=True)``)
to ``agents_trio.worker``'s entrypoint, which runs each session on the process's one job host,
so the figures include LiveKit's dispatch and job bookkeeping, each job's task on the
server's loop and the job host's hand-over. Jobs are dispatched on the same schedule as the sessions start in the other modes;
the lag probe runs in the job host's Trio loop.

Every runtime (``trio``: agents_trio, ``asyncio``: LiveKit Agents, ``pipecat``: Pipecat) goes
through the same steps in the same order: warm-up session, the N sessions' scripts and probes
(the harness's input and records, made before measuring, so that with ``--gc freeze`` the
collector does not walk them in the measured phase: they are the benchmark's, not the
runtime's), ``gc.collect()`` (then ``gc.freeze()`` with ``--gc freeze``; with ``--gc off``
also ``gc.disable()``, a diagnosis of what the cyclic collector's pauses cost; with ``--gc young`` the young threshold
the job host sets, for every runtime), RSS baseline, 1 s idle CPU baseline (reported, not
subtracted), then the measured phase (N sessions started over min(4 s, 0.04·N)), sampling
RSS, live sessions and event-loop lag every 200 ms. CPU per session-second is the whole
process's CPU over the phase (every thread, the monitor's share included) over the sessions'
scripted seconds. The JSON holds the summary (``analysis.summarize``) and the raw
per-sample latencies.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import platform
import resource
import sys
import time
from typing import Any

from . import analysis, core

# 5 Hz: each of the monitor's wake-ups of an otherwise idle loop costs a few hundred µs of CPU
# on a VM (cold caches after the sleep), which at 20 Hz was a large part of the CPU of one
# session; at 5 Hz it is at most ~2 ms per second of the whole process
MONITOR_INTERVAL = 0.2
IDLE_SECONDS = 1.0


def cpu_seconds() -> float:
    """CPU time of the whole process (all threads), CLOCK_PROCESS_CPUTIME_ID."""
    return time.process_time()


def host_busy_seconds() -> float:
    """CPU seconds all processes on the host have been busy (from /proc/stat), or -1."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return -1.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def wakeups() -> int:
    """The process's voluntary context switches so far (every thread): each is a wait in which
    a thread blocked and was woken again. On a one-thread event loop that is one per loop
    wake-up (its ``epoll_wait`` found nothing ready and slept); a thread pool's blocking
    waits count too (Pipecat's VAD worker threads)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class _LogCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.counts: dict[str, int] = {}
        self.first: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        key = f"{record.levelname} {record.name}"
        self.counts[key] = self.counts.get(key, 0) + 1
        if len(self.first) < 10:
            self.first.append(f"{key}: {record.getMessage()[:200]}")


class _GcTimer:
    """Pause time of every collection, by generation (both runtimes install it)."""

    def __init__(self) -> None:
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._start = 0.0
        self.active = False

    def __call__(self, phase: str, info: dict) -> None:
        if not self.active:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses[info["generation"]].append((time.perf_counter() - self._start) * 1e3)

    def summary(self) -> dict:
        return {f"gen{g}": {"count": len(v), "total_ms": sum(v), "max_ms": max(v, default=0.0)}
                for g, v in self.pauses.items()}


class Meter:
    """CPU, RSS, loop lag and live sessions around the measured phase."""

    def __init__(self, probes: list[core.Probe]) -> None:
        self.probes = probes
        self.rss_base = 0
        self.rss_peak = 0
        self.live_peak = 0
        self.rss_at_live_peak = 0
        self.lags: list[float] = []
        self.idle_rate = 0.0
        self.cpu0 = self.cpu1 = 0.0
        self.wakeups0 = self.wakeups1 = 0
        self.wall0 = self.wall1 = 0.0
        self.gc_timer = _GcTimer()
        gc.callbacks.append(self.gc_timer)
        # with --heap: called once, with the count, when every session is live (bench/heap.py)
        self.at_peak: Any = None
        self.heap: dict[str, Any] | None = None

    def baseline(self) -> None:
        self.rss_base = rss_bytes()

    def idle(self, cpu_before: float, cpu_after: float, seconds: float) -> None:
        self.idle_rate = max(0.0, (cpu_after - cpu_before) / seconds)

    def begin(self, wall: float) -> None:
        self.gc_timer.active = True
        self.gc0 = gc.get_stats()
        self.host0 = host_busy_seconds()
        self.cpu0, self.wall0 = cpu_seconds(), wall
        self.wakeups0 = wakeups()

    def end(self, wall: float) -> None:
        self.wakeups1 = wakeups()
        self.cpu1, self.wall1 = cpu_seconds(), wall
        self.host1 = host_busy_seconds()
        self.gc_timer.active = False
        self.gc1 = gc.get_stats()

    def sample(self, lag: float) -> None:
        self.lags.append(lag * 1e3)
        rss = rss_bytes()
        self.rss_peak = max(self.rss_peak, rss)
        live = sum(1 for p in self.probes if p.started_at is not None and p.ended_at is None)
        if live >= self.live_peak:
            self.live_peak = live
            self.rss_at_live_peak = max(self.rss_at_live_peak, rss)
        if self.at_peak is not None and live == len(self.probes):
            at_peak, self.at_peak = self.at_peak, None
            self.heap = at_peak(live)

    def result(self) -> dict[str, Any]:
        wall = self.wall1 - self.wall0
        cpu = self.cpu1 - self.cpu0
        session_seconds = sum(p.script.close_at for p in self.probes)
        lags = self.lags
        return {
            "phase_wall_s": wall,
            "phase_cpu_s": cpu,
            "idle_cpu_rate": self.idle_rate,
            "cpu_utilisation": cpu / wall if wall else None,
            # cores kept busy by other processes during the phase (another job disturbs a run)
            "host_other_cores": ((self.host1 - self.host0 - cpu) / wall
                                 if wall and self.host0 >= 0 and self.host1 >= 0 else None),
            "session_seconds": session_seconds,
            # the whole phase's CPU, the monitor's included: the idle rate is not subtracted.
            # Measured with the loop otherwise asleep, a monitor wake-up costs far more than
            # the same wake-up among sessions, so subtracting it over-corrects, most at low N
            # (the lowest figure gained most: 20 Hz, N = 10 gave 0.34 of LiveKit's net, 0.43
            # gross)
            "cpu_per_session_second": cpu / session_seconds if session_seconds else None,
            # how often the process woke over the phase, and what a wake-up cost on average
            "wakeups": self.wakeups1 - self.wakeups0,
            "wakeups_per_session_second": ((self.wakeups1 - self.wakeups0) / session_seconds
                                           if session_seconds else None),
            "cpu_per_wakeup_us": (cpu / (self.wakeups1 - self.wakeups0) * 1e6
                                  if self.wakeups1 > self.wakeups0 else None),
            "rss_base_mb": self.rss_base / 2**20,
            "rss_peak_mb": self.rss_peak / 2**20,
            "live_sessions_peak": self.live_peak,
            "rss_per_session_mb": ((self.rss_at_live_peak - self.rss_base) / 2**20
                                   / self.live_peak if self.live_peak else None),
            "loop_lag_ms": {"p50": core.percentile(lags, 0.5), "p99": core.percentile(lags, 0.99),
                            "max": max(lags, default=None)},
            "gc": self.gc_timer.summary(),
            # objects found unreachable (cyclic garbage) per generation during the phase
            "gc_collected": [b["collected"] - a["collected"] for a, b in zip(self.gc0, self.gc1)],
        }


def spread_for(n: int) -> float:
    return min(4.0, 0.04 * n)


def make_probes(n: int, kind: str, rounds: int) -> list[list[core.Probe]]:
    def script(i: int) -> core.Script:
        if kind in ("listen", "network"):
            return core.listening_script(10.0)
        return core.build_script(i, kind=kind)

    spread = spread_for(n)
    return [[core.Probe(index=r * n + i, script=script(r * n + i),
                        frame_phase=core.frame_phase(spread * i / n)) for i in range(n)]
            for r in range(rounds)]


def _census(args: argparse.Namespace) -> Any:
    """With ``--heap``, the census ``bench/heap.py`` takes once every session is live."""
    if not args.heap:
        return None
    from . import heap
    return heap.census


def _prepare_gc(mode: str) -> None:
    gc.collect()
    if mode in ("freeze", "off", "young"):
        gc.freeze()
    if mode == "off":   # diagnosis only: how the run goes without the collector's pauses
        gc.disable()
    if mode == "young":  # diagnosis: every runtime with the job host's young threshold
        from agents_trio.collector import tune_collector_for_sessions
        tune_collector_for_sessions()


async def trio_main(args: argparse.Namespace) -> tuple[list[core.Probe], Meter, dict]:
    import trio

    from . import trio_side as side

    network = side.Network()
    async with trio.open_nursery() as outer:
        outer.start_soon(network.run)
        result = await _trio_measure(args, side, network)
        outer.cancel_scope.cancel()
    return result


async def _trio_measure(args: argparse.Namespace, side: Any, network: Any
                        ) -> tuple[list[core.Probe], Meter, dict]:
    import trio

    await side.warm_up(network)
    rounds = make_probes(args.n, args.script, args.rounds)
    _prepare_gc(args.gc)
    probes = [p for r in rounds for p in r]
    meter = Meter(probes)
    meter.at_peak = _census(args)
    meter.baseline()
    done = trio.Event()

    async def monitor() -> None:
        while not done.is_set():
            t = trio.current_time()
            await trio.sleep(MONITOR_INTERVAL)
            meter.sample(trio.current_time() - t - MONITOR_INTERVAL)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(monitor)
        c0 = cpu_seconds()
        await trio.sleep(IDLE_SECONDS)  # the idle rate: reported, not subtracted
        meter.idle(c0, cpu_seconds(), IDLE_SECONDS)
        meter.begin(trio.current_time())
        for r in rounds:
            if args.script == "network":
                await side.run_network_only(r, network, spread=spread_for(args.n))
                continue
            await side.run_phase(r, network, spread=spread_for(args.n),
                                 transforms=args.transforms == "on", history=args.history,
                                 extra_tools=args.tools)
        meter.end(trio.current_time())
        done.set()
    return probes, meter, side.runtime_info()


async def asyncio_main(args: argparse.Namespace, side: Any = None
                       ) -> tuple[list[core.Probe], Meter, dict]:
    """The measured run on asyncio: LiveKit Agents (``asyncio_side``) or, with ``side``
    given, another asyncio runtime with the same driver interface (``pipecat_side``)."""
    import asyncio

    if side is None:
        from . import asyncio_side as side

    loop = asyncio.get_running_loop()
    network = side.Network()
    net_task = asyncio.create_task(network.run())
    await side.warm_up(network)
    rounds = make_probes(args.n, args.script, args.rounds)
    _prepare_gc(args.gc)
    probes = [p for r in rounds for p in r]
    meter = Meter(probes)
    meter.at_peak = _census(args)
    meter.baseline()
    done = asyncio.Event()

    async def monitor() -> None:
        while not done.is_set():
            t = loop.time()
            await asyncio.sleep(MONITOR_INTERVAL)
            meter.sample(loop.time() - t - MONITOR_INTERVAL)

    mon = asyncio.create_task(monitor())
    c0 = cpu_seconds()
    await asyncio.sleep(IDLE_SECONDS)   # the idle rate: reported, not subtracted
    meter.idle(c0, cpu_seconds(), IDLE_SECONDS)
    meter.begin(loop.time())
    for r in rounds:
        if args.script == "network":
            await side.run_network_only(r, network, spread=spread_for(args.n))
            continue
        await side.run_phase(r, network, spread=spread_for(args.n),
                             transforms=args.transforms == "on", history=args.history,
                             extra_tools=args.tools)
    meter.end(loop.time())
    done.set()
    await mon
    net_task.cancel()
    return probes, meter, side.runtime_info()


BENCH_SECRET = "bench-secret-long-enough-for-hs256-keys"


def worker_mode(args: argparse.Namespace) -> tuple[list[core.Probe], Meter, dict]:
    """Worker mode (see the module docstring), on a plain asyncio loop as LiveKit's CLI."""
    import asyncio

    loop = asyncio.SelectorEventLoop()
    try:
        return loop.run_until_complete(_worker_mode(args))
    finally:
        loop.close()


async def _worker_mode(args: argparse.Namespace) -> tuple[list[core.Probe], Meter, dict]:
    import asyncio
    import collections
    from contextlib import asynccontextmanager

    import trio

    from agents_trio.job_host import JobHost
    from agents_trio.testing.fake_room import FakeRoom
    from agents_trio.worker import create_agent_server

    from . import trio_side as side

    loop = asyncio.get_running_loop()
    host = JobHost(name="bench jobs")
    host.start()
    network = side.Network()
    # what the next dispatched job runs: (probe, agent or None)
    plan: collections.deque[tuple[core.Probe, Any]] = collections.deque()
    ended = asyncio.Event()
    counts = {"ended": 0, "expected": 0}

    def job_ended() -> None:
        counts["ended"] += 1
        if counts["ended"] >= counts["expected"]:
            ended.set()

    async def entrypoint(ctx: Any) -> None:
        probe, agent = plan.popleft()
        try:
            await side.run_session(probe, network, transforms=args.transforms == "on",
                                   agent=agent)
        finally:
            loop.call_soon_threadsafe(job_ended)

    @asynccontextmanager
    async def bench_room(url: str, token: str, **_: Any) -> Any:
        room = FakeRoom()  # the sessions use the bench's own audio I/O, not the room
        try:
            yield room
        finally:
            room.connected = False

    async def run_jobs(items: list[tuple[core.Probe, Any]], spread: float) -> None:
        counts["ended"], counts["expected"] = 0, len(items)
        ended.clear()
        plan.extend(items)
        t0 = loop.time()
        for i, _ in enumerate(items):
            await asyncio.sleep(max(0.0, t0 + spread * i / len(items) - loop.time()))
            await server.simulate_job(f"bench-{i}", fake_job=True)
        await ended.wait()

    server = create_agent_server(entrypoint, job_host=host, open_room_fn=bench_room,
                                 ws_url="ws://bench.invalid", api_key="bench",
                                 api_secret=BENCH_SECRET, port=0)
    up = asyncio.Event()
    server.on("worker_started", lambda: up.set())
    server_task = asyncio.ensure_future(server.run(unregistered=True))
    network_task = asyncio.ensure_future(host.run(network.run))
    await up.wait()

    async def discard_worker_messages() -> None:
        # a registered worker sends its messages (job status updates) to the server; an
        # unregistered one has no reader, and once LiveKit's 128-message queue is full (after
        # some 40 jobs) its job bookkeeping blocks for good
        async for _ in server._msg_chan:  # noqa: SLF001 - no public reader
            pass

    outbox_task = asyncio.ensure_future(discard_worker_messages())
    try:
        await run_jobs([(core.Probe(index=0, script=core.warmup_script()), side.Warmup())],
                       0.0)
        rounds = make_probes(args.n, args.script, args.rounds)
        _prepare_gc(args.gc)
        probes = [p for r in rounds for p in r]
        meter = Meter(probes)
        meter.baseline()

        async def monitor() -> None:
            while True:
                t = trio.current_time()
                await trio.sleep(MONITOR_INTERVAL)
                meter.sample(trio.current_time() - t - MONITOR_INTERVAL)

        monitor_task = asyncio.ensure_future(host.run(monitor))
        c0 = cpu_seconds()
        await asyncio.sleep(IDLE_SECONDS)
        meter.idle(c0, cpu_seconds(), IDLE_SECONDS)
        meter.begin(loop.time())
        peak_threads = 0
        for r in rounds:
            await run_jobs([(p, None) for p in r], spread_for(args.n))
            peak_threads = max(peak_threads, len(server.active_jobs))
        meter.end(loop.time())
        monitor_task.cancel()
        await asyncio.gather(monitor_task, return_exceptions=True)
    finally:
        await server.aclose()
        await server_task
        await asyncio.gather(outbox_task, return_exceptions=True)
        network_task.cancel()
        await asyncio.gather(network_task, return_exceptions=True)
        host.close(30)
    info = side.runtime_info()
    info.update(mode="worker (LiveKit AgentServer, hosted jobs, one job host)",
                load_at_end=host.load(), jobs=host.jobs_started)
    return probes, meter, info


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.worker")
    ap.add_argument("--runtime", choices=["trio", "asyncio", "pipecat", "trio-worker"],
                    required=True)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--script", choices=["full", "quick", "listen", "network"],
                    default="full", help="listen: 10 s of silence, no turns; network: the "
                    "fake network's inputs alone, no session (the CPU figure's floor)")
    ap.add_argument("--rounds", type=int, default=1, help="sequential rounds of N sessions")
    ap.add_argument("--transforms", choices=["on", "off"], default="off")
    ap.add_argument("--gc", choices=["freeze", "default", "off", "young"], default="freeze")
    ap.add_argument("--history", type=int, default=0,
                    help="earlier messages in the agent's context at the start")
    ap.add_argument("--tools", type=int, default=0, help="unused tools besides the transfer")
    ap.add_argument("--heap", action="store_true",
                    help="count what the cyclic collector walks once every session is live "
                         "and time a full collection (bench/heap.py; perturbs the latencies)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.heap and args.runtime not in ("trio", "asyncio"):
        ap.error("--heap runs on the trio and asyncio runtimes")
    if args.script == "network" and args.runtime not in ("trio", "asyncio"):
        ap.error("--script network runs on the trio and asyncio runtimes")

    counter = _LogCounter()
    logging.getLogger().addHandler(counter)
    logging.getLogger().setLevel(logging.WARNING)

    t_start = time.perf_counter()
    log_info: dict[str, Any] = {"counts": counter.counts, "first": counter.first}
    if args.runtime == "trio":
        import trio
        probes, meter, info = trio.run(trio_main, args)
    elif args.runtime == "pipecat":
        import asyncio

        from . import pipecat_side
        loguru_counter = pipecat_side.LogCounter()   # Pipecat logs through loguru
        pipecat_side.quiet_logs(loguru_counter)
        probes, meter, info = asyncio.run(asyncio_main(args, pipecat_side))
        log_info["loguru"] = {"counts": loguru_counter.counts, "first": loguru_counter.first}
    elif args.runtime == "trio-worker":
        probes, meter, info = worker_mode(args)
    else:
        import asyncio
        probes, meter, info = asyncio.run(asyncio_main(args))

    summary = analysis.summarize(probes)
    raw = [analysis.session_samples(p) for p in probes]
    resources = meter.result()
    # CPU per LLM request answered (a turn): what the context sweep compares across sizes
    turns = sum(len(p.llm_request) for p in probes)
    resources["turns"] = turns
    resources["cpu_per_turn_ms"] = resources["phase_cpu_s"] / turns * 1e3 if turns else None
    out = {
        "runtime": args.runtime,
        "runtime_info": info,
        "n": args.n,
        "rounds": args.rounds,
        "script": args.script,
        "script_seconds": probes[0].script.close_at if probes else None,
        "transforms": args.transforms,
        "context": {"history": args.history, "tools": args.tools},
        "gc": args.gc,
        "python": platform.python_version(),
        "process_seconds": time.perf_counter() - t_start,
        "summary": summary,
        "resources": resources,
        "heap": meter.heap,
        "log": log_info,
        "samples": {
            "turns": [t for s in raw for t in s["turns"]],
            "interrupts": [t for s in raw for t in s["interrupts"]],
        },
    }
    with open(args.out, "w") as f:
        json.dump(out, f)
    sys.exit(0)


if __name__ == "__main__":
    main()
