"""``python -m bench``: turn and interruption latency, side by side with LiveKit Agents and
Pipecat.

    python -m bench                 # the full sweep (N = 1 … 300), report, plot, README table
    python -m bench --quick         # CI smoke test: < 1 min, asserts that it ran
    python -m bench --context-sweep only   # CPU per turn against history and tool count
    python -m bench --virtual       # logical latencies of the decision points, in virtual time
    python -m bench --profile       # where the time goes: hops per frame, CPU hot spots
    python -m bench --adapter       # a VAD plugin through adapt(): cost per window, per hop
    python -m bench --heap          # what a full collection walks, per session
    python -m bench --worker-mode   # the sweep plus worker mode (LiveKit's AgentServer, fake jobs)

Each (runtime, N) runs in its own process (``python -m bench.worker``), one after the other,
with the same Python, the same fakes and timings and the same GC settings; the runtimes are
agents_trio (``trio``), LiveKit Agents (``asyncio``) and Pipecat (``pipecat``), the last two
when installed (``pip install -e '.[bench]'``). Results go to ``bench/results/``
(``bench.json``, ``bench.md``, ``latency.png``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import report
from .environment import have_livekit_agents, have_pipecat

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
DEFAULT_NS = [1, 10, 50, 100, 200, 300]


def busy_thread_cpu_ratio(seconds: float = 1.0) -> float:
    """CPU seconds a busy thread gets per wall second here (1.0 on bare metal; less on a VM
    that steals time): the ceiling of one event loop's utilisation."""
    t, c = time.perf_counter(), time.process_time()
    while time.perf_counter() - t < seconds:
        pass
    return (time.process_time() - c) / (time.perf_counter() - t)


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    cpus = os.cpu_count() or 0
    return f"{cpus} vCPU{' ' + model if model else ''}, {platform.system()} {platform.machine()}"


TREE = ROOT   # where the workers import agents_trio and bench from (see prepare_tree)


def prepare_tree(mode: str, log: Any) -> dict[str, Any]:
    """Pin the code the workers run. ``head``: agents_trio as committed at HEAD (others may be
    editing the working tree while the sweep runs) plus a copy of bench/; ``working``: the
    working tree as it is."""
    global TREE
    info: dict[str, Any] = {"tree": mode}
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                              capture_output=True, text=True, check=False)
        info["commit"] = head.stdout.strip() or None
        dirty = subprocess.run(["git", "status", "--porcelain", "agents_trio"], cwd=ROOT,
                               capture_output=True, text=True, check=False).stdout.strip()
        info["agents_trio_dirty"] = bool(dirty)
    except OSError:
        info["commit"] = None
    if mode == "working" or not info.get("commit"):
        TREE = ROOT
        info["tree"] = "working"
        return info
    tree = Path(tempfile.mkdtemp(prefix="bench-tree-"))
    archive = subprocess.run(["git", "archive", "HEAD", "agents_trio"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    shutil.copytree(HERE, tree / "bench",
                    ignore=shutil.ignore_patterns("results", "__pycache__"))
    TREE = tree
    log(f"benchmarking agents_trio at {info['commit']} (HEAD; pinned in {tree})\n")
    return info


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(TREE) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_worker(runtime: str, n: int, *, script: str, transforms: str, gc_mode: str,
               rounds: int, out_dir: Path, timeout: float, log: Any, history: int = 0,
               tools: int = 0, tag: str = "", heap: bool = False) -> dict:
    context = f"-h{history}-x{tools}" if history or tools else ""
    out = out_dir.resolve() / (f"{runtime}-n{n}-{script}-t{transforms}-r{rounds}{context}"
                               f"{'-' + tag if tag else ''}.json")
    cmd = [sys.executable, "-m", "bench.worker", "--runtime", runtime, "--n", str(n),
           "--script", script, "--transforms", transforms, "--gc", gc_mode,
           "--rounds", str(rounds), "--history", str(history), "--tools", str(tools),
           "--out", str(out)] + (["--heap"] if heap else [])
    t = time.perf_counter()
    log(f"  {runtime:7s} N={n:<4d} script={script} transforms={transforms} rounds={rounds}"
        + (f" history={history} tools={tools + 1}" if context else "")
        + (f" ({tag})" if tag else "") + " … ")
    try:
        proc = subprocess.run(cmd, cwd=TREE, env=worker_env(), timeout=timeout, check=False,
                              capture_output=True, text=True)
    except subprocess.TimeoutExpired:
        log(f"    timed out after {timeout:.0f} s\n")
        return {"runtime": runtime, "n": n, "transforms": transforms, "error": "timeout"}
    if proc.returncode != 0 or not out.exists():
        tail = (proc.stderr or proc.stdout)[-2000:]
        log(f"    failed (exit {proc.returncode}):\n{tail}\n")
        return {"runtime": runtime, "n": n, "transforms": transforms,
                "error": f"exit {proc.returncode}: {tail[-500:]}"}
    data = json.loads(out.read_text())
    s = data["summary"]
    log(f"    {time.perf_counter() - t:.0f} s: turn p50/p99 "
        f"{report.fmt(s['turn_overhead_ms'].get('p50'), 2)}/"
        f"{report.fmt(s['turn_overhead_ms'].get('p99'), 2)} ms, interruption p99 "
        f"{report.fmt(s['interruption_ms'].get('p99'), 2)} ms, CPU/session-s "
        f"{report.fmt(data['resources']['cpu_per_session_second'], 4)}, "
        f"failed {s['failed_sessions']}/{s['sessions']}\n")
    return data


def saturated(run: dict) -> str | None:
    """Why this run counts as saturated (the series stops), or None."""
    if run.get("error"):
        return run["error"][:80]
    s = run["summary"]
    if s["sessions"] and s["failed_sessions"] / s["sessions"] > 0.05:
        return f"{s['failed_sessions']} of {s['sessions']} sessions failed"
    p50 = s["turn_overhead_ms"].get("p50")
    if p50 is None or p50 > 500:
        return f"turn overhead p50 {report.fmt(p50)} ms > 500 ms"
    util = run["resources"].get("cpu_utilisation")
    lag = run["resources"]["loop_lag_ms"].get("p50")
    if lag is not None and lag > 50:
        return f"event-loop lag p50 {lag:.0f} ms"
    if util is not None and util > 0.98:
        return f"CPU {util:.0%} of one core"
    return None


def runtimes_of(args: argparse.Namespace) -> list[str]:
    """The runtimes this run measures: ours, then whichever peers are installed and wanted."""
    return (["trio"] + (["asyncio"] if args.with_asyncio else [])
            + (["pipecat"] if args.with_pipecat else []))


def sweep(args: argparse.Namespace, log: Any) -> dict[str, Any]:
    runtimes = runtimes_of(args) + (["trio-worker"] if args.worker_mode else [])
    raw_dir = args.out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    runs: list[dict] = []
    saturation: dict[str, dict | None] = {rt: None for rt in runtimes}
    ns = args.ns
    t_start = time.perf_counter()

    def timeout_for(n: int) -> float:
        return 240.0 + 0.5 * n

    def add(run: dict, **extra: Any) -> dict:
        run.update(extra)
        runs.append(run)
        return run

    for i, n in enumerate(ns):
        order = runtimes if i % 2 == 0 else list(reversed(runtimes))
        for rt in order:
            if saturation[rt] is not None:
                continue
            rounds = args.rounds_n1 if n == 1 else 1
            run = run_worker(rt, n, script=args.script, transforms="off", gc_mode=args.gc,
                             rounds=rounds, out_dir=raw_dir, timeout=timeout_for(n), log=log)
            why = saturated(run)
            if why:
                run["saturated"] = why
                saturation[rt] = {"n": n, "reason": why}
                log(f"    {rt}: saturated at N={n} ({why}); its series stops here\n")
            if "summary" in run:
                add(run)
    # the default text transforms at N = 1 (the asyncio side holds a token back)
    if args.transforms_row:
        for rt in runtimes:
            run = run_worker(rt, 1, script=args.script, transforms="on", gc_mode=args.gc,
                             rounds=args.rounds_n1, out_dir=raw_dir, timeout=timeout_for(1),
                             log=log)
            if "summary" in run:
                add(run)
    # refine where turn p99 passes 100 ms (bisection between the grid points)
    for rt in runtimes:
        for _ in range(args.capacity_steps):
            cap = report.capacity(runs, rt)
            lo, hi = cap["last_ok"], cap["first_over"]
            if lo is None or hi is None or hi - lo <= max(5, lo // 8):
                break
            mid = (lo + hi) // 2
            run = run_worker(rt, mid, script=args.script, transforms="off", gc_mode=args.gc,
                             rounds=1, out_dir=raw_dir, timeout=timeout_for(mid), log=log)
            if "summary" not in run:
                run = {"runtime": rt, "n": mid, "transforms": "off",
                       "summary": {"turn_overhead_ms": {"p99": None}, "failed_sessions": mid,
                                   "sessions": mid}}
            add(run, refinement=True)
    log(f"sweep done in {time.perf_counter() - t_start:.0f} s\n")
    return {"runs": runs, "saturation": saturation}


# the context sweep: (earlier messages, unused tools besides the transfer): 1, 50, 200 tools
CONTEXT_SIZES = [(0, 0), (1000, 0), (5000, 0), (0, 49), (0, 199)]


def context_sweep(args: argparse.Namespace, log: Any) -> list[dict]:
    """CPU per turn as the context grows: each runtime at N = 1 on the full script with 0,
    1,000 and 5,000 earlier messages and with 1, 50 and 200 tools (one process each)."""
    raw_dir = args.out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    runs = []
    for rt in runtimes_of(args):
        for history, tools in CONTEXT_SIZES:
            run = run_worker(rt, 1, script="full", transforms="off", gc_mode=args.gc,
                             rounds=args.context_rounds, out_dir=raw_dir, timeout=300.0,
                             log=log, history=history, tools=tools)
            if "summary" in run:
                runs.append(run)
    return runs


# where the CPU figure's N are split into its parts and repeated (the CPU target counts every
# N both runtimes ran unsaturated)
CPU_SPLIT_NS = (1, 10, 50, 100)


def cpu_repeats(args: argparse.Namespace, log: Any,
                saturation: dict[str, dict | None]) -> list[dict]:
    """The CPU target's points once more: ``args.cpu_repeats`` more runs of the sweep's script
    at each of ``CPU_SPLIT_NS`` for agents_trio and LiveKit, the two alternating (a drift of the
    host's state reaches both). At N = 10 one run's CPU figure varied by a third between runs
    of the same code on this VM, more than the target's margin; the target takes each
    runtime's median. A runtime whose series stopped at or below an N is not repeated there."""
    raw_dir = args.out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    runtimes = ["trio"] + (["asyncio"] if args.with_asyncio else [])
    out = []
    for n in (n for n in CPU_SPLIT_NS if n in args.ns):
        for i in range(args.cpu_repeats):
            for rt in (runtimes if i % 2 else list(reversed(runtimes))):
                sat = saturation.get(rt)
                if sat is not None and sat["n"] <= n:
                    continue
                run = run_worker(rt, n, script=args.script, transforms="off", gc_mode=args.gc,
                                 rounds=1, out_dir=raw_dir, timeout=240.0 + 0.5 * n, log=log,
                                 tag=f"repeat{i + 1}")
                if "resources" in run:
                    res = run["resources"]
                    out.append({"runtime": rt, "n": n, "repeat": i + 1,
                                "cpu_per_session_second": res["cpu_per_session_second"],
                                "cpu_utilisation": res["cpu_utilisation"],
                                "host_other_cores": res["host_other_cores"]})
    return out


def plumbing_repeats(args: argparse.Namespace, log: Any) -> list[dict]:
    """The plumbing target's point once more: ``args.plumbing_repeats`` more runs at N = 1
    (``args.rounds_n1`` rounds each, transforms off) for agents_trio and LiveKit, the two
    alternating. One run's p50 at N = 1 moved by about a tenth between runs of the same code
    on this VM (0.83–0.99 ms for ours), more than the target's margin; the target takes each
    runtime's median."""
    raw_dir = args.out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    runtimes = ["trio"] + (["asyncio"] if args.with_asyncio else [])
    out = []
    for i in range(args.plumbing_repeats):
        for rt in (runtimes if i % 2 else list(reversed(runtimes))):
            run = run_worker(rt, 1, script=args.script, transforms="off", gc_mode=args.gc,
                             rounds=args.rounds_n1, out_dir=raw_dir, timeout=240.5,
                             log=log, tag=f"plumbing{i + 1}")
            s = run.get("summary")
            if s:
                out.append({"runtime": rt, "n": 1, "repeat": i + 1,
                            "plumbing_p50": s["turn_plumbing_ms"].get("p50"),
                            "overhead_p50": s["turn_overhead_ms"].get("p50")})
    return out


def capacity_repeats(args: argparse.Namespace, log: Any, runs: list[dict]) -> list[dict]:
    """The runs on each side of every in-process runtime's 100 ms crossing once more:
    ``args.capacity_repeats`` more runs at the sweep's last N under the limit and first N over
    it, the runtimes alternating. Near the crossing one run's p99 turns on whether one
    full collection of the cyclic collector (tens of ms, the longer the more objects the
    sessions hold) lands in its ~25 s phase, so a single run can move the crossing by a
    hundred sessions; the capacity target takes each N's median p99 (``report.capacity``)."""
    raw_dir = args.out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    points = {}
    for rt in runtimes_of(args):
        cap = report.capacity(runs, rt)
        points[rt] = [n for n in (cap["last_ok"], cap["first_over"]) if n is not None]
    out = []
    for i in range(args.capacity_repeats):
        order = runtimes_of(args) if i % 2 else list(reversed(runtimes_of(args)))
        for rt in order:
            for n in points[rt]:
                run = run_worker(rt, n, script=args.script, transforms="off", gc_mode=args.gc,
                                 rounds=1, out_dir=raw_dir, timeout=240.0 + 0.5 * n, log=log,
                                 tag=f"capacity{i + 1}")
                s = run.get("summary")
                out.append({"runtime": rt, "n": n, "repeat": i + 1,
                            "p99": s["turn_overhead_ms"].get("p99") if s else None,
                            "failed_sessions": s["failed_sessions"] if s else n,
                            "sessions": s["sessions"] if s else n})
    return out


def cpu_split(args: argparse.Namespace, log: Any) -> list[dict]:
    """The CPU per session-second taken apart, ours and LiveKit's: each of ``CPU_SPLIT_NS`` in
    the sweep once more with the sweep's script, once with sessions that only listen (10 s of
    silence: the frames through the session, no turns) and once with the fake network's
    inputs alone (no session: what the fake network costs that runtime's process). Every run
    counts the process's wake-ups; one more run of the fake network with a single input
    (N = 1) gives what a wake-up with almost nothing to do costs on that runtime, the price
    of the wake-ups in the figure's floor (``report.wake_floor``)."""
    raw_dir = args.out / "raw"
    raw_dir.mkdir(parents=True, exist_ok=True)
    out = []
    runtimes = ["trio"] + (["asyncio"] if args.with_asyncio else [])
    points = [(n, script) for n in CPU_SPLIT_NS if n in args.ns
              for script in (args.script, "listen", "network")]
    if (1, "network") not in points:   # the bare wake-up's run
        points.insert(0, (1, "network"))
    for n, script in points:
        for rt in runtimes:
            run = run_worker(rt, n, script=script, transforms="off", gc_mode=args.gc,
                             rounds=1, out_dir=raw_dir, timeout=240.0 + 0.5 * n, log=log,
                             tag="split")
            if "resources" in run:
                res = run["resources"]
                out.append({"runtime": rt, "n": n,
                            "script": "whole" if script == args.script else script,
                            "cpu_per_session_second": res["cpu_per_session_second"],
                            "wakeups_per_session_second": res.get("wakeups_per_session_second"),
                            "cpu_per_wakeup_us": res.get("cpu_per_wakeup_us"),
                            "cpu_utilisation": res["cpu_utilisation"],
                            "host_other_cores": res["host_other_cores"]})
    return out


def notes(meta: dict) -> list[str]:
    return [
        ("Notes: every runtime runs the same fakes (`bench/core.py`: VAD, STT, LLM, TTS logic, "
        "the script and the timings) behind its own model interfaces; audio frames "
        "come from one fake-network task per process that hands every input its due 20 ms "
        "frame, on a phase of the period set by the sessions' schedule (sessions started "
        "a multiple of 20 ms apart get their frames in the same wake-up), not by how soon "
        "each runtime first reads its input. Everything the fakes wait for (the network's "
        "frames, the LLM's tokens, the TTS's audio, the end of the sink's playout) arrives "
        "the way a real client's data does, through the loop's I/O wait: one kernel timer "
        "per process (`timerfd`, `bench/kernel_timer.py`) armed for the earliest due arrival, "
        "the time left rounded up to whole milliseconds as an `epoll_wait` timeout is, and "
        "watched by the loop like a socket (Trio's `wait_readable`, asyncio's `add_reader`); "
        "when it fires, every waiter whose data is due is woken (`Arrivals` in "
        "`bench/trio_side.py` and `bench/asyncio_arrivals.py`). A loop timer per wait would "
        "charge each runtime its timer machinery for what is I/O in production: on Trio a "
        "cancel scope per wait, ended by raising `Cancelled` (134 Python calls per wake-up "
        "of a bare loop, counted with `sys.setprofile`, against 54 for a wake-up by I/O; "
        "asyncio's are about even: 62 by its timer, 50 by I/O). Even so a wake-up costs "
        "more on Trio: with the fake network alone and one input, each wake-up of the "
        "process ran 96 Python frames (calls and resumptions, `sys.setprofile`) on Trio and "
        "47 on asyncio, for the same work: the I/O wait wakes the arrivals' task, which "
        "reschedules the network's task, two steps of Trio's scheduler, written in Python; "
        "on asyncio the reader's callback sets a future and the network's task steps in C "
        "(`_asyncio`). `gc.freeze()` after warm-up "
        "everywhere (`--gc default` turns it off). "
        "LiveKit's `aclose()` includes its fixed 2.0 s wait for a last STT transcript "
        "(`session_close_transcript_timeout`); ours has no such wait. Our model protocol "
        "lets the fake VAD/STT work inside `push_frame` (and the VAD return that frame's "
        "events from it, handled in the pushing task; its iteration, which yields nothing "
        "and ends with the input, is an `agents_trio.nurseries.EndOfInput`, as "
        "agents_trio's own `SileroVAD` stream's is), while LiveKit's stream base "
        "classes put every frame through an input channel and a task: part of the "
        "per-frame difference is the model interface, not the session. Each runtime takes "
        "its input frames through its own input interface: ours attaches to the input's "
        "`FrameFeed` (as with agents_trio's room input), so the network's step hands the "
        "frame to the session's recognition; LiveKit's `AudioInput` and Pipecat's input "
        "transport are pulled or queued, a wake-up of their reading task per frame. The “default "
        "transforms” rows do not compare like with like: LiveKit's markdown/emoji filters "
        "hold the first token until the second arrives (+20 ms here), ours filter token by "
        "token; the plumbing rows (transforms off) are the comparison. Our endpointing "
        "wait ends on a kernel timer (`timerfd`, `agents_trio.nurseries.sleep_precisely`); "
        "the other runtimes' end on their loop's `epoll_wait` timeout, whole milliseconds "
        "rounded up (0-1 ms late): that is in the “VAD end of speech → LLM request” stage."),
        "",
        ("CPU per session-second is the process's whole CPU time over the measured phase (every "
         "thread, the 5 Hz monitor's wake-ups included, nothing subtracted) over the sessions' "
         "scripted seconds. Earlier runs subtracted an idle rate measured with only the monitor "
         "awake (20 Hz then): a wake-up of an otherwise idle loop costs a few hundred µs of CPU "
         "on this VM and much less among sessions, so it over-corrected, most at low N and most "
         "for the runtime with the smaller figure (ours). The table “Where the CPU per "
         "session-second goes” takes it apart at N = 10, 50 and 100: the fake network alone "
         "wakes the process for every frame period, and on this VM a wake-up of an otherwise "
         "idle loop costs a few hundred µs of CPU on any runtime (a bare loop woken by a "
         "kernel timer every 20 ms: about 240 µs on Trio, 215–285 µs on asyncio, 75 µs for "
         "`time.sleep`), so at low N that floor is a large part of our figure. At low N "
         "one run's figure also varies from run to run by more than the "
         "target's margin, so the sweep runs N = 10, 50 and 100 twice more for agents_trio "
         "and LiveKit (`--cpu-repeats`), the two alternating, and the CPU target takes each "
         "runtime's median; the table “run by run” gives every run. The capacity figure "
         "is noisy for another reason: near a runtime's 100 ms crossing, the p99 of a run "
         "of about 25 s turns on whether a full collection of the cyclic collector lands in "
         "it while many turns are in flight (at 450 of our sessions a run saw three, and the "
         "last, 76 ms, decided its p99). So the sweep runs the N on each side of every "
         "in-process runtime's crossing twice more (`--capacity-repeats`), the runtimes "
         "alternating, and the capacity target takes each N's median p99; the table “turn "
         "p99 around each runtime's 100 ms crossing” gives every run and the crossing from "
         "the sweep's runs alone. The plumbing target, at N = 1, moves by about a tenth "
         "between runs of the same code; with `--plumbing-repeats` (two by default) the "
         "sweep runs N = 1 twice more for agents_trio and LiveKit, alternating, and the "
         "target takes each runtime's median (the targets table then says “medians of 3 "
         "runs”, and a table gives every run)."),
        "",
        ("The fake TTS synthesizes at 2× real time in 100 ms chunks (`BENCH_TTS_SPEED`); the "
         "sink accepts frames without blocking and plays them on a real-time clock; AEC "
         "warm-up and the user-away timer are off on both sides; the asyncio side runs "
         "interruption mode `vad`, endpointing mode `fixed`, recording off. Each run's raw "
         "JSON (every sample, GC pauses, loop lag) is written to `bench/results/raw/`."),
        "",
        PIPECAT_NOTE,
    ]


PIPECAT_NOTE = (
    "Pipecat (`bench/pipecat_side.py`): the default pipeline (input, STT, user aggregator, "
    "LLM, TTS, output, assistant aggregator) in a `PipelineWorker` with default parameters "
    "(RTVI and turn tracking on, metrics off), one `WorkerRunner` per session, the fakes on "
    "Pipecat's own base classes (`BaseInputTransport`, `VADAnalyzer`, `STTService`, "
    "`LLMService`, `TTSService` fed like its websocket services, `BaseOutputTransport`). "
    "Measured at the same points: turn overhead ends at the first audio chunk the output "
    "transport writes; interruption runs from the VAD's start of speech to the output "
    "transport handling the `InterruptionFrame` (Pipecat's counterpart of `clear_buffer()`: "
    "the queued audio is dropped there). Where the counterpart is not exact: Pipecat's VAD "
    "runs inside the user aggregator and its `VADAnalyzer` base class hands every frame to a "
    "worker thread and measures its volume (what any VAD costs on Pipecat); its default end "
    "of turn is the Smart Turn model, which the VAD + fixed-endpointing configuration of the "
    "other two has no counterpart for, so `SpeechTimeoutUserTurnStopStrategy` ends the turn "
    "0.2 s after the VAD's 0.3 s stop (0.5 s after the speech, as elsewhere); Pipecat "
    "broadcasts an interruption at every user turn start, not only while the agent speaks; "
    "the output writes 40 ms chunks paced in real time, as Pipecat's websocket transport "
    "does; start = runner start → `on_pipeline_started`, aclose = `stop_when_done()` → the "
    "runner returns; CPU and RSS are the whole process's, as elsewhere (the VAD's worker "
    "threads included). No counterpart: the handoff (Pipecat has no agents; the transfer tool is "
    "a registered function that adds a developer message and asks for no inference, and the "
    "handoff column stays empty). The “default transforms” row is Pipecat's default "
    "sentence aggregation before the TTS (token by token in the plumbing rows). Pipecat logs "
    "through loguru: warnings and errors are counted in the raw JSON, not printed, as the "
    "other two runtimes' loggers sit at WARNING.")


def write_results(results: dict[str, Any], out: Path, *, readme: bool, log: Any) -> None:
    out.mkdir(parents=True, exist_ok=True)
    # every sample stays in raw/ (one file per run); the summary file keeps the statistics
    slim = dict(results, runs=[{k: v for k, v in r.items() if k != "samples"}
                               for r in results["runs"]],
                context_sweep=[{k: v for k, v in r.items() if k != "samples"}
                               for r in results.get("context_sweep", [])])
    (out / "bench.json").write_text(json.dumps(slim, indent=1))
    # the --gc off and --gc young diagnosis runs saved beside it
    if results["meta"].get("gc", "").startswith("gc.freeze() after"):
        for key, folder in (("gc_off", "gc-off"), ("gc_young", "gc-young")):
            saved = out / folder / "bench.json"
            if saved.exists():
                results = dict(results, **{key: json.loads(saved.read_text())})
    heap = out / "heap.json"   # python -m bench --heap
    if heap.exists():
        results = dict(results, heap=json.loads(heap.read_text()))
    md = report.markdown(results)
    (out / "bench.md").write_text("# Benchmark results\n\n" + md)
    png = out / "latency.png"
    if report.plot(results, str(png)):
        log(f"plot: {png}\n")
    else:
        log("matplotlib is not installed: no plot (pip install -e '.[bench]')\n")
    log(f"report: {out / 'bench.md'}\n")
    if readme:
        update_readme(report.markdown(results, stages=False), results)
        log("README.md: section “Benchmarks” updated\n")


README_HEADER = "## Benchmarks"


def update_readme(md: str, results: dict[str, Any]) -> None:
    """Replace the README's last section, “Benchmarks”, with the latest table."""
    path = ROOT / "README.md"
    text = path.read_text()
    body = [
        README_HEADER,
        "",
        ("`python -m bench` runs the same scripted conversation (two Q&A turns, a long story "
        "interrupted 0.8–1.4 s into its audio, the reply, a handoff by tool, one turn with the "
        "new agent) on agents_trio, on LiveKit Agents and on Pipecat (which has no handoff: "
        "there the tool is a plain function call), in real time, N sessions per "
        "process, each runtime and N in its own process, with the same fakes, timings, "
        "Python and GC settings (install the peers with `pip install -e '.[bench]'`). "
        "Turn overhead = first agent audio at the sink − (speech end + 0.5 s endpointing) − "
        "LLM ttft (0.2 s) − TTS ttfb (0.1 s); interruption = the VAD event that crosses "
        "min_duration → `clear_buffer()` (on Pipecat: the output transport handling the "
        "interruption). The ratios (ours / each peer's, same sweep) are the "
        "headline; absolute times depend on the machine. `python -m bench --quick` is the "
        "CI smoke test, `--virtual` gives the logical latencies in Trio virtual time, "
        "`--profile` shows where the time goes. Full results with the per-stage breakdown: "
        "`bench/results/bench.md` (and `bench.json`), plot `bench/results/latency.png`, "
        "profile `bench/results/profile.md`, virtual-time latencies "
        "`bench/results/virtual.md`."),
        "",
        md.rstrip(),
        "",
    ]
    if README_HEADER in text:
        head = text[: text.index(README_HEADER)]
    else:
        head = text.rstrip() + "\n\n"
    path.write_text(head + "\n".join(body))


def quick(args: argparse.Namespace, log: Any) -> int:
    """CI smoke: N = 10 on the short script (our side; each peer too if installed: about 20 s
    each; CI installs neither), plus the virtual-time mode. Asserts that every run produced
    its latencies."""
    t = time.perf_counter()
    out = args.out if args.out_given else Path(tempfile.mkdtemp(prefix="bench-quick-"))
    runtimes = runtimes_of(args)
    problems = []
    runs = []
    for rt in runtimes:
        run = run_worker(rt, args.ns[0] if args.ns_given else 10, script="quick",
                         transforms="off", gc_mode=args.gc, rounds=1, out_dir=out,
                         timeout=120, log=log)
        runs.append(run)
        if "summary" not in run:
            problems.append(f"{rt}: {run.get('error')}")
            continue
        s = run["summary"]
        if s["failed_sessions"]:
            problems.append(f"{rt}: {s['failed_sessions']} sessions failed: {s['failures'][:3]}")
        if not s["turn_overhead_ms"].get("n") or not s["interruption_ms"].get("n"):
            problems.append(f"{rt}: no turn or interruption samples")
    from . import virtual
    v = virtual.run(n=2, kind="quick")
    if not v["deterministic"] or not v["sessions"]:
        problems.append(f"virtual mode: {v}")
    results = {"meta": _meta(args, script="quick"), "runs": [r for r in runs if "summary" in r],
               "saturation": {}, "targets": []}
    (out / "quick.json").write_text(json.dumps(results, indent=1))
    (out / "quick.md").write_text(report.markdown(results))
    log(report.markdown(results))
    log(f"virtual: {json.dumps(v['latencies_ms'])}\n")
    log(f"quick: {time.perf_counter() - t:.0f} s, results in {out}\n")
    if problems:
        sys.stderr.write("bench --quick FAILED:\n  " + "\n  ".join(problems) + "\n")
        return 1
    if not args.with_asyncio:
        log("(livekit-agents is not installed: no LiveKit run)\n")
    pipecat_note(args, log)
    return 0


def pipecat_note(args: argparse.Namespace, log: Any) -> None:
    if args.with_pipecat:
        return
    if args.no_pipecat or args.ours_only:
        log("(Pipecat skipped on request)\n")
    else:
        log("(pipecat-ai is not installed: no Pipecat run; pip install -e '.[bench]' adds it)\n")


def _meta(args: argparse.Namespace, *, script: str) -> dict[str, Any]:
    theirs = None
    if args.with_asyncio:
        try:
            from importlib.metadata import version
            theirs = f"livekit-agents {version('livekit-agents')}"
        except Exception:  # noqa: BLE001
            theirs = "livekit-agents"
    from importlib.metadata import version as v

    peer = None
    if args.with_pipecat:
        try:
            peer = f"pipecat-ai {v('pipecat-ai')}"
        except Exception:  # noqa: BLE001
            peer = "pipecat-ai"

    from .core import build_script
    return {
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "machine": machine(),
        "python": platform.python_version(),
        "ours": f"agents_trio {v('agents-trio')} (trio {v('trio')})",
        "theirs": theirs,
        "peer": peer,
        "peer_skipped": have_pipecat() and not args.with_pipecat,   # --no-pipecat/--ours-only
        "gc_mode": args.gc,
        "gc": {"freeze": "gc.freeze() after warm-up, every runtime (worker mode: the job "
                         "host's young threshold, 5,000)",
               "off": "gc.freeze() and gc.disable() after warm-up, every runtime (diagnosis: "
                      "no cyclic-collector pauses)",
               "young": "gc.freeze() and the young threshold 5,000 after warm-up, every "
                        "runtime (diagnosis)"}.get(args.gc,
                                                         "default thresholds, every runtime"),
        "script": script,
        "script_seconds": build_script(0, kind=script).close_at,
        "code": getattr(args, "tree_info", {}),
        "busy_thread_cpu_per_wall_s": round(busy_thread_cpu_ratio(), 3),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="CI smoke test (< 1 min)")
    mode.add_argument("--virtual", action="store_true",
                      help="logical latencies in Trio virtual time (our side)")
    mode.add_argument("--profile", action="store_true", help="hops per frame and CPU hot spots")
    mode.add_argument("--adapter", action="store_true",
                      help="Silero VAD through adapt(): CPU and wall time per window, per hop, "
                           "lockstep and inside the voice session (bench/results/adapter.md)")
    mode.add_argument("--heap", action="store_true",
                      help="what a full collection of the cyclic collector walks: tracked "
                           "objects and references per session, by package and type, and a "
                           "timed full collection (bench/results/heap.md)")
    mode.add_argument("--cpu-split-only", action="store_true",
                      help="run only the CPU figure's split (whole, listening, fake network, "
                           "wake-ups) at N = 1, 10, 50, 100 (or --ns) into the saved "
                           "bench.json, and rewrite the report")
    mode.add_argument("--report-only", action="store_true",
                      help="rewrite the report, plot and README from the saved bench.json")
    ap.add_argument("--ns", help="comma-separated N (default 1,10,50,100,200,300)")
    ap.add_argument("--script", choices=["full", "quick"], default="full")
    ap.add_argument("--gc", choices=["freeze", "default", "off", "young"], default="freeze",
                    help="freeze: gc.freeze() after warm-up (default); default: the "
                         "interpreter's thresholds; off: the cyclic collector disabled after "
                         "warm-up (a diagnosis: the runs without its pauses); young: "
                         "gc.freeze() and the young threshold the job host sets (5,000), "
                         "every runtime (a diagnosis)")
    ap.add_argument("--ours-only", action="store_true",
                    help="skip the peers (LiveKit Agents and Pipecat)")
    ap.add_argument("--no-pipecat", action="store_true", help="skip the Pipecat runtime")
    ap.add_argument("--rounds-n1", type=int, default=4,
                    help="sequential rounds at N = 1 (more samples)")
    ap.add_argument("--cpu-repeats", type=int, default=2,
                    help="more runs at N = 10, 50, 100 (agents_trio and LiveKit, alternating); "
                         "the CPU target takes each runtime's median")
    ap.add_argument("--plumbing-repeats", type=int, default=2,
                    help="more runs at N = 1 (agents_trio and LiveKit, alternating); the "
                         "plumbing target takes each runtime's median p50")
    ap.add_argument("--capacity-steps", type=int, default=3,
                    help="extra runs to locate where turn p99 passes 100 ms")
    ap.add_argument("--capacity-repeats", type=int, default=2,
                    help="more runs on each side of every runtime's 100 ms crossing (the "
                         "runtimes alternating); the capacity target takes each N's median p99")
    ap.add_argument("--worker-mode", action="store_true",
                    help="also run worker mode (needs livekit-agents): sessions per worker "
                         "process and RSS per session with LiveKit's AgentServer")
    ap.add_argument("--no-transforms-row", dest="transforms_row", action="store_false",
                    help="skip the N = 1 row with the default text transforms")
    ap.add_argument("--context-sweep", choices=["on", "off", "only"], default="on",
                    help="CPU per turn with 0/1,000/5,000 earlier messages and 1/50/200 tools "
                         "(N = 1, every runtime); 'only' runs just that")
    ap.add_argument("--context-rounds", type=int, default=2,
                    help="sequential sessions per context size")
    ap.add_argument("--no-readme", dest="readme", action="store_false",
                    help="do not update README.md")
    ap.add_argument("--out", type=Path, help="results directory (default bench/results)")
    ap.add_argument("--tree", choices=["head", "working"],
                    help="agents_trio to measure: as committed at HEAD (default, except "
                         "--quick) or the working tree")
    args = ap.parse_args(argv)
    args.ns_given = args.ns is not None
    args.ns = [int(x) for x in args.ns.split(",")] if args.ns else DEFAULT_NS
    args.out_given = args.out is not None
    args.out = args.out or RESULTS
    args.out.mkdir(parents=True, exist_ok=True)  # a new --out DIR is created
    args.with_asyncio = have_livekit_agents() and not args.ours_only
    args.with_pipecat = have_pipecat() and not (args.ours_only or args.no_pipecat)

    def log(msg: str) -> None:
        sys.stdout.write(msg)
        sys.stdout.flush()

    tree_info = prepare_tree(args.tree or ("working" if args.quick or args.report_only
                                           or args.virtual or args.adapter else "head"), log)
    args.tree_info = tree_info
    args.tree_dir = TREE
    if args.quick:
        return quick(args, log)
    if args.virtual:
        from . import virtual
        return virtual.main(args, log)
    if args.profile:
        from . import hotspots
        return hotspots.main(args, log)
    if args.heap:
        from . import heap
        return heap.main(args, log)
    if args.adapter:
        from . import adapter_hops
        return adapter_hops.main(["--out", str(args.out)])
    if args.report_only or args.cpu_split_only:
        results = json.loads((args.out / "bench.json").read_text())
        if args.cpu_split_only:
            log(f"{machine()}, Python {platform.python_version()}\n")
            args.ns = args.ns if args.ns_given else list(CPU_SPLIT_NS)
            args.script = results["meta"]["script"]
            args.gc = results["meta"].get("gc_mode", args.gc)
            fresh = cpu_split(args, log)
            # the runs not made again are kept
            again = {(x["runtime"], x["n"], x["script"]) for x in fresh}
            results["cpu_split"] = [x for x in results.get("cpu_split") or []
                                    if (x["runtime"], x["n"], x["script"]) not in again] + fresh
            results["meta"]["cpu_split_at"] = {
                "date": time.strftime("%Y-%m-%d %H:%M"), "code": tree_info}
        results["targets"] = (report.compute_targets(results["runs"],
                                                     results.get("cpu_repeats"),
                                                     results.get("capacity_repeats"),
                                                     results.get("plumbing_repeats"))
                              if results["meta"].get("theirs") or results["meta"].get("peer")
                              else [])
        results["notes"] = notes(results["meta"])
        write_results(results, args.out, readme=args.readme, log=log)
        return 0

    if not args.with_asyncio:
        log("livekit-agents is not installed: no LiveKit column "
            "(pip install -e '.[bench]' for the side-by-side comparison)\n")
    pipecat_note(args, log)
    log(f"{machine()}, Python {platform.python_version()}\n")
    results: dict[str, Any] = {"meta": _meta(args, script=args.script)}
    if args.context_sweep == "only":
        results.update(runs=[], saturation={})
    else:
        results.update(sweep(args, log))
        if args.capacity_repeats:
            log(f"Turn p99 on each side of the 100 ms crossing, {args.capacity_repeats} more "
                "runs each:\n")
            results["capacity_repeats"] = capacity_repeats(args, log, results["runs"])
        if args.plumbing_repeats and 1 in args.ns:
            log(f"Plumbing at N = 1, {args.plumbing_repeats} more runs each:\n")
            results["plumbing_repeats"] = plumbing_repeats(args, log)
        if args.cpu_repeats:
            log(f"CPU per session-second at N = {', '.join(map(str, CPU_SPLIT_NS))}, "
                f"{args.cpu_repeats} more runs each:\n")
            results["cpu_repeats"] = cpu_repeats(args, log, results["saturation"])
        from . import turn_cost
        log("CPU per text turn as the conversation grows … ")
        results["turn_cost"] = turn_cost.measure_all(with_asyncio=args.with_asyncio, tree=TREE)
        log("done\n")
        log("CPU per session-second taken apart (listening only, the fake network alone):\n")
        results["cpu_split"] = cpu_split(args, log)
    if args.context_sweep != "off":
        results["context_sweep"] = context_sweep(args, log)
    if args.context_sweep == "only":
        # on its own files: bench.json, bench.md and the README keep the last full sweep
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "context.json").write_text(json.dumps(dict(results, context_sweep=[
            {k: v for k, v in r.items() if k != "samples"} for r in results["context_sweep"]]),
            indent=1))
        md = "\n".join(report.context_md(results["context_sweep"])) + "\n"
        (args.out / "context.md").write_text("# Turn cost against the context's size\n" + md)
        log(md + f"report: {args.out / 'context.md'}\n")
        return 0
    results["targets"] = (report.compute_targets(results["runs"], results.get("cpu_repeats"),
                                                 results.get("capacity_repeats"),
                                                 results.get("plumbing_repeats"))
                          if args.with_asyncio or args.with_pipecat else [])
    results["notes"] = notes(results["meta"])
    write_results(results, args.out, readme=args.readme, log=log)
    log(report.markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
