"""Virtual-time mode: the logical latencies of the decision points, deterministically.

The same fakes and script as the real-time run, under ``trio.testing.MockClock(autojump_threshold
=0)``: no CPU time passes, so every latency left is a logical one — a timer the runtime adds, a
decision taken a frame late. Run twice; the report says whether both runs agree exactly.

- end of turn (speech end + min_delay) → reply scheduled (``speech_created``; with preemptive
  generation off, the reply is created and scheduled in the same step)
- end of turn → LLM request
- turn overhead as in the real-time report (first audio − end of turn − ttft − ttfb)
- interruption threshold event → ``clear_buffer``
- tool return → new agent's ``on_enter`` (handoff)
"""

from __future__ import annotations

import json
from typing import Any

import trio
import trio.testing

from . import core

MS = 1000.0


async def _run(n: int, kind: str) -> list[dict[str, Any]]:
    from . import trio_side as side

    network = side.Network()
    probes = [core.Probe(index=i, script=core.build_script(i, kind=kind)) for i in range(n)]
    created: dict[int, list[float]] = {i: [] for i in range(n)}
    states: dict[int, list[tuple[float, str]]] = {i: [] for i in range(n)}

    def hook(i: int):
        def on_session(session: Any) -> None:
            session.on("speech_created", lambda ev: created[i].append(trio.current_time()))
            session.on("agent_state_changed", lambda ev: states[i].append(
                (trio.current_time(), ev.new_state)))
        return on_session

    async with trio.open_nursery() as nursery:
        nursery.start_soon(network.run)
        async with trio.open_nursery() as sessions:
            for i, p in enumerate(probes):
                sessions.start_soon(lambda p=p, i=i: side.run_session(
                    p, network, transforms=False, on_session=hook(i)))
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()

    out = []
    for i, p in enumerate(probes):
        rec: dict[str, Any] = {"session": i, "error": p.error, "turns": [], "interrupts": []}
        assert p.t0 is not None
        rec["agent_states"] = [(round(t - p.t0, 6), st) for t, st in states[i]]
        for u in p.script.utterances:
            if u.reply is None:
                continue
            r = u.reply
            eot = p.t0 + u.end + core.MIN_DELAY
            sched = next((t for t in created[i] if t >= eot - 1e-9), None)
            turn = {"reply": r,
                    "eot_to_scheduled": None if sched is None else (sched - eot) * MS,
                    "eot_to_llm_request": (p.llm_request[r] - eot) * MS
                    if r in p.llm_request else None}
            if r in p.sink_first_frame:
                turn["overhead"] = (p.sink_first_frame[r] - eot - core.LLM_TTFT
                                    - core.TTS_TTFB) * MS
            rec["turns"].append(turn)
            if u.interrupts is not None:
                th = p.vad_threshold.get(u.index)
                clear = next((t for t, _ in p.clears if th is not None and t >= th), None)
                rec["interrupts"].append(
                    {"threshold_to_clear": None if clear is None else (clear - th) * MS})
        if p.tool_return is not None and p.on_enter_new is not None:
            rec["handoff"] = (p.on_enter_new - p.tool_return) * MS
        out.append(rec)
    return out


def _round(obj: Any) -> Any:
    if isinstance(obj, float):
        return round(obj, 6)
    if isinstance(obj, dict):
        return {k: _round(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_round(v) for v in obj]
    return obj


def _collect(sessions: list[dict[str, Any]]) -> dict[str, list[float]]:
    lat: dict[str, list[float]] = {"eot_to_scheduled": [], "eot_to_llm_request": [],
                                   "turn_overhead": [], "threshold_to_clear": [], "handoff": []}
    for s in sessions:
        for t in s["turns"]:
            if t["eot_to_scheduled"] is not None:
                lat["eot_to_scheduled"].append(t["eot_to_scheduled"])
            if t["eot_to_llm_request"] is not None:
                lat["eot_to_llm_request"].append(t["eot_to_llm_request"])
            if "overhead" in t:
                lat["turn_overhead"].append(t["overhead"])
        for it in s["interrupts"]:
            if it["threshold_to_clear"] is not None:
                lat["threshold_to_clear"].append(it["threshold_to_clear"])
        if "handoff" in s:
            lat["handoff"].append(s["handoff"])
    return lat


def run(n: int = 10, kind: str = "full") -> dict[str, Any]:
    """Run twice in virtual time; the logical latencies (ms) and whether both runs agree."""
    first = _round(trio.run(_run, n, kind, clock=trio.testing.MockClock(autojump_threshold=0)))
    second = _round(trio.run(_run, n, kind, clock=trio.testing.MockClock(autojump_threshold=0)))
    lat = _collect(first)
    summary = {k: {"n": len(v), "min": min(v, default=None), "max": max(v, default=None)}
               for k, v in lat.items()}

    def without_states(res: list[dict]) -> list[dict]:
        return [{k: v for k, v in s.items() if k != "agent_states"} for s in res]

    state_diffs = [{"session": a["session"], "run1": a["agent_states"], "run2": b["agent_states"]}
                   for a, b in zip(first, second) if a["agent_states"] != b["agent_states"]]
    return {"sessions": len(first), "errors": [s["error"] for s in first if s["error"]],
            "deterministic": without_states(first) == without_states(second),
            "agent_states_identical": not state_diffs, "agent_state_diffs": state_diffs[:3],
            "latencies_ms": summary, "per_session": first}


def main(args: Any, log: Any) -> int:
    n = args.ns[0] if args.ns_given else 10
    res = run(n=n, kind=args.script)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "virtual.json").write_text(json.dumps(res, indent=1))
    lines = [(f"Virtual time (MockClock, autojump): {n} sessions, script {args.script}, run twice; "
             f"identical results: {res['deterministic']}; errors: {res['errors'] or 'none'}"),
             "", "| decision | samples | min ms | max ms |", "|---|---|---|---|"]
    names = {"eot_to_scheduled": "end of turn → reply scheduled",
             "eot_to_llm_request": "end of turn → LLM request",
             "turn_overhead": "turn overhead (first audio − end of turn − ttft − ttfb)",
             "threshold_to_clear": "interruption threshold → clear_buffer",
             "handoff": "tool return → new agent's on_enter"}
    for k, v in res["latencies_ms"].items():
        lines.append(f"| {names[k]} | {v['n']} | {v['min']} | {v['max']} |")
    lines += ["", ("agent_state sequences identical in both runs: "
              f"{res['agent_states_identical']}")]
    for d in res["agent_state_diffs"]:
        a, b = d["run1"], d["run2"]
        k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        lines.append(f"- session {d['session']}: first difference at transition {k}: "
                     f"{a[k:k + 2]} vs {b[k:k + 2]}")
    md = "\n".join(lines) + "\n"
    (args.out / "virtual.md").write_text("# Virtual-time latencies\n\n" + md)
    log(md)
    ok = res["deterministic"] and not res["errors"]
    return 0 if ok else 1
