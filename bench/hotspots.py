"""``python -m bench --profile``: where our time goes, next to the asyncio runtime.

Three measurements, each runtime in its own process:

1. Hops per audio frame. Sessions that only listen (silence) for a few seconds, with a task-step
   counter (Trio: an ``Instrument``; asyncio: pure-Python tasks and a counting ``Handle._run``)
   and counted channel operations (Trio memory channels; asyncio queues and LiveKit's
   ``aio.Chan``), attributed to the task that ran them. Divided by the frames handed out.
   Then the full script: steps per output frame and per turn.
2. CPU per input frame without a profiler: 50 listening sessions for 10 s (``bench.worker
   --script listen``), process CPU / frames.
3. CPU hot spots: cProfile over the full script at N = 50, grouped by package, and the top
   functions of the runtime.

These runs patch Trio, asyncio and LiveKit classes to count (never agents_trio); the timed runs
of ``python -m bench`` do not.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from . import core
from .environment import have_livekit_agents

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


# -- counting ----------------------------------------------------------------------------------
class Counts:
    def __init__(self) -> None:
        self.steps: collections.Counter[str] = collections.Counter()
        self.sends: collections.Counter[str] = collections.Counter()
        self.receives: collections.Counter[str] = collections.Counter()
        self.active = False

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {"steps": dict(self.steps), "sends": dict(self.sends),
                "receives": dict(self.receives)}

    def reset(self) -> None:
        self.steps.clear()
        self.sends.clear()
        self.receives.clear()


def _short(name: str) -> str:
    for prefix in ("agents_trio.", "bench.", "livekit.agents.", "trio."):
        if name.startswith(prefix):
            return name
    return name


def install_trio_counters(counts: Counts) -> Any:
    import trio
    from trio import _channel

    class StepCounter(trio.abc.Instrument):
        def before_task_step(self, task: Any) -> None:
            if counts.active:
                counts.steps[task.name] += 1

    def task_name() -> str:
        try:
            return trio.lowlevel.current_task().name
        except RuntimeError:
            return "?"

    send_nowait = _channel.MemorySendChannel.send_nowait
    receive_nowait = _channel.MemoryReceiveChannel.receive_nowait

    def counted_send(self: Any, value: Any) -> None:
        if counts.active:
            counts.sends[task_name()] += 1
        return send_nowait(self, value)

    def counted_receive(self: Any) -> Any:
        value = receive_nowait(self)   # raises WouldBlock when empty: not a receive
        if counts.active:
            counts.receives[task_name()] += 1
        return value

    _channel.MemorySendChannel.send_nowait = counted_send
    _channel.MemoryReceiveChannel.receive_nowait = counted_receive

    # a blocked receive is completed by the sender (no receive_nowait): count those too
    receive = _channel.MemoryReceiveChannel.receive

    async def counted_blocking_receive(self: Any) -> Any:
        if self._state.data:
            return await receive(self)
        value = await receive(self)
        if counts.active:
            counts.receives[task_name()] += 1
        return value

    _channel.MemoryReceiveChannel.receive = counted_blocking_receive
    return StepCounter()


def install_asyncio_counters(counts: Counts) -> None:
    import asyncio
    from asyncio import events, tasks

    def task_name(task: Any) -> str:
        coro = task.get_coro()
        return getattr(coro, "__qualname__", type(coro).__name__)

    # Counting asyncio's steps means patching its internals (see the module doc).
    run = events.Handle._run  # noqa: SLF001

    def counted_run(self: Any) -> None:
        if counts.active:
            cb = self._callback
            owner = getattr(cb, "__self__", None)
            if isinstance(owner, tasks._PyTask):  # noqa: SLF001
                key = task_name(owner)
            else:
                key = "callback " + getattr(cb, "__qualname__", repr(cb))[:80]
            counts.steps[key] += 1
        return run(self)

    events.Handle._run = counted_run  # noqa: SLF001

    def current() -> str:
        try:
            t = asyncio.current_task()
        except RuntimeError:
            return "?"
        return task_name(t) if t is not None else "callback"

    from livekit.agents.utils import aio

    chan_send, chan_recv_nowait = aio.Chan.send_nowait, aio.Chan.recv_nowait
    chan_recv = aio.Chan.recv

    def c_send(self: Any, value: Any) -> None:
        if counts.active:
            counts.sends[current()] += 1
        return chan_send(self, value)

    def c_recv_nowait(self: Any) -> Any:
        value = chan_recv_nowait(self)
        if counts.active:
            counts.receives[current()] += 1
        return value

    async def c_recv(self: Any) -> Any:
        # aio.Chan.recv loops on recv_nowait, which is counted
        return await chan_recv(self)

    aio.Chan.send_nowait, aio.Chan.recv_nowait, aio.Chan.recv = c_send, c_recv_nowait, c_recv

    q_put, q_get_nowait = asyncio.Queue.put_nowait, asyncio.Queue.get_nowait
    q_get = asyncio.Queue.get

    def c_put(self: Any, item: Any) -> None:
        if counts.active:
            counts.sends[current()] += 1
        return q_put(self, item)

    def c_get_nowait(self: Any) -> Any:
        item = q_get_nowait(self)
        if counts.active:
            counts.receives[current()] += 1
        return item

    async def c_get(self: Any) -> Any:
        # Queue.get waits, then calls get_nowait, which is counted
        return await q_get(self)

    asyncio.Queue.put_nowait, asyncio.Queue.get_nowait, asyncio.Queue.get = (
        c_put, c_get_nowait, c_get)


# -- worker: hops ------------------------------------------------------------------------------
def hops_trio(n: int, seconds: float) -> dict[str, Any]:
    import trio

    from . import trio_side as side

    counts = Counts()
    instrument = install_trio_counters(counts)
    out: dict[str, Any] = {}

    async def main() -> None:
        network = side.Network()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(network.run)
            await side.warm_up(network)
            for label, kind in (("listen", "listen"), ("full", "full")):
                probes = [core.Probe(index=i, script=core.listening_script(seconds)
                                     if kind == "listen" else core.build_script(i))
                          for i in range(n)]
                counts.reset()
                network.delivered = 0
                counts.active = True
                await side.run_phase(probes, network, spread=0.0, transforms=False)
                counts.active = False
                out[label] = {"counts": counts.snapshot(), "frames_in": network.delivered,
                              "frames_out": sum(p.frames_out for p in probes),
                              "turns": sum(len(p.sink_first_frame) for p in probes)}
                network.delivered = 0
            nursery.cancel_scope.cancel()

    trio.run(main, instruments=[instrument])
    return out


def hops_asyncio(n: int, seconds: float) -> dict[str, Any]:
    import asyncio
    from asyncio import tasks

    counts = Counts()
    install_asyncio_counters(counts)
    from . import asyncio_side as side

    out: dict[str, Any] = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        py_task = tasks._PyTask  # noqa: SLF001 - pure-Python tasks, so that steps can be counted
        loop.set_task_factory(lambda loop, coro, **kw: py_task(coro, loop=loop, **kw))
        network = side.Network()
        net = asyncio.create_task(network.run())
        await side.warm_up(network)
        for label, kind in (("listen", "listen"), ("full", "full")):
            probes = [core.Probe(index=i, script=core.listening_script(seconds)
                                 if kind == "listen" else core.build_script(i))
                      for i in range(n)]
            counts.reset()
            network.delivered = 0
            counts.active = True
            await side.run_phase(probes, network, spread=0.0, transforms=False)
            counts.active = False
            out[label] = {"counts": counts.snapshot(), "frames_in": network.delivered,
                          "frames_out": sum(p.frames_out for p in probes),
                          "turns": sum(len(p.sink_first_frame) for p in probes)}
            network.delivered = 0
        net.cancel()

    asyncio.run(main())
    return out


# -- worker: decision chains in virtual time (our side) ----------------------------------------
# ``Arrivals.run`` wakes the fake network for every frame (and the fake services for their data)
PER_FRAME_TASKS = ("Arrivals.run", "Network.run", "AudioRecognition.input",
                   "AudioRecognition.vad")
FRAME_PRODUCER = "bench.trio_side.Network.run"   # the task our sessions' frames are handled in


LLM_REQUEST = "LLM request"
CLEAR = "clear_buffer"


def chains_trio() -> dict[str, Any]:
    """The task steps taken at the instant of each decision, in virtual time (one session):
    from the end-of-turn timer to the LLM request, and from the threshold frame to the clear."""
    import trio
    import trio.testing

    from . import trio_side as side

    steps: list[tuple[float, str]] = []
    probe = core.Probe(index=0, script=core.build_script(0))

    class Recorder(trio.abc.Instrument):
        """Each task step, and after a step in which the fake LLM got a request or the sink
        was cleared, a pseudo-step ``LLM request`` / ``clear_buffer`` (whichever task did it)."""

        requests = clears = 0

        def before_task_step(self, task: Any) -> None:
            steps.append((trio.current_time(), task.name))

        def after_task_step(self, task: Any) -> None:
            if len(probe.llm_request) != self.requests:
                self.requests = len(probe.llm_request)
                steps.append((trio.current_time(), LLM_REQUEST))
            if len(probe.clears) != self.clears:
                self.clears = len(probe.clears)
                steps.append((trio.current_time(), CLEAR))

    async def main() -> None:
        network = side.Network()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(network.run)
            await side.run_session(probe, network, transforms=False)
            nursery.cancel_scope.cancel()

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0), instruments=[Recorder()])
    t0 = probe.t0
    assert t0 is not None

    def at(t: float) -> list[str]:
        return [name.replace("agents_trio.", "") for tt, name in steps if abs(tt - t) < 1e-9]

    out: dict[str, Any] = {"turns": [], "interrupts": []}
    for u in probe.script.utterances:
        if u.reply is not None and probe.script.replies[u.reply].text:
            names = at(t0 + u.end + core.MIN_DELAY)
            out["turns"].append({"reply": u.reply, "steps": names})
        if u.interrupts is not None:
            th = probe.vad_threshold[u.index]
            out["interrupts"].append({"steps": at(th)})
    return out


# -- worker: cProfile --------------------------------------------------------------------------
GROUPS = [
    ("agents_trio/", "agents_trio"),
    ("/trio/", "trio"),
    ("/livekit/agents/", "livekit.agents"),
    ("/livekit/rtc/", "livekit.rtc"),
    ("/asyncio/", "asyncio"),
    ("/bench/", "bench fakes + harness"),
    ("/msgspec/", "msgspec"),
    ("/pydantic", "pydantic"),
    ("/opentelemetry/", "opentelemetry"),
    ("select.epoll", "epoll (waiting)"),
    ("/outcome/", "trio"),
    ("/sniffio/", "trio"),
    ("/sortedcontainers/", "trio"),
]


def _group(key: tuple) -> str:
    filename, _line, func = key
    probe = f"{filename}:{func}"
    for needle, name in GROUPS:
        if needle in probe:
            return name
    if filename == "~":
        return "builtins (C)"
    return "other Python"


def cprofile_run(runtime: str, n: int, out_prof: str) -> dict[str, Any]:
    from . import worker

    args = ["--runtime", runtime, "--n", str(n), "--script", "full",
            "--out", out_prof + ".json"]
    prof = cProfile.Profile()
    prof.enable()
    try:
        worker.main(args)
    except SystemExit:
        pass
    prof.disable()
    prof.dump_stats(out_prof)
    st = pstats.Stats(out_prof)
    groups: collections.Counter[str] = collections.Counter()
    rows = []
    for key, (_cc, nc, tt, ct, _callers) in st.stats.items():
        groups[_group(key)] += tt
        rows.append((tt, ct, nc, key))
    rows.sort(reverse=True)
    mine = "agents_trio/" if runtime == "trio" else "/livekit/agents/"
    top_runtime = [{"tottime": tt, "cumtime": ct, "calls": nc,
                    "function": f"{Path(k[0]).name}:{k[2]} ({_rel(k[0])}:{k[1]})"}
                   for tt, ct, nc, k in rows if mine in k[0]][:20]
    top_all = [{"tottime": tt, "cumtime": ct, "calls": nc,
                "function": f"{_rel(k[0])}:{k[1]}({k[2]})"} for tt, ct, nc, k in rows[:25]]
    cum = sorted(((ct, nc, k) for k, (cc, nc, tt, ct, _c) in st.stats.items() if mine in k[0]),
                 reverse=True)[:15]
    top_cum = [{"cumtime": ct, "calls": nc,
                "function": f"{Path(k[0]).name}:{k[2]} ({_rel(k[0])}:{k[1]})"}
               for ct, nc, k in cum]
    run = json.loads(Path(out_prof + ".json").read_text())
    return {"groups": dict(groups), "top_runtime": top_runtime, "top_all": top_all,
            "top_runtime_cumulative": top_cum, "total": sum(groups.values()),
            "resources": run["resources"], "summary": run["summary"]}


def _rel(path: str) -> str:
    for marker in ("site-packages/", "/agents_trio/", "/bench/"):
        if marker in path:
            rest = path.split(marker, 1)[1]
            return rest if marker == "site-packages/" else marker.strip("/") + "/" + rest
    return path


def worker_main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--what", choices=["hops", "cprofile", "chains"], required=True)
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    if a.what == "hops":
        res = (hops_trio if a.runtime == "trio" else hops_asyncio)(a.n, 5.0)
    elif a.what == "chains":
        res = chains_trio()
    else:
        res = cprofile_run(a.runtime, a.n, a.out + ".prof")
    Path(a.out).write_text(json.dumps(res))


# -- orchestration -----------------------------------------------------------------------------
_TREE = ROOT


def _spawn(args: list[str], log: Any, timeout: float = 600) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(_TREE) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", *args], cwd=_TREE, env=env, check=False,
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        log(proc.stderr[-3000:])
        raise RuntimeError(f"{args} failed")


def _per(counter: dict[str, int], frames: int, top: int = 12) -> list[tuple[str, float]]:
    items = sorted(counter.items(), key=lambda kv: -kv[1])
    return [(k, v / frames) for k, v in items[:top] if v / frames >= 0.005]


def _hops_md(name: str, res: dict[str, Any]) -> list[str]:
    lis = res["listen"]
    fin = max(1, lis["frames_in"])
    c = lis["counts"]
    steps, sends, recvs = (sum(c[k].values()) / fin for k in ("steps", "sends", "receives"))
    lines = [(f"**{name}**, listening (silence), {lis['frames_in']} input frames: "
             f"{steps:.2f} task steps, {recvs:.2f} channel receives, {sends:.2f} sends per "
             "input frame."), "", "| task | steps / frame | receives / frame | sends / frame |",
             "|---|---|---|---|"]
    keys = sorted(set(c["steps"]) | set(c["sends"]) | set(c["receives"]),
                  key=lambda k: -c["steps"].get(k, 0))
    for k in keys:
        s, r, se = (c[x].get(k, 0) / fin for x in ("steps", "receives", "sends"))
        if max(s, r, se) >= 0.01:
            lines.append(f"| `{k}` | {s:.2f} | {r:.2f} | {se:.2f} |")
    full = res["full"]
    fc = full["counts"]
    tot_steps = sum(fc["steps"].values())
    in_steps = steps * full["frames_in"]
    extra = tot_steps - in_steps
    lines += ["", (f"Full script ({full['turns']} replies with audio, {full['frames_in']} input "
              f"and {full['frames_out']} output frames): {tot_steps} task steps in all; beyond "
              f"the listening cost, {extra:.0f} steps = {extra / max(1, full['frames_out']):.2f} "
              f"per output frame (or {extra / max(1, full['turns']):.0f} per reply)."), ""]
    return lines


def main(args: Any, log: Any) -> int:
    global _TREE
    _TREE = args.tree_dir
    runtimes = ["trio"] + (["asyncio"] if args.with_asyncio and have_livekit_agents() else [])
    tmp = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    results: dict[str, Any] = {}
    n_cprof = args.ns[0] if args.ns_given else 50
    log("trio: decision chains in virtual time … ")
    _spawn(["bench.hotspots", "--worker", "--runtime", "trio", "--what", "chains",
            "--out", str(tmp / "trio-chains.json")], log)
    chains = json.loads((tmp / "trio-chains.json").read_text())
    log("done\n")
    for rt in runtimes:
        log(f"{rt}: hops per frame … ")
        _spawn(["bench.hotspots", "--worker", "--runtime", rt, "--what", "hops", "--n", "5",
                "--out", str(tmp / f"{rt}-hops.json")], log)
        log("cProfile … ")
        _spawn(["bench.hotspots", "--worker", "--runtime", rt, "--what", "cprofile",
                "--n", str(n_cprof), "--out", str(tmp / f"{rt}-cprofile.json")], log)
        log("CPU per listening frame … ")
        _spawn(["bench.worker", "--runtime", rt, "--n", "50", "--script", "listen",
                "--out", str(tmp / f"{rt}-listen.json")], log)
        log("done\n")
        results[rt] = {
            "hops": json.loads((tmp / f"{rt}-hops.json").read_text()),
            "cprofile": json.loads((tmp / f"{rt}-cprofile.json").read_text()),
            "listen": json.loads((tmp / f"{rt}-listen.json").read_text())["resources"],
        }
    md = profile_markdown(results, n_cprof, chains)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "profile.json").write_text(json.dumps(
        {"runtimes": results, "chains": chains, "n_cprofile": n_cprof}, indent=1))
    (args.out / "profile.md").write_text(md)
    log(md)
    log(f"\nprofile: {args.out / 'profile.md'} (pstats files in {tmp})\n")
    return 0


def _chain(steps: list[str], *, start: str | None = None, stop: str | None = None) -> str:
    """The decision's task steps, without the per-frame input tasks that share the instant."""
    seq = [s for s in steps if not s.endswith(PER_FRAME_TASKS) or s.endswith(start or "-")]
    if start is not None and start in seq:
        seq = seq[seq.index(start):]
    if stop is not None:
        cut = [i for i, s in enumerate(seq) if s.endswith(stop)]
        if cut:
            seq = seq[:cut[0] + 1]
    return " → ".join(f"`{'.'.join(s.rsplit('.', 2)[-2:])}`" for s in seq)


def profile_markdown(results: dict[str, Any], n_cprof: int,
                     chains: dict[str, Any] | None = None) -> str:
    names = {"trio": "agents_trio", "asyncio": "LiveKit Agents (asyncio)"}
    lines = ["# Where the time goes", "",
             ("Generated by `python -m bench --profile` (counting runs patch Trio, asyncio and "
             "LiveKit classes; the timed runs do not)."), "", "## Hops per audio frame", ""]
    for rt, res in results.items():
        lines += _hops_md(names[rt], res["hops"])
    if chains:
        t = chains["turns"][0]["steps"]
        i = chains["interrupts"][0]["steps"] if chains["interrupts"] else []
        lines += ["## Decision chains (agents_trio, virtual time)", "",
                  ("The task steps taken at the instant of a decision (one session, "
                  "`MockClock`), without the per-frame input tasks that share the instant:"), "",
                  "- end of turn (endpointing timer fires) → LLM request: "
                  + _chain(t, stop=LLM_REQUEST),
                  "- interruption threshold frame → `clear_buffer()` (the session is attached "
                  "to its input's feed: the frame is handled in the network's step): "
                  + _chain(i, start=FRAME_PRODUCER, stop=CLEAR), ""]
    lines += ["## CPU per input frame (no profiler)", "",
              ("50 sessions listening to silence for 10 s, process CPU per 20 ms input frame "
              "(the fake network, the fake VAD/STT work and the runtime's plumbing):"), "",
              "| runtime | µs per input frame | CPU s per session-s |", "|---|---|---|"]
    for rt, res in results.items():
        c = res["listen"]["cpu_per_session_second"]
        lines.append(f"| {names[rt]} | {c / 50 * 1e6:.1f} | {c:.5f} |")
    lines += ["", f"## CPU hot spots (cProfile, full script, N = {n_cprof})", ""]
    for rt, res in results.items():
        cp = res["cprofile"]
        total = cp["total"] or 1.0
        lines += [f"**{names[rt]}**: share of profiled time by package (tottime):", "",
                  "| package | share |", "|---|---|"]
        for g, t in sorted(cp["groups"].items(), key=lambda kv: -kv[1]):
            if t / total >= 0.005:
                lines.append(f"| {g} | {100 * t / total:.1f} % |")
        lines += ["", f"Top functions of {names[rt]} by own time:", "",
                  "| function | own s | cumulative s | calls |", "|---|---|---|---|"]
        for row in cp["top_runtime"][:15]:
            lines.append(f"| `{row['function']}` | {row['tottime']:.3f} | {row['cumtime']:.3f} "
                         f"| {row['calls']} |")
        lines += ["", f"Top functions of {names[rt]} by cumulative time:", "",
                  "| function | cumulative s | calls |", "|---|---|---|"]
        for row in cp["top_runtime_cumulative"][:12]:
            lines.append(f"| `{row['function']}` | {row['cumtime']:.3f} | {row['calls']} |")
        lines += ["", "Top functions overall by own time:", "",
                  "| function | own s | calls |", "|---|---|---|"]
        for row in cp["top_all"][:15]:
            lines.append(f"| `{row['function']}` | {row['tottime']:.3f} | {row['calls']} |")
        lines.append("")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
    else:
        print("use: python -m bench --profile", file=sys.stderr)
        sys.exit(2)
