"""The report: a markdown table, the ratios (ours / each peer's, same sweep), the targets, the
plot. Runtimes: ``trio`` (agents_trio), ``asyncio`` (LiveKit Agents), ``pipecat`` (Pipecat)."""

from __future__ import annotations

import math
import statistics
from typing import Any

OURS, THEIRS, PEER = "trio", "asyncio", "pipecat"
WORKER = "trio-worker"
RUNTIMES = (OURS, THEIRS, PEER)
NAMES = {OURS: "agents_trio", THEIRS: "LiveKit Agents (asyncio)", PEER: "Pipecat",
         WORKER: "agents_trio in worker mode"}

# issue #13's targets: (key, label, limit, the runtime ours is compared with)
TARGETS = [
    ("capacity", "sessions per process before turn p99 > 100 ms ≥ 5× LiveKit's", 5.0, THEIRS),
    ("capacity", "sessions per process before turn p99 > 100 ms ≥ 15× Pipecat's", 15.0, PEER),
    ("cpu", "CPU per session-second ≤ ⅓ of LiveKit's at every N", 1 / 3, THEIRS),
    ("turn_p50", "turn overhead p50 without fake timers (plumbing) ≤ ⅕ of LiveKit's", 0.2,
     THEIRS),
    ("interrupt_p99_n100", "interruption p99 at N = 100 ≤ 1/20 of LiveKit's", 0.05, THEIRS),
]


def fmt(v: float | None, digits: int = 1) -> str:
    """``v`` with ``digits`` decimals (none from 100 up); a dash for a missing value."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.{digits}f}"


def _pcts(stats: dict[str, Any], digits: int = 1) -> str:
    if not stats or not stats.get("n"):
        return "–"
    return " / ".join(fmt(stats.get(k), digits) for k in ("p50", "p95", "p99"))


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return a / b


def run_key(r: dict) -> tuple:
    return (r["runtime"], r["n"], r["transforms"])


def index_runs(runs: list[dict]) -> dict[tuple, dict]:
    return {run_key(r): r for r in runs}


def series(runs: list[dict], runtime: str, transforms: str = "off") -> list[dict]:
    return sorted((r for r in runs if r["runtime"] == runtime and r["transforms"] == transforms
                   and not r.get("refinement")), key=lambda r: r["n"])


def capacity_p99s(runs: list[dict], repeats: list[dict] | None, runtime: str
                  ) -> dict[int, list[float]]:
    """Each N's turn p99s of ``runtime`` (ms), the sweep's runs first (its refinement runs
    included), then ``repeats`` (``python -m bench``'s ``capacity_repeats``) in the order they
    ran. A run with more than 5 % of its sessions failed, or no p99, counts as infinite."""
    def p99_of(p99: float | None, failed: int, sessions: int) -> float:
        return p99 if p99 is not None and failed / max(1, sessions) <= 0.05 else math.inf

    out: dict[int, list[float]] = {}
    for r in runs:
        if r["runtime"] == runtime and r["transforms"] == "off":
            s = r["summary"]
            out.setdefault(r["n"], []).append(p99_of(
                s["turn_overhead_ms"].get("p99"), s["failed_sessions"], s["sessions"]))
    for x in repeats or ():
        if x["runtime"] == runtime:
            out.setdefault(x["n"], []).append(p99_of(x["p99"], x["failed_sessions"],
                                                     x["sessions"]))
    return out


def capacity(runs: list[dict], runtime: str, limit_ms: float = 100.0,
             repeats: list[dict] | None = None) -> dict[str, Any]:
    """The largest N whose turn p99 stayed ≤ ``limit_ms`` (refinement runs included), the
    smallest that passed it, and a log-linear interpolation between them. Where an N ran
    more than once (``repeats``), its p99 is the median of its runs."""
    pts = sorted((n, statistics.median(v))
                 for n, v in capacity_p99s(runs, repeats, runtime).items())
    ok = [n for n, p99 in pts if p99 <= limit_ms]
    bad = [n for n, p99 in pts if p99 > limit_ms]
    lo = max(ok) if ok else None
    hi = min((n for n in bad if lo is None or n > lo), default=None)
    est = None
    if lo is not None and hi is not None:
        p_lo = dict(pts)[lo]
        p_hi = dict(pts)[hi]
        if math.isfinite(p_hi) and p_lo > 0 and p_hi > p_lo:
            # p99 grows fast with N near saturation: interpolate log(p99) linearly in N
            f = (math.log(limit_ms) - math.log(p_lo)) / (math.log(p_hi) - math.log(p_lo))
            est = lo + f * (hi - lo)
        else:
            est = (lo + hi) / 2
    return {"last_ok": lo, "first_over": hi, "estimate": est,
            "lower_bound": hi is None and lo is not None}


def cpu_by_run(runs: list[dict], repeats: list[dict], runtime: str, n: int) -> dict[int, float]:
    """Each measured CPU per session-second of ``runtime`` at ``n`` by run, in the order they
    ran: 0 the sweep's run, then each repeat's number (``python -m bench``'s ``cpu_repeats``)."""
    out = {0: r["resources"]["cpu_per_session_second"] for r in runs
           if r["runtime"] == runtime and r["n"] == n and r["transforms"] == "off"
           and not r.get("refinement") and r.get("resources")}
    out.update((x["repeat"], x["cpu_per_session_second"]) for x in repeats
               if x["runtime"] == runtime and x["n"] == n)
    return {k: out[k] for k in sorted(out) if out[k] is not None}


def cpu_figures(runs: list[dict], repeats: list[dict], runtime: str, n: int) -> list[float]:
    """The values of ``cpu_by_run``, in the order they ran."""
    return list(cpu_by_run(runs, repeats, runtime, n).values())


def cpu_pairs(runs: list[dict], repeats: list[dict], vs: str, n: int
              ) -> list[tuple[float, float]]:
    """Ours and ``vs``'s CPU per session-second at ``n``, run by run, where both runtimes have
    that run (they ran next to each other)."""
    ours, theirs = cpu_by_run(runs, repeats, OURS, n), cpu_by_run(runs, repeats, vs, n)
    return [(ours[k], theirs[k]) for k in ours if k in theirs]


def cpu_median(runs: list[dict], repeats: list[dict], runtime: str, n: int) -> float | None:
    """The median of ``cpu_figures``: one run's CPU at low N varies by a third between runs."""
    vals = cpu_figures(runs, repeats, runtime, n)
    return statistics.median(vals) if vals else None


def plumbing_by_run(runs: list[dict], repeats: list[dict], runtime: str,
                    key: str = "turn_plumbing_ms") -> dict[int, float]:
    """``runtime``'s turn overhead p50 at N = 1 (``key``: without the fakes' timer lateness, or
    ``turn_overhead_ms``) by run, in the order they ran: 0 the sweep's run, then each repeat's
    number (``python -m bench``'s ``plumbing_repeats``)."""
    field = {"turn_plumbing_ms": "plumbing_p50", "turn_overhead_ms": "overhead_p50"}[key]
    out = {0: r["summary"][key].get("p50") for r in runs
           if r["runtime"] == runtime and r["n"] == 1 and r["transforms"] == "off"
           and not r.get("refinement") and r.get("summary")}
    out.update((x["repeat"], x.get(field)) for x in repeats if x["runtime"] == runtime)
    return {k: out[k] for k in sorted(out) if out[k] is not None}


def plumbing_median(runs: list[dict], repeats: list[dict], runtime: str,
                    key: str = "turn_plumbing_ms") -> float | None:
    """The median of ``plumbing_by_run``: one run's p50 at N = 1 moves by about a tenth
    between runs of the same code on this VM, more than the plumbing target's margin."""
    vals = list(plumbing_by_run(runs, repeats, runtime, key).values())
    return statistics.median(vals) if vals else None


def compute_targets(runs: list[dict], cpu_repeats: list[dict] | None = None,
                    capacity_repeats: list[dict] | None = None,
                    plumbing_repeats: list[dict] | None = None) -> list[dict]:
    """The targets' rows; the CPU target takes each runtime's median over the sweep's run and
    ``cpu_repeats`` at each N, the capacity target each N's median p99 over the sweep's runs
    and ``capacity_repeats``, the plumbing target each runtime's median p50 at N = 1 over the
    sweep's run and ``plumbing_repeats``."""
    idx = index_runs(runs)
    repeats = cpu_repeats or []

    def s(rt: str, n: int, key: str, stat: str) -> float | None:
        r = idx.get((rt, n, "off"))
        return r["summary"][key].get(stat) if r else None

    out = []
    for key, label, limit, vs in TARGETS:
        row: dict[str, Any] = {"key": key, "target": label, "limit": limit, "vs": vs}
        vs100 = idx.get((vs, 100, "off"))
        if key == "interrupt_p99_n100" and vs100 and vs100.get("saturated"):
            row["caveat"] = f"{NAMES[vs]} saturated at N = 100 on this machine"
        if key == "turn_p50":
            # the single-session latency, with the fakes' own timer lateness taken out
            ours = s(OURS, 1, "turn_plumbing_ms", "p50")
            theirs = s(vs, 1, "turn_plumbing_ms", "p50")
            row["alt"] = _ratio(s(OURS, 1, "turn_overhead_ms", "p50"),
                                s(vs, 1, "turn_overhead_ms", "p50"))
            row["alt_label"] = "whole turn overhead"
            row["where"] = "N = 1"
            reps = [x for x in plumbing_repeats or [] if x["runtime"] in (OURS, vs)]
            if reps:
                row["single_runs"] = _ratio(ours, theirs)
                ours = plumbing_median(runs, reps, OURS)
                theirs = plumbing_median(runs, reps, vs)
                row["alt"] = _ratio(plumbing_median(runs, reps, OURS, "turn_overhead_ms"),
                                    plumbing_median(runs, reps, vs, "turn_overhead_ms"))
                counts = sorted({len(plumbing_by_run(runs, reps, rt)) for rt in (OURS, vs)})
                row["where"] += f"; medians of {'–'.join(map(str, counts))} runs"
        elif key == "interrupt_p99_n100":
            ours = s(OURS, 100, "interruption_ms", "p99")
            theirs = s(vs, 100, "interruption_ms", "p99")
            row["where"] = "N = 100"
        elif key == "capacity":
            co = capacity(runs, OURS, repeats=capacity_repeats)
            ct = capacity(runs, vs, repeats=capacity_repeats)
            ours, theirs = co["estimate"] or co["last_ok"], ct["estimate"] or ct["last_ok"]
            row["capacity"] = {OURS: co, vs: ct}
            row["where"] = "turn p99 ≤ 100 ms"
            if capacity_repeats:
                row["where"] += "; each N's median p99"
                # what the sweep's runs alone give: how far one run per N strays
                so, st = capacity(runs, OURS), capacity(runs, vs)
                row["single_runs"] = _ratio(so["estimate"] or so["last_ok"],
                                            st["estimate"] or st["last_ok"])
        else:  # cpu: every N where both runtimes ran unsaturated; the worst ratio counts
            ns = sorted({r["n"] for r in runs if r["runtime"] == OURS
                         and not r.get("refinement")}
                        & {r["n"] for r in runs if r["runtime"] == vs
                           and not r.get("saturated") and not r.get("refinement")})
            per_n = {n: _ratio(cpu_median(runs, repeats, OURS, n),
                               cpu_median(runs, repeats, vs, n)) for n in ns}
            per_n = {n: x for n, x in per_n.items() if x is not None}
            ours = theirs = None
            row["per_n"] = per_n
            row["ours_per_n"] = {n: cpu_median(runs, repeats, OURS, n) for n in per_n}
            row["theirs_per_n"] = {n: cpu_median(runs, repeats, vs, n) for n in per_n}
            row["ratio"] = max(per_n.values()) if per_n else None
            # each run against the other runtime's run next to it: how far one run strays
            row["worst_single"] = max(
                (x for n in per_n for a, b in cpu_pairs(runs, repeats, vs, n)
                 if (x := _ratio(a, b)) is not None), default=None)
            counts = {len(cpu_figures(runs, repeats, rt, n)) for n in per_n for rt in (OURS, vs)}
            row["where"] = ("N = " + ", ".join(map(str, per_n)) + " (worst"
                            + (f"; medians of {'–'.join(map(str, sorted(counts)))} runs"
                               if max(counts, default=1) > 1 else "") + ")")
        row["ours"], row["theirs"] = ours, theirs
        if key != "cpu":
            row["ratio"] = _ratio(ours, theirs)
        r = row["ratio"]
        if r is None:
            row["met"] = None
        elif key == "capacity":
            row["met"] = r >= limit
        else:
            row["met"] = r <= limit
        out.append(row)
    return out


def _targets_md(targets: list[dict]) -> list[str]:
    lines = ["| target | where | ours | peer | ratio | met |", "|---|---|---|---|---|---|"]
    for t in targets:
        r = t["ratio"]
        vs = t.get("vs", THEIRS)
        if t["key"] == "capacity":
            caps = t.get("capacity", {})
            o, th = caps.get(OURS, {}), caps.get(vs, {})

            def cap(c: dict) -> str:
                if c.get("lower_bound"):
                    return f"> {c['last_ok']} (never passed)"
                if c.get("estimate") is not None:
                    return f"≈ {c['estimate']:.0f} ({c['last_ok']}–{c['first_over']})"
                return "–"

            ours_s, theirs_s = cap(o), cap(th)
            ratio_s = ("≥ " if o.get("lower_bound") else "") + (fmt(r, 2) if r else "–") + "×"
        elif t["key"] == "cpu":
            ours_s = " / ".join(fmt(v, 4) for v in t.get("ours_per_n", {}).values())
            theirs_s = " / ".join(fmt(v, 4) for v in t.get("theirs_per_n", {}).values())
            ratio_s = " / ".join(fmt(v, 2) for v in t.get("per_n", {}).values())
        else:
            ours_s, theirs_s, ratio_s = fmt(t["ours"], 2), fmt(t["theirs"], 2), fmt(r, 2)
            if t.get("alt") is not None:
                ratio_s += f" ({t.get('alt_label', 'plumbing-only')} {fmt(t['alt'], 2)})"
        if t["met"] is None:
            met = "not measured"
        elif t["met"]:
            met = "**met**"
            worst = t.get("worst_single")
            if worst is not None and worst > t["limit"]:
                met += f" on the medians (single runs up to {worst:.2f})"
            single = t.get("single_runs")
            if t["key"] == "capacity" and single is not None and single < t["limit"]:
                met += f" on the medians (the sweep's runs alone: {single:.2f}×)"
            if t["key"] == "turn_p50" and single is not None and single > t["limit"]:
                met += f" on the medians (the sweep's run alone: {single:.3f})"
        elif t["key"] == "capacity":
            met = f"missed: {r:.2f}× of {t['limit']:g}×"
            single = t.get("single_runs")
            if single is not None and single >= t["limit"]:
                met += f" (the sweep's runs alone: {single:.2f}×)"
        else:
            # three digits: a miss by a few per cent must not print as "1.0×, 0.20 > 0.20"
            met = f"missed by {r / t['limit']:.2f}× (ratio {r:.3f} > {t['limit']:.3f})"
            single = t.get("single_runs")
            if t["key"] == "turn_p50" and single is not None and single <= t["limit"]:
                met += f" on the medians (the sweep's run alone: {single:.3f}, met)"
        where = t["where"] + (f" ({t['caveat']})" if t.get("caveat") else "")
        lines.append(f"| {t['target']} | {where} | {ours_s} | {theirs_s} | {ratio_s} "
                     f"| {met} |")
    return lines


def capacity_repeats_md(runs: list[dict], repeats: list[dict]) -> list[str]:
    """Each run's turn p99 at the N where the sweep repeated the runs around each runtime's
    100 ms crossing, with the median the capacity target counts, and each runtime's crossing
    from the sweep's runs alone beside the one from the medians."""
    if not repeats:
        return []
    lines = ["", ("Turn p99 around each runtime's 100 ms crossing, run by run (ms; the sweep's "
                  "run first, then the repeats, the runtimes alternating; ∞: no p99, or more than "
                  "5 % of the sessions failed; the capacity target takes each N's median):"), "",
             "| runtime | N | each run | median |", "|---|---|---|---|"]
    for rt in RUNTIMES:
        repeated = {x["n"] for x in repeats if x["runtime"] == rt}
        if not repeated:
            continue
        p99s = capacity_p99s(runs, repeats, rt)
        for n in sorted(repeated):
            vals = p99s[n]
            lines.append(f"| {NAMES[rt]} | {n} | {', '.join(_p99(v) for v in vals)} "
                         f"| {_p99(statistics.median(vals))} |")
    crossings = []
    for rt in RUNTIMES:
        if any(x["runtime"] == rt for x in repeats):
            single, med = capacity(runs, rt), capacity(runs, rt, repeats=repeats)
            crossings.append(f"{NAMES[rt]} {_crossing(single)} from the sweep's runs alone, "
                             f"{_crossing(med)} from the medians")
    lines += ["", "Where turn p99 passes 100 ms: " + "; ".join(crossings) + "."]
    return lines


def _p99(v: float) -> str:
    return "∞" if math.isinf(v) else fmt(v)


def _crossing(cap: dict[str, Any]) -> str:
    if cap.get("lower_bound"):
        return f"> {cap['last_ok']}"
    est = cap.get("estimate")
    return f"≈ {est:.0f}" if est is not None else "–"


def plumbing_repeats_md(runs: list[dict], repeats: list[dict]) -> list[str]:
    """Each run's plumbing p50 at N = 1 where the sweep repeated it, with each runtime's median
    (what the plumbing target counts)."""
    runtimes = [rt for rt in RUNTIMES if any(x["runtime"] == rt for x in repeats)]
    if not runtimes:
        return []
    lines = ["", ("Turn overhead p50 without the fakes' timers (plumbing) at N = 1, run by run "
                  "(ms; the sweep's run first, then the repeats, the runtimes alternating; the "
                  "target takes each runtime's median):"), "",
             "| runtime | each run | median |", "|---|---|---|"]
    for rt in runtimes:
        vals = list(plumbing_by_run(runs, repeats, rt).values())
        if vals:
            lines.append(f"| {NAMES[rt]} | {', '.join(fmt(v, 3) for v in vals)} "
                         f"| {fmt(statistics.median(vals), 3)} |")
    return lines


def cpu_repeats_md(runs: list[dict], repeats: list[dict]) -> list[str]:
    """Each run's CPU per session-second where the sweep repeated the CPU target's points, with
    each runtime's median (what the target counts) and the ratio of the medians."""
    ns = sorted({x["n"] for x in repeats})
    if not ns:
        return []
    lines = ["", ("CPU per session-second where the CPU target is counted, run by run (ms of CPU "
                  "per session-second; the sweep's run first, then the repeats, the two runtimes "
                  "alternating; the target takes each runtime's median):"), "",
             ("| N | runtime | each run | median | ours / LiveKit's, medians | ours / LiveKit's, "
              "run by run (each run against the other runtime's run next to it) |"),
             "|---|---|---|---|---|---|"]
    for n in ns:
        med = {rt: cpu_median(runs, repeats, rt, n) for rt in (OURS, THEIRS)}
        by_run = ", ".join(fmt(_ratio(a, b), 2) for a, b in cpu_pairs(runs, repeats, THEIRS, n))
        for rt in (OURS, THEIRS):
            vals = cpu_figures(runs, repeats, rt, n)
            if not vals:
                continue
            ratios = (f"{fmt(_ratio(med[OURS], med[THEIRS]), 2)} | {by_run}" if rt == OURS
                      else " | ")
            lines.append(f"| {n} | {NAMES[rt]} | {', '.join(fmt(v * 1e3, 2) for v in vals)} "
                         f"| {fmt(statistics.median(vals) * 1e3, 2)} | {ratios} |")
    return lines


def cpu_split_md(runs: list[dict], split: list[dict],
                 repeats: list[dict] | None = None) -> list[str]:
    """The CPU per session-second taken apart (``python -m bench``'s ``cpu_split``): the
    sweep's whole-run figure (the median with ``repeats``), sessions that only listen, the
    fake network's inputs alone."""
    if not split:
        return []
    parts = {(x["runtime"], x["n"], x["script"]): x["cpu_per_session_second"] for x in split}
    # the N split into parts (a lone N = 1 network run is the bare wake-up's)
    ns = sorted({x["n"] for x in split if x["script"] == "listen"}
                or {x["n"] for x in split if x["n"] > 1})
    lines = ["", ("Where the CPU per session-second goes (ms of CPU per session-second; each "
                  "column is its own run at that N: the sweep's run, sessions that only listen "
                  "to 10 s of silence, and the fake network handing the same inputs their "
                  "frames with no session, which is the floor of the figure on that runtime; "
                  "where the sweep repeated its run, the whole run is the median):"),
             "", ("| N | runtime | whole run | listening only | fake network alone | turns "
                  "(whole − listening) | frames in the session (listening − network) | beyond "
                  "the fake network (whole − network) |"),
             "|---|---|---|---|---|---|---|---|"]
    beyond: dict[tuple[str, int], float | None] = {}
    for n in ns:
        for rt in (OURS, THEIRS):
            whole = cpu_median(runs, repeats or [], rt, n)
            listen, network = parts.get((rt, n, "listen")), parts.get((rt, n, "network"))
            if whole is None and listen is None and network is None:
                continue

            def ms(v: float | None) -> str:
                return fmt(None if v is None else v * 1e3, 2)

            def diff(a: float | None, b: float | None) -> float | None:
                return None if a is None or b is None else a - b

            beyond[(rt, n)] = diff(whole, network)
            lines.append(f"| {n} | {NAMES[rt]} | {ms(whole)} | {ms(listen)} | {ms(network)} "
                         f"| {ms(diff(whole, listen))} | {ms(diff(listen, network))} "
                         f"| {ms(beyond[(rt, n)])} |")
    ratios = [f"N = {n}: {fmt(_ratio(beyond.get((OURS, n)), beyond.get((THEIRS, n))), 2)}"
              for n in ns if beyond.get((OURS, n)) is not None
              and beyond.get((THEIRS, n)) is not None]
    if ratios:
        lines += ["", ("Beyond the fake network, ours / LiveKit's: " + ", ".join(ratios)
                       + ". The target counts the whole run, fake network included; the "
                       "differences carry the noise of two runs each.")]
    return lines + wake_floor_md(runs, split, repeats)


def split_value(split: list[dict], runtime: str, n: int, script: str,
                key: str) -> float | None:
    """``key`` of ``runtime``'s split run of ``script`` at ``n``, or None."""
    return next((x.get(key) for x in split if x["runtime"] == runtime and x["n"] == n
                 and x["script"] == script), None)


def wake_floor(split: list[dict], runtime: str, n: int,
               priced_as: str | None = None) -> float | None:
    """The least CPU per session-second a process woken as often as ``runtime``'s was at ``n``
    can use: the fake network alone (its wake-ups, its frames) plus every further wake-up of
    the whole run at the price of a wake-up with almost nothing to do (the fake network with
    one input). Priced on ``runtime``'s own loop, or on ``priced_as``'s (its fake network
    alone, its bare wake-up). What is left above it is the runtime's own work."""
    loop = priced_as or runtime
    network = split_value(split, loop, n, "network", "cpu_per_session_second")
    whole_w = split_value(split, runtime, n, "whole", "wakeups_per_session_second")
    network_w = split_value(split, loop, n, "network", "wakeups_per_session_second")
    bare_us = split_value(split, loop, 1, "network", "cpu_per_wakeup_us")
    if network is None or whole_w is None or network_w is None or bare_us is None:
        return None
    return network + max(0.0, whole_w - network_w) * bare_us * 1e-6


def wake_floor_md(runs: list[dict], split: list[dict],
                  repeats: list[dict] | None = None) -> list[str]:
    """How often each process woke in the split's runs, what a wake-up cost, and the floor
    those wake-ups set under the CPU figure (``wake_floor``) against LiveKit's figure."""
    if not any(x.get("wakeups_per_session_second") is not None for x in split):
        return []

    def part(rt: str, n: int, script: str, key: str) -> float | None:
        return split_value(split, rt, n, script, key)

    ns = sorted({x["n"] for x in split if x["script"] == "whole"})
    lines = ["", ("Wake-ups (the process's voluntary context switches: on a one-thread loop, "
                  "each time `epoll_wait` slept and was woken) per session-second in the "
                  "split's own runs, what a wake-up cost on average (the phase's CPU over its "
                  "wake-ups; “bare”: the fake network with one input, a wake-up with almost "
                  "nothing to do), and the floor they set: the fake network alone plus each "
                  "further wake-up of the whole run at the bare price, the least CPU a "
                  "process woken as often could use. The last column sets the floor against "
                  "LiveKit's whole figure (the CPU target's median), which the target wants "
                  "at most ⅓:"), "",
             ("| N | runtime | wake-ups per session-s: whole / listening / network | CPU per "
              "wake-up (µs): whole / network / bare | whole run here (ms per session-s) | "
              "floor (ms per session-s) | floor / LiveKit's figure |"),
             "|---|---|---|---|---|---|---|"]
    verdicts = []
    for n in ns:
        theirs = cpu_median(runs, repeats or [], THEIRS, n)
        for rt in (OURS, THEIRS):
            if part(rt, n, "whole", "cpu_per_session_second") is None:
                continue
            wakes = " / ".join(fmt(part(rt, n, sc, "wakeups_per_session_second"), 1)
                               for sc in ("whole", "listen", "network"))
            costs = " / ".join(fmt(v, 0) for v in (
                part(rt, n, "whole", "cpu_per_wakeup_us"),
                part(rt, n, "network", "cpu_per_wakeup_us"),
                part(rt, 1, "network", "cpu_per_wakeup_us")))
            floor = wake_floor(split, rt, n)
            whole = part(rt, n, "whole", "cpu_per_session_second")
            share = _ratio(floor, theirs)
            lines.append(f"| {n} | {NAMES[rt]} | {wakes} | {costs} "
                         f"| {fmt(None if whole is None else whole * 1e3, 2)} "
                         f"| {fmt(None if floor is None else floor * 1e3, 2)} "
                         f"| {fmt(share, 2)} |")
            if rt == OURS and share is not None:
                verdicts.append((n, share, floor, theirs))
    bare = {rt: part(rt, 1, "network", "cpu_per_wakeup_us") for rt in (OURS, THEIRS)}
    for n, share, floor, theirs in verdicts:
        if share <= 1 / 3:
            continue
        elsewhere = _ratio(wake_floor(split, OURS, n, priced_as=THEIRS), theirs)
        lines += ["", (
            f"At N = {n} the wake-ups alone put our floor at {fmt(share, 2)} of LiveKit's "
            f"figure ({fmt(floor * 1e3, 2)} against {fmt(theirs * 1e3, 2)} ms per "
            "session-second), above the target's ⅓: by this estimate, on this machine a Trio "
            "process woken as "
            "often as ours (for every frame period of the network, every token, audio chunk "
            "and end of playout the fakes deliver, and once per end of turn) cannot meet it "
            f"there, whatever its own work per wake-up. A bare wake-up costs {fmt(bare[OURS], 0)} "
            f"µs on Trio here and {fmt(bare[THEIRS], 0)} µs on asyncio; at asyncio's prices "
            f"the same wake-ups would still be {fmt(elsewhere, 2)} of LiveKit's figure.")]
    return lines


def context_md(runs: list[dict]) -> list[str]:
    """CPU per turn against the context's size, every runtime side by side, and each one's
    growth over its own empty-context figure."""
    if not runs:
        return []
    sizes = sorted({(r["context"]["history"], r["context"]["tools"]) for r in runs},
                   key=lambda hs: (hs[1], hs[0]))
    rts = [rt for rt in RUNTIMES if any(r["runtime"] == rt for r in runs)]

    def cpu(rt: str, size: tuple[int, int]) -> float | None:
        r = next((x for x in runs if x["runtime"] == rt
                  and (x["context"]["history"], x["context"]["tools"]) == size), None)
        return r["resources"].get("cpu_per_turn_ms") if r else None

    lines = ["", ("Turn cost against the context's size: CPU ms per turn (the whole session's "
             "CPU over its LLM requests, N = 1, full script), and × its own figure with an "
             "empty context:"), "",
             "| earlier messages | tools | " + " | ".join(NAMES[rt] for rt in rts) + " |",
             "|---|---|" + "---|" * len(rts)]
    for size in sizes:
        cells = []
        for rt in rts:
            v, base = cpu(rt, size), cpu(rt, (0, 0))
            growth = _ratio(v, base)
            cells.append(fmt(v, 1) + (f" ({fmt(growth, 2)}×)" if growth and size != (0, 0)
                                      else ""))
        lines.append(f"| {size[0]} | {size[1] + 1} | " + " | ".join(cells) + " |")
    return lines


def _worker_md(runs: list[dict]) -> list[str]:
    """Worker mode (``python -m bench --worker-mode``): sessions per process before turn p99
    passes 100 ms, and RSS per additional session, beside the plain runtime's."""
    worker = series(runs, WORKER)
    if not worker:
        return []
    lines = ["", (f"{NAMES[WORKER]} (LiveKit's AgentServer with hosted jobs, fake jobs, one "
                  "job host per process, which raises the cyclic collector's young threshold "
                  "to 5,000 as it does in production):"), "",
             "| N | turn p50 / p99 | RSS per session (MB) | same N, plain runtime p99 / RSS |",
             "|---|---|---|---|"]
    plain = {r["n"]: r for r in series(runs, OURS)}
    for r in worker:
        s, res = r["summary"], r["resources"]
        p = plain.get(r["n"])
        same = (f"{fmt(p['summary']['turn_overhead_ms'].get('p99'))} / "
                f"{fmt(p['resources'].get('rss_per_session_mb'), 3)}" if p else "–")
        lines.append(f"| {r['n']} | {fmt(s['turn_overhead_ms'].get('p50'))} / "
                     f"{fmt(s['turn_overhead_ms'].get('p99'))} "
                     f"| {fmt(res.get('rss_per_session_mb'), 3)} | {same} |")
    cap = capacity(runs, WORKER)
    if cap["last_ok"] is not None:
        est = f", about {cap['estimate']:.0f}" if cap["estimate"] is not None else ""
        bound = " (a lower bound: no N passed it)" if cap["lower_bound"] else ""
        lines += ["", (f"Sessions per worker process before turn p99 passes 100 ms: "
                       f"{cap['last_ok']}{est}{bound}.")]
    return lines


def _gc_md(runs: list[dict], gc_off: dict[str, Any] | None,
           gc_young: dict[str, Any] | None = None,
           capacity_repeats: list[dict] | None = None) -> list[str]:
    """Where capacity goes: the cyclic collector's pauses around each runtime's 100 ms
    crossing, and (from ``--gc off`` and ``--gc young`` runs saved in ``gc-off/`` and
    ``gc-young/``) the same N without them or with fewer."""
    rows = []
    for rt in RUNTIMES:
        cap = capacity(runs, rt, repeats=capacity_repeats)
        for n in (cap["last_ok"], cap["first_over"]):
            r = next((x for x in runs if x["runtime"] == rt and x["n"] == n
                      and x["transforms"] == "off"), None)
            gc = (r or {}).get("resources", {}).get("gc") or {}
            if r is None or not gc:
                continue
            pauses = " / ".join(fmt(gc.get(g, {}).get("max_ms"), 0)
                                for g in ("gen0", "gen1", "gen2"))
            rows.append(f"| {NAMES[rt]} | {n} | {fmt(r['summary']['turn_overhead_ms'].get('p99'))} "
                        f"| {pauses} | {gc.get('gen2', {}).get('count', 0)} "
                        f"| {fmt(r['resources'].get('cpu_utilisation'), 2)} |")
    if not rows:
        return []
    lines = ["", ("Around each runtime's 100 ms crossing: the turn p99 beside the cyclic "
                  "garbage collector's longest pauses (a full collection walks every tracked "
                  "object of every session with the loop stopped) and how busy the loop was. "
                  "Where the loop is half idle and the p99 is about the longest full "
                  "collection, the collector, not the CPU, sets the sessions per process:"), "",
             ("| runtime | N | turn p99 | longest pause gen0 / gen1 / gen2 (ms) "
              "| full collections | loop CPU utilisation |"),
             "|---|---|---|---|---|---|"] + rows
    for saved, what, folder in (
            (gc_off, "with the collector disabled after warm-up (`python -m bench --gc off`",
             "gc-off"),
            (gc_young, "with the young threshold the job host sets (5,000) for every runtime "
             "(`python -m bench --gc young`", "gc-young")):
        if saved:
            lines += _diagnosis_md(saved, what, folder)
    return lines


def heap_paragraph(heap: dict[str, Any] | None) -> list[str]:
    """One paragraph from ``python -m bench --heap`` (``heap.json``): what a full collection
    walks per session, and what one costs at the largest N measured."""
    if not heap or not heap.get("runs"):
        return []
    runs = heap["runs"]

    def per_session(r: dict[str, Any]) -> str:
        h = r["heap"]
        live = h["live_sessions"] or 1
        return (f"{NAMES[r['runtime']]} at N = {r['n']}: {fmt(h['tracked'] / live, 0)} tracked "
                f"objects and {fmt(h['references'] / live, 0)} references per session, one "
                f"full collection {fmt(h['full_collection_ms'], 1)} ms "
                f"({fmt(h['full_collection_ms'] * 1e6 / max(h['references'], 1), 0)} ns per "
                "reference)")

    return ["", ("What a full collection walks, counted once every session is live "
                 f"(`python -m bench --heap`, {heap['meta']['date']}, "
                 "`bench/results/heap.md`): " + "; ".join(per_session(r) for r in runs)
                 + ". The time per reference grows with the heap (the caches no longer hold "
                 "it), so a full collection costs more per session at 400 sessions than at "
                 "50; a full collection's pause shrinks only with fewer objects per session.")]


def _diagnosis_md(saved: dict[str, Any], what: str, folder: str) -> list[str]:
    """One sentence: each runtime's turn p99 and CPU per N in a saved diagnosis run."""
    runs = [r for r in saved.get("runs", []) if r["transforms"] == "off"]
    pts = []
    for rt in RUNTIMES:
        mine = sorted((r for r in runs if r["runtime"] == rt), key=lambda r: r["n"])
        if mine:
            pts.append(f"{NAMES[rt]} " + ", ".join(
                f"N = {r['n']}: p99 {fmt(r['summary']['turn_overhead_ms'].get('p99'))} ms"
                + (f" ({r['summary']['failed_sessions']} failed)"
                   if r["summary"].get("failed_sessions") else "")
                + f", CPU {fmt(r['resources'].get('cpu_utilisation'), 2)}"
                for r in mine))
    if not pts:
        return []
    return ["", (f"The same script {what}, a diagnosis, {saved['meta']['date']}, "
                 f"`bench/results/{folder}/`): " + "; ".join(pts) + ".")]


def markdown(results: dict[str, Any], *, stages: bool = True) -> str:
    """The report; ``stages=False`` leaves out the per-stage tables (the README's version)."""
    runs = results["runs"]
    meta = results["meta"]
    lines = [
        (f"Measured {meta['date']} on {meta['machine']}; Python {meta['python']}; "
        f"{meta['ours']} vs {meta['theirs'] or 'no asyncio runtime installed'}"
        f"{' and ' + meta['peer'] if meta.get('peer') else ''}; "
        f"gc: {meta['gc']}; script: {meta['script']} "
        f"(~{meta['script_seconds']:.0f} s per session, sessions started over "
        "min(4 s, 0.04·N)); one process per runtime and N; latencies in ms."),
        "",
    ]
    code = meta.get("code") or {}
    if code.get("commit"):
        lines[0] += (f" agents_trio at commit {code['commit']}"
                     + (" (HEAD, pinned for the run)" if code.get("tree") == "head"
                        else " (working tree)") + ".")
    if meta.get("busy_thread_cpu_per_wall_s"):
        lines[0] += (f" A busy thread gets {meta['busy_thread_cpu_per_wall_s']:.2f} CPU-s per "
                     "wall-s on this machine (the ceiling of one event loop).")
    if not meta["theirs"]:
        lines += [("**livekit-agents is not installed: only our side ran (`pip install -e "
                  "'.[bench]'` adds the asyncio runtime).**"), ""]
    if not meta.get("peer") and "peer" in meta and not meta.get("peer_skipped"):
        lines += [("**pipecat-ai is not installed: no Pipecat column (`pip install -e "
                  "'.[bench]'` adds it).**"), ""]
    lines += [
        ("| N | runtime | turn overhead p50 / p95 / p99 | without fake timers p50 / p95 / p99 "
        "| interruption p50 / p95 / p99 | CPU s per session-s | RSS MB per session "
        "| start p50 | aclose p50 | handoff p50 | failed |"),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ns = sorted({r["n"] for r in runs if not r.get("refinement")})
    for transforms in ("off", "on"):
        for n in ns:
            for rt in RUNTIMES:
                r = next((x for x in runs if x["runtime"] == rt and x["n"] == n
                          and x["transforms"] == transforms and not x.get("refinement")), None)
                if r is None:
                    continue
                s, res = r["summary"], r["resources"]
                label = f"{n}" + (" (default transforms)" if transforms == "on" else "")
                failed = f"{s['failed_sessions']} of {s['sessions']}"
                if r.get("saturated"):
                    failed += f" — saturated ({r['saturated']})"
                lines.append(
                    f"| {label} | {NAMES[rt]} | {_pcts(s['turn_overhead_ms'])} "
                    f"| {_pcts(s['turn_plumbing_ms'])} | {_pcts(s['interruption_ms'], 2)} "
                    f"| {fmt(res['cpu_per_session_second'], 4)} "
                    f"| {fmt(res['rss_per_session_mb'], 2)} | {fmt(s['start_ms'].get('p50'), 2)} "
                    f"| {fmt(s['close_ms'].get('p50'), 2)} | {fmt(s['handoff_ms'].get('p50'), 2)} "
                    f"| {failed} |")
    other = [r["resources"].get("host_other_cores") for r in runs]
    other = [x for x in other if x is not None]
    if other:
        lines += ["", (f"Other processes on the host kept {min(other):.2f}–{max(other):.2f} "
                  "cores busy during the measured phases (from /proc/stat; a disturbed run "
                  "shows here).")]
    elif results["meta"].get("host_note"):
        lines += ["", results["meta"]["host_note"]]
    for rt, sat in results.get("saturation", {}).items():
        if sat:
            lines.append("")
            lines.append(f"{NAMES[rt]}: series stopped at N = {sat['n']} ({sat['reason']}).")
    for rt in RUNTIMES:
        extra = sorted((r for r in runs if r["runtime"] == rt and r.get("refinement")),
                       key=lambda r: r["n"])
        if extra:
            pts = ", ".join(
                f"N = {r['n']}: p99 {fmt(r['summary']['turn_overhead_ms'].get('p99'))} ms"
                + (f" ({r['summary']['failed_sessions']} failed)"
                   if r["summary"].get("failed_sessions") else "") for r in extra)
            lines += ["", f"{NAMES[rt]}, search for where turn p99 passes 100 ms: {pts}."]
    if meta.get("gc_mode", "freeze") != "off":   # with the collector off there are no pauses
        lines += _gc_md(runs, results.get("gc_off"), results.get("gc_young"),
                        results.get("capacity_repeats"))
        lines += heap_paragraph(results.get("heap"))
    lines += _worker_md(runs)
    idx = index_runs([r for r in runs if not r.get("refinement")])
    for other_rt in (THEIRS, PEER):
        if not any(r["runtime"] == other_rt for r in runs):
            continue
        lines += ["", (f"Ratios, ours / {NAMES[other_rt]}, same sweep (lower is better):"), "",
                  ("| N | turn p50 | turn p99 | without fake timers p50 | interruption p50 "
                  "| interruption p99 | CPU per session-s |"),
                  "|---|---|---|---|---|---|---|"]
        for transforms in ("off", "on"):
            for n in ns:
                a, b = idx.get((OURS, n, transforms)), idx.get((other_rt, n, transforms))
                if not a or not b:
                    continue
                sa, sb = a["summary"], b["summary"]

                def rr(key: str, stat: str, sa: dict = sa, sb: dict = sb) -> str:
                    return fmt(_ratio(sa[key].get(stat), sb[key].get(stat)), 2)

                label = f"{n}" + (" (default transforms)" if transforms == "on" else "")
                cpu = _ratio(a["resources"]["cpu_per_session_second"],
                             b["resources"]["cpu_per_session_second"])
                lines.append(
                    f"| {label} | {rr('turn_overhead_ms', 'p50')} "
                    f"| {rr('turn_overhead_ms', 'p99')} "
                    f"| {rr('turn_plumbing_ms', 'p50')} | {rr('interruption_ms', 'p50')} "
                    f"| {rr('interruption_ms', 'p99')} | {fmt(cpu, 2)} |")
    if meta["theirs"] or meta.get("peer"):
        if results.get("targets"):
            lines += ["", "Targets (issue #13: agents_trio against both peers):", ""]
            lines += _targets_md(results["targets"])
    lines += capacity_repeats_md(runs, results.get("capacity_repeats") or [])
    lines += plumbing_repeats_md(runs, results.get("plumbing_repeats") or [])
    lines += cpu_repeats_md(runs, results.get("cpu_repeats") or [])
    lines += cpu_split_md(runs, results.get("cpu_split") or [], results.get("cpu_repeats"))
    lines += context_md(results.get("context_sweep") or [])
    if not stages:
        notes = results.get("notes") or []
        return "\n".join(lines + ([""] + notes if notes else [])) + "\n"
    # stage breakdown
    lines += ["", "Where the turn overhead goes (p50 per stage, ms):", "",
              ("| N | runtime | network delivery* | frame → VAD | VAD → LLM request† | LLM ttft "
              "lateness* | token → TTS | TTS ttfb lateness* | TTS → sink |"),
              "|---|---|---|---|---|---|---|---|---|"]
    for n in ns:
        for rt in RUNTIMES:
            r = next((x for x in runs if x["runtime"] == rt and x["n"] == n
                      and x["transforms"] == "off" and not x.get("refinement")), None)
            if r is None:
                continue
            st = r["summary"]["turn_stages_ms"]
            cells = " | ".join(fmt(st[k].get("p50"), 2) for k in
                               ("delivery", "input_to_vad", "vad_to_llm", "llm", "token_to_tts",
                                "tts", "audio_to_sink"))
            lines.append(f"| {n} | {NAMES[rt]} | {cells} |")
    lines += ["", ("\\* the fakes' own timer lateness (the same timers on every side; epoll "
              "rounds timeouts up to the millisecond); the “without fake timers” column "
              "subtracts these three. † beyond the 0.2 s endpointing wait that follows the "
              "VAD's end of speech; includes the runtime's own endpointing timer lateness."),
              "", ("Where the interruption goes (p50, ms): threshold event → clear_buffer is the "
              "total; LLM/TTS cancellation are side effects measured from the same event."), "",
              "| N | runtime | threshold → clear | → LLM cancelled | → TTS cancelled |",
              "|---|---|---|---|---|"]
    for n in ns:
        for rt in RUNTIMES:
            r = next((x for x in runs if x["runtime"] == rt and x["n"] == n
                      and x["transforms"] == "off" and not x.get("refinement")), None)
            if r is None:
                continue
            s = r["summary"]
            st = s["interruption_stages_ms"]
            lines.append(f"| {n} | {NAMES[rt]} | {fmt(s['interruption_ms'].get('p50'), 2)} | "
                         f"{fmt(st['llm_cancelled'].get('p50'), 2)} | "
                         f"{fmt(st['tts_cancelled'].get('p50'), 2)} |")
    if results.get("turn_cost"):
        from .turn_cost import markdown as turn_cost_markdown
        lines += ["", *turn_cost_markdown(results["turn_cost"])]
    notes = results.get("notes") or []
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: str) -> bool:
    """Latency percentiles against N for every runtime; False when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    runs = [r for r in results["runs"] if r["transforms"] == "off"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8))
    styles = {OURS: ("tab:blue", "-"), THEIRS: ("tab:red", "--"), PEER: ("tab:green", "-.")}
    for ax, key, title in ((axes[0], "turn_overhead_ms", "turn overhead"),
                           (axes[1], "interruption_ms", "interruption overhead")):
        for rt in RUNTIMES:
            pts = sorted((r for r in runs if r["runtime"] == rt), key=lambda r: r["n"])
            if not pts:
                continue
            color, ls = styles[rt]
            for stat, marker, alpha in (("p50", "o", 1.0), ("p95", "s", 0.7), ("p99", "^", 0.45)):
                xs = [r["n"] for r in pts if r["summary"][key].get(stat) is not None]
                ys = [max(r["summary"][key][stat], 1e-3) for r in pts
                      if r["summary"][key].get(stat) is not None]
                ax.plot(xs, ys, ls, marker=marker, color=color, alpha=alpha,
                        label=f"{NAMES[rt]} {stat}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("concurrent sessions per process (N)")
        ax.set_ylabel("ms")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if key == "turn_overhead_ms":
            ax.axhline(100, color="gray", lw=0.8, ls=":")
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{results['meta']['machine']}, Python {results['meta']['python']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# -- the VAD adapter path (issue 13, item 2): bench/adapter_hops.py ----------------------------
ADAPTER_TARGET_MS = 0.1   # cost beyond the model's own per 32 ms window, at the median
_HOP_LABELS = {"push": "Trio → asyncio push", "stream_before_model": "stream before the model",
               "model": "model", "stream_after_model": "stream after the model",
               "back_to_trio": "event back to Trio", "total": "total"}


def _spread(stats: dict[str, float]) -> str:
    return f"{fmt(stats['median'], 3)} ({fmt(stats['min'], 3)}–{fmt(stats['max'], 3)})"


def adapter_markdown(results: dict[str, Any]) -> str:
    """The adapter report: CPU per window by path (lockstep), wall time per hop (lockstep and
    inside the voice session), the pipeline's latencies, and the target."""
    from .adapter_hops import SIDES

    lock = results["lockstep"]
    summary = lock["summary"]
    lines = [
        "# The VAD adapter path: cost per 32 ms window",
        "",
        (f"`python -m bench --adapter` (or `python -m bench.adapter_hops`); {results['machine']}."
         " Silero VAD (LiveKit plugin) through `adapt()`, stamped at each crossing of a window"
         " (see bench/adapter_hops.py). Lockstep: one 32 ms frame at a time, each waited for"
         f" until its event reached the consumer; {lock['windows']} windows per run, "
         f"{lock['repeats']} runs per path, interleaved."
         + (f" Load average (1 min) {results['load_before']} before, "
            f"{results.get('load_after', '–')} after: the machine was shared, so CPU times "
            "(not only wall times) vary with it — compare paths within the run; the range "
            "across runs shows the noise." if "load_before" in results else "")),
        "",
        "## CPU per window (lockstep)",
        "",
        ("Median across runs (min–max). Process CPU includes every thread; the model's own is "
         "the CPU time of the inference call in the thread that ran it."),
        "",
        ("| path | process CPU / window (ms) | model's own CPU (ms) | beyond the model (ms) "
         "| loop thread: push / stream / back (ms) |"),
        "|---|---|---|---|---|",
    ]
    for side, label in SIDES.items():
        s = summary.get(side)
        if not s:
            continue
        lines.append(
            f"| {label} | {_spread(s['cpu_per_window_ms'])} "
            f"| {_spread(s['model_cpu_per_window_ms'])} | {_spread(s['beyond_model_ms'])} "
            f"| {fmt(s['cpu_push'], 3)} / {fmt(s['cpu_stream'], 3)} / {fmt(s['cpu_back'], 3)} |")
    ours = summary["trio"]["beyond_model_ms"]["median"]
    lines += ["", _adapter_verdict(summary, ours), "",
              "## Wall time per hop (lockstep), p50 / p95 (ms)", "",
              "| path | " + " | ".join(_HOP_LABELS.values()) + " |",
              "|---|" + "---|" * len(_HOP_LABELS)]
    for side, label in SIDES.items():
        s = summary.get(side)
        if not s:
            continue
        cells = " | ".join(f"{fmt(s['wall_ms'][h]['p50'], 3)} / {fmt(s['wall_ms'][h]['p95'], 3)}"
                           for h in _HOP_LABELS)
        lines.append(f"| {label} | {cells} |")
    lines += ["", ("Under plain asyncio “push” and “back” are one call each (no bridge): the "
                   "cost of LiveKit's own event tee then falls in “stream”.")]
    session = results.get("session")
    if session and "skipped" not in session:
        lines += ["", "## Inside a running session (the offline voice demo, real time)", "",
                  (f"{session['runs']} run(s) of `demo --voice` (Silero through `adapt()`, "
                   "PocketSphinx in a subprocess, espeak-ng, rule-based LLM) with the VAD "
                   f"stamped; {session['windows']} windows. Wall time per hop, with everything "
                   "else the session does going on (and other jobs on the machine); then the "
                   "same with `inference_on_loop=False` (the plugin's executor, as before), and "
                   "with `agents_trio.offline.SileroVAD` (native: the plugin's model run in "
                   "`push_frame`, whose events it returns: no push or back hop)."),
                  "", ("| hop | p50 (ms) | p95 (ms) | executor: p50 (ms) | executor: p95 (ms) "
                       "| native: p50 (ms) | native: p95 (ms) |"),
                  "|---|---|---|---|---|---|---|"]
        other = (results.get("session_executor") or {}).get("wall_ms", {})
        native = (results.get("session_native") or {}).get("wall_ms", {})
        for hop, label in _HOP_LABELS.items():
            w = session["wall_ms"].get(hop)
            x = other.get(hop)
            y = native.get(hop)
            if w:
                lines.append(f"| {label} | {fmt(w['p50'], 3)} | {fmt(w['p95'], 3)} | "
                             + (f"{fmt(x['p50'], 3)} | {fmt(x['p95'], 3)} |" if x else "– | – |")
                             + (f" {fmt(y['p50'], 3)} | {fmt(y['p95'], 3)} |" if y else
                                " – | – |"))
        cpu = session.get("loop_thread_cpu_ms") or {}
        if cpu:
            lines += ["", (f"Model's own CPU per window: {fmt(session['model_cpu_ms'], 3)} ms "
                           f"(median). Loop-thread CPU from push to event: "
                           f"{fmt(cpu['cpu_loop_thread'], 3)} ms (median; includes the model, "
                           "which runs on the loop, and whatever other session work ran in "
                           "between).")]
        nat = results.get("session_native") or {}
        nat_cpu = nat.get("loop_thread_cpu_ms") or {}
        if nat_cpu and nat.get("model_cpu_ms") is not None:
            lines += ["", (f"Native: model's own CPU per window {fmt(nat['model_cpu_ms'], 3)} ms, "
                           f"loop-thread CPU from push to event "
                           f"{fmt(nat_cpu['cpu_loop_thread'], 3)} ms (medians; the same "
                           "measure).")]
        lines += ["", "The real pipeline's latencies (same runs):", "",
                  "| measure | VAD inference | n | p50 | p95 | min | max |",
                  "|---|---|---|---|---|---|---|"]
        for key, label in (("end_of_speech_to_first_audio_s", "end of speech → first agent "
                            "audio (s)"), ("barge_in_to_clear_s", "barge-in → audio cleared (s)")):
            for where, run in (("on the loop", session),
                               ("executor", results.get("session_executor") or {}),
                               ("native", results.get("session_native") or {})):
                m = run.get(key) or {}
                if m.get("n"):
                    lines.append(f"| {label} | {where} | {m['n']} | {fmt(m['p50'], 3)} "
                                 f"| {fmt(m['p95'], 3)} | {fmt(m['min'], 3)} "
                                 f"| {fmt(m['max'], 3)} |")
        lines += ["", ("These include the VAD's silence window (Silero `min_silence_duration` "
                       "0.55 s) and the endpointing delay (0.5 s), PocketSphinx's final "
                       "transcript and espeak-ng's first sentence; barge-in includes the "
                       "interruption's 0.5 s minimum speech.")]
    elif session:
        lines += ["", f"Session measurement skipped: {session['skipped']}."]
    return "\n".join(lines) + "\n"


def _adapter_verdict(summary: dict[str, Any], ours: float) -> str:
    floor = summary.get("asyncio_on_loop", {}).get("beyond_model_ms", {}).get("median")
    theirs = summary.get("asyncio", {}).get("beyond_model_ms", {}).get("median")
    text = (f"Target: ≤ {ADAPTER_TARGET_MS} ms per window beyond the model's own time, at the "
            f"median. Through `adapt()`: {fmt(ours, 3)} ms — ")
    if ours <= ADAPTER_TARGET_MS:
        text += "**met**."
    else:
        text += (f"**missed** by {fmt(ours - ADAPTER_TARGET_MS, 3)} ms "
                 f"({fmt(ours / ADAPTER_TARGET_MS, 1)}× the target).")
    if floor is not None:
        text += (f" The plugin's own stream under plain asyncio with the same inference on the "
                 f"loop costs {fmt(floor, 3)} ms beyond the model (LiveKit's Python in the "
                 f"stream, no bridge): the bridge's share is {fmt(ours - floor, 3)} ms.")
    if theirs is not None:
        text += (f" LiveKit's own path (asyncio, the plugin's executor) costs "
                 f"{fmt(theirs, 3)} ms beyond the model.")
    native = summary.get("native", {}).get("beyond_model_ms", {}).get("median")
    if native is not None:
        text += (f" `agents_trio.offline.SileroVAD` (the same model run in `push_frame`, no "
                 f"bridge and no plugin stream): {fmt(native, 3)} ms beyond the model — "
                 + ("**within the target**." if native <= ADAPTER_TARGET_MS else
                    f"over the target by {fmt(native - ADAPTER_TARGET_MS, 3)} ms."))
    return text
