"""The capacity target counted on repeated runs: near the 100 ms crossing one run's p99 turns
on whether a full collection lands in its phase, so the sweep runs the N on each side of every
runtime's crossing again and the target takes each N's median p99."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

import pytest

from bench import report


def _run(rt: str, n: int, p99: float | None, *, failed: int = 0,
         refinement: bool = False) -> dict:
    run = {"runtime": rt, "n": n, "transforms": "off",
           "summary": {"turn_overhead_ms": {"p99": p99}, "turn_plumbing_ms": {"p50": 1.0},
                       "interruption_ms": {"p99": 1.0}, "failed_sessions": failed,
                       "sessions": n},
           "resources": {"cpu_per_session_second": 0.001}}
    if refinement:
        run["refinement"] = True
    return run


def _repeat(rt: str, n: int, p99: float | None, i: int, failed: int = 0) -> dict:
    return {"runtime": rt, "n": n, "repeat": i, "p99": p99, "failed_sessions": failed,
            "sessions": n}


RUNS = [_run("trio", 300, 60.0), _run("trio", 400, 90.0), _run("trio", 500, 130.0),
        _run("trio", 450, 104.0, refinement=True),
        _run("asyncio", 50, 40.0), _run("asyncio", 100, 97.0), _run("asyncio", 200, 400.0),
        _run("asyncio", 150, 120.0, refinement=True)]


def test_each_n_counts_with_the_median_of_its_runs() -> None:
    alone = report.capacity(RUNS, "trio")
    assert (alone["last_ok"], alone["first_over"]) == (400, 450)
    # two more runs at 450 under the limit: its median (97) is under it, 500 is the first over
    repeats = [_repeat("trio", 450, 95.0, 1), _repeat("trio", 450, 97.0, 2),
               _repeat("trio", 400, 80.0, 1), _repeat("trio", 400, 85.0, 2)]
    cap = report.capacity(RUNS, "trio", repeats=repeats)
    assert (cap["last_ok"], cap["first_over"]) == (450, 500)
    assert 450 < cap["estimate"] < 500
    # a repeat with more than 5 % of its sessions failed counts as over the limit
    failing = [_repeat("trio", 450, 95.0, 1, failed=30), _repeat("trio", 450, 97.0, 2,
                                                                 failed=30)]
    assert report.capacity(RUNS, "trio", repeats=failing)["first_over"] == 450
    assert report.capacity_p99s(RUNS, failing, "trio")[450][1] == float("inf")


def test_the_target_row_says_what_the_sweeps_runs_alone_gave() -> None:
    alone = next(t for t in report.compute_targets(RUNS) if t["key"] == "capacity")
    assert alone["ratio"] == pytest.approx(4.07, abs=0.01) and not alone["met"]
    assert "median" not in alone["where"]
    # ours: 450 under the limit on its median; LiveKit's 100 over it on its median
    repeats = [_repeat("trio", 450, 95.0, 1), _repeat("trio", 450, 97.0, 2),
               _repeat("asyncio", 100, 150.0, 1), _repeat("asyncio", 100, 160.0, 2)]
    row = next(t for t in report.compute_targets(RUNS, None, repeats)
               if t["key"] == "capacity")
    ours = report.capacity(RUNS, "trio", repeats=repeats)
    theirs = report.capacity(RUNS, "asyncio", repeats=repeats)
    assert (theirs["last_ok"], theirs["first_over"]) == (50, 100)
    assert row["ratio"] == pytest.approx(ours["estimate"] / theirs["estimate"])
    assert row["ratio"] > 5 and row["met"]
    assert row["single_runs"] == pytest.approx(alone["ratio"])
    assert row["where"] == "turn p99 ≤ 100 ms; each N's median p99"
    assert report._targets_md([row])[-1].endswith(
        "| **met** on the medians (the sweep's runs alone: 4.07×) |")
    # the other way round: missed on the medians though the sweep's runs alone met it
    flipped = dict(row, ratio=4.5, met=False, single_runs=5.2)
    assert "missed: 4.50× of 5× (the sweep's runs alone: 5.20×)" in report._targets_md(
        [flipped])[-1]


def test_the_report_lists_each_run_at_the_repeated_points() -> None:
    repeats = [_repeat("trio", 450, 95.0, 1), _repeat("trio", 450, None, 2),
               _repeat("asyncio", 100, 99.0, 1), _repeat("asyncio", 100, 105.0, 2)]
    md = "\n".join(report.capacity_repeats_md(RUNS, repeats))
    assert "| agents_trio | 450 | 104, 95.0, ∞ | 104 |" in md
    assert "| LiveKit Agents (asyncio) | 100 | 97.0, 99.0, 105 | 99.0 |" in md
    assert "agents_trio ≈ " in md and "from the sweep's runs alone" in md
    assert report.capacity_repeats_md(RUNS, []) == []


def test_the_repeats_run_both_sides_of_each_crossing_alternating_the_runtimes(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bench_main = importlib.import_module("bench.__main__")
    calls: list[tuple[str, int, str]] = []

    def fake_run_worker(rt: str, n: int, **kw: Any) -> dict:
        calls.append((rt, n, kw["tag"]))
        if rt == "asyncio" and kw["tag"] == "capacity2":
            return {"runtime": rt, "n": n}   # a run that produced no summary
        return _run(rt, n, 50.0 + n / 10)

    monkeypatch.setattr(bench_main, "run_worker", fake_run_worker)
    args = argparse.Namespace(out=tmp_path, with_asyncio=True, with_pipecat=False,
                              capacity_repeats=2, script="full", gc="freeze")
    out = bench_main.capacity_repeats(args, lambda msg: None, RUNS)
    assert calls == [("asyncio", 100, "capacity1"), ("asyncio", 150, "capacity1"),
                     ("trio", 400, "capacity1"), ("trio", 450, "capacity1"),
                     ("trio", 400, "capacity2"), ("trio", 450, "capacity2"),
                     ("asyncio", 100, "capacity2"), ("asyncio", 150, "capacity2")]
    assert out[2] == _repeat("trio", 400, 90.0, 1)
    # the run without a summary counts as failed, hence over the limit
    assert out[-1] == _repeat("asyncio", 150, None, 2, failed=150)
