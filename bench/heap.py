"""What a full collection walks: the cyclic collector's tracked objects and their references
per live session, by package and by type, and how long one full collection takes there.

    python -m bench --heap          # agents_trio and LiveKit at N = 50, ours at N = 400

A full collection of CPython's cyclic collector stops the loop while it walks every tracked
object outside the frozen generation (``gc.freeze()`` after warm-up, as in every run) and
follows every reference it holds. Each worker (``python -m bench.worker ... --heap``) runs
the usual script and, once all N sessions are live, counts what the collector would walk
(``gc.get_objects()``, ``gc.get_referents()``), then times two full collections
(``gc.collect()``) and keeps the faster. The counts do not depend on timing; the collection
time does (the machine, its caches, its other load). Results: ``bench/results/heap.md`` and
``heap.json``.
"""

from __future__ import annotations

import collections
import gc
import json
import time
import types
from pathlib import Path
from typing import Any

TOP_TYPES = 14


def _module(t: type) -> str:
    """``t.__module__``, or "" for a type without one (a Cython metatype's is a descriptor)."""
    module = getattr(t, "__module__", None)
    return module if isinstance(module, str) else ""


def _package(t: type) -> str:
    module = _module(t)
    if module in ("builtins", "_contextvars", "collections", "weakref", "contextlib",
                  "functools", "_asyncio", "asyncio", "_weakrefset") \
            or module.startswith("asyncio."):
        # the language's own containers, frames and asyncio's tasks and futures
        return "asyncio" if "asyncio" in module else "Python"
    return module.split(".", 1)[0] or "?"


def _type_name(o: Any) -> str:
    t = type(o)
    if t is types.CoroutineType:
        return "coroutine"
    module = _module(t)
    return f"{module}.{t.__qualname__}" if module != "builtins" else t.__qualname__


def census(live: int) -> dict[str, Any]:
    """What the collector would walk now, per live session, and a timed full collection."""
    gc.collect()
    objects = gc.get_objects()
    by_type: collections.Counter[str] = collections.Counter()
    refs_by_type: collections.Counter[str] = collections.Counter()
    by_package: collections.Counter[str] = collections.Counter()
    refs_by_package: collections.Counter[str] = collections.Counter()
    for o in objects:
        name, package = _type_name(o), _package(type(o))
        refs = len(gc.get_referents(o))
        by_type[name] += 1
        refs_by_type[name] += refs
        by_package[package] += 1
        refs_by_package[package] += refs
    tracked = len(objects)
    del objects
    timings = []
    for _ in range(2):
        t = time.perf_counter()
        gc.collect()
        timings.append((time.perf_counter() - t) * 1e3)
    return {
        "live_sessions": live,
        "tracked": tracked,
        "references": sum(refs_by_type.values()),
        "frozen": gc.get_freeze_count(),
        "full_collection_ms": min(timings),
        "packages": {p: {"objects": by_package[p], "references": refs_by_package[p]}
                     for p in by_package},
        "types": [{"type": name, "objects": count, "references": refs_by_type[name]}
                  for name, count in by_type.most_common(60)],
    }


RUNS = (("trio", 50), ("asyncio", 50), ("trio", 400))


def main(args: Any, log: Any) -> int:
    """Run the census workers and write ``heap.json`` and ``heap.md``."""
    import platform

    from . import __main__ as bench_main

    runs = []
    failed = []
    for runtime, n in RUNS:
        if runtime == "asyncio" and not args.with_asyncio:
            continue
        data = bench_main.run_worker(runtime, n, script=args.script, transforms="off",
                                     gc_mode=args.gc, rounds=1, out_dir=args.out,
                                     timeout=900, log=log, tag="heap", heap=True)
        if data.get("heap"):
            runs.append({"runtime": runtime, "n": n, "heap": data["heap"],
                         "turn_p99_ms": data["summary"]["turn_overhead_ms"].get("p99"),
                         "gc": data["resources"].get("gc")})
        else:
            failed.append(f"{runtime} N={n}")
    if failed:
        # a report missing rows would replace the last complete one
        log(f"no census from {', '.join(failed)}: heap.json and heap.md not written\n")
        return 1
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": bench_main.machine(),
            "python": platform.python_version(), "gc": args.gc, "script": args.script,
            "commit": args.tree_info.get("commit")}
    (Path(args.out) / "heap.json").write_text(json.dumps({"meta": meta, "runs": runs},
                                                         indent=1))
    (Path(args.out) / "heap.md").write_text(render(meta, runs))
    log(f"wrote {Path(args.out) / 'heap.md'}\n")
    return 0


_RUNTIME = {"trio": "agents_trio", "asyncio": "LiveKit Agents (asyncio)"}


def render(meta: dict[str, Any], runs: list[dict[str, Any]]) -> str:
    from .report import fmt

    lines = [
        "# What a full collection walks",
        "",
        f"`python -m bench --heap`, {meta['date']}, {meta['machine']}, Python "
        f"{meta['python']}, commit {meta['commit']}; gc mode `{meta['gc']}`, script "
        f"`{meta['script']}`. Counted once all N sessions were live (the harness's own "
        "probes and scripts are frozen before the measured phase, so they are not counted). "
        "See `bench/heap.py`.",
        "",
        "| runtime | N | tracked objects per session | references per session | "
        "full collection (ms) | per tracked object (µs) | per reference (ns) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in runs:
        h = r["heap"]
        live = h["live_sessions"] or 1
        lines.append(
            f"| {_RUNTIME[r['runtime']]} | {r['n']} | {fmt(h['tracked'] / live, 0)} | "
            f"{fmt(h['references'] / live, 0)} | {fmt(h['full_collection_ms'], 1)} | "
            f"{fmt(h['full_collection_ms'] * 1e3 / max(h['tracked'], 1), 2)} | "
            f"{fmt(h['full_collection_ms'] * 1e6 / max(h['references'], 1), 0)} |")
    for r in runs:
        h = r["heap"]
        live = h["live_sessions"] or 1
        lines += ["", f"## {_RUNTIME[r['runtime']]}, N = {r['n']}: per session, by package "
                  "of the object's type", "",
                  "| package | objects | references | share of references |",
                  "|---|---|---|---|"]
        total = max(h["references"], 1)
        for package, c in sorted(h["packages"].items(), key=lambda kv: -kv[1]["references"]):
            if c["references"] / total < 0.005:
                continue
            lines.append(f"| {package} | {fmt(c['objects'] / live, 1)} | "
                         f"{fmt(c['references'] / live, 1)} | "
                         f"{fmt(100 * c['references'] / total, 1)} % |")
        lines += ["", "| type (by references) | objects | references |", "|---|---|---|"]
        for t in sorted(h["types"], key=lambda t: -t["references"])[:TOP_TYPES]:
            lines.append(f"| `{t['type']}` | {fmt(t['objects'] / live, 2)} | "
                         f"{fmt(t['references'] / live, 1)} |")
    lines.append("")
    return "\n".join(lines)
