"""The CPU figure taken apart: the fake network alone (inputs with no session) delivers every
input its frames on the sessions' schedule and stops at each input's close; the report derives
the turns', the frames' and the beyond-the-network shares from the three runs."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

from bench import core, report, trio_side
from bench.core import FRAME


async def test_the_network_alone_delivers_each_input_its_frames_until_it_closes(
        autojump_clock: trio.testing.MockClock) -> None:
    probes = [core.Probe(index=i, script=core.listening_script(2.0)) for i in range(3)]
    network = trio_side.Network()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(network.run)
        await trio_side.run_network_only(probes, network, spread=0.3)
        delivered = network.delivered
        await trio.sleep(1.0)   # closed inputs get nothing more
        assert network.delivered == delivered
        nursery.cancel_scope.cancel()
    # started on the sessions' schedule, each for its script's length
    assert [p.started_at for p in probes] == pytest.approx([0.0, 0.1, 0.2])
    assert [p.ended_at - p.t0 for p in probes] == pytest.approx([2.0] * 3)   # type: ignore[operator]
    # a frame every 20 ms for 2 s each (the last one due at the close may or may not go out)
    per_input = 2.0 / FRAME
    assert 3 * (per_input - 1) <= delivered <= 3 * per_input


def _whole(rt: str, n: int, cpu: float) -> dict:
    return {"runtime": rt, "n": n, "transforms": "off",
            "resources": {"cpu_per_session_second": cpu}}


def test_the_report_takes_the_cpu_figure_apart() -> None:
    runs = [_whole("trio", 10, 0.0025), _whole("asyncio", 10, 0.0070)]
    split = [{"runtime": rt, "n": 10, "script": script, "cpu_per_session_second": v}
             for rt, script, v in (("trio", "listen", 0.0015), ("trio", "network", 0.0011),
                                   ("asyncio", "listen", 0.0035),
                                   ("asyncio", "network", 0.0009))]
    md = "\n".join(report.cpu_split_md(runs, split))
    ours = next(line for line in md.splitlines() if line.startswith("| 10 | agents_trio"))
    theirs = next(line for line in md.splitlines() if line.startswith("| 10 | LiveKit"))
    # whole, listening, network, turns, frames in the session, beyond the network
    assert ours.split(" | ")[2:] == ["2.50", "1.50", "1.10", "1.00", "0.40", "1.40 |"]
    assert theirs.split(" | ")[2:] == ["7.00", "3.50", "0.90", "3.50", "2.60", "6.10 |"]
    assert "ours / LiveKit's: N = 10: 0.23" in md
    assert report.cpu_split_md(runs, []) == []


def _run(rt: str, n: int, cpu: float) -> dict:
    return {"runtime": rt, "n": n, "transforms": "off",
            "summary": {"turn_overhead_ms": {"p99": 5.0}, "failed_sessions": 0, "sessions": n},
            "resources": {"cpu_per_session_second": cpu}}


def _repeat(rt: str, n: int, cpu: float, i: int) -> dict:
    return {"runtime": rt, "n": n, "repeat": i, "cpu_per_session_second": cpu}


def test_the_cpu_target_takes_each_runtimes_median_over_the_repeated_runs() -> None:
    runs = [_run("trio", 10, 0.0030), _run("asyncio", 10, 0.0070),
            _run("trio", 50, 0.0017), _run("asyncio", 50, 0.0065)]
    repeats = [_repeat("trio", 10, 0.0022, 1), _repeat("asyncio", 10, 0.0072, 1),
               _repeat("trio", 10, 0.0021, 2), _repeat("asyncio", 10, 0.0066, 2)]
    alone = next(t for t in report.compute_targets(runs) if t["key"] == "cpu")
    assert alone["per_n"][10] == pytest.approx(0.0030 / 0.0070)   # one run: missed
    assert not alone["met"]
    assert "median" not in alone["where"]
    cpu = next(t for t in report.compute_targets(runs, repeats) if t["key"] == "cpu")
    assert cpu["ours_per_n"] == pytest.approx({10: 0.0022, 50: 0.0017})
    assert cpu["theirs_per_n"] == pytest.approx({10: 0.0070, 50: 0.0065})
    assert cpu["ratio"] == pytest.approx(0.0022 / 0.0070)   # the worst N, medians
    assert cpu["met"]
    assert cpu["where"] == "N = 10, 50 (worst; medians of 1–3 runs)"
    # the sweep's own pair (0.0030 against 0.0070) missed: the row says so
    assert cpu["worst_single"] == pytest.approx(0.0030 / 0.0070)
    assert "**met** on the medians (single runs up to 0.43)" in report._targets_md([cpu])[-1]


def test_the_report_lists_each_repeated_run_and_uses_the_median_as_the_whole_run() -> None:
    runs = [_run("trio", 10, 0.0030), _run("asyncio", 10, 0.0070)]
    repeats = [_repeat("trio", 10, 0.0022, 1), _repeat("asyncio", 10, 0.0072, 1),
               _repeat("trio", 10, 0.0021, 2), _repeat("asyncio", 10, 0.0066, 2)]
    md = "\n".join(report.cpu_repeats_md(runs, repeats))
    assert "| 10 | agents_trio | 3.00, 2.20, 2.10 | 2.20 | 0.31 | 0.43, 0.31, 0.32 |" in md
    assert "| 10 | LiveKit Agents (asyncio) | 7.00, 7.20, 6.60 | 7.00 |  |  |" in md
    assert report.cpu_repeats_md(runs, []) == []
    # a repeat one runtime lacks (its run failed) pairs nothing: the others keep their partners
    gap = [x for x in repeats if not (x["runtime"] == "trio" and x["repeat"] == 1)]
    assert "| 10 | agents_trio | 3.00, 2.10 | 2.55 | 0.36 | 0.43, 0.32 |" in "\n".join(
        report.cpu_repeats_md(runs, gap))
    split = [{"runtime": "trio", "n": 10, "script": "network", "cpu_per_session_second": 0.0012}]
    ours = next(line for line in report.cpu_split_md(runs, split, repeats)
                if line.startswith("| 10 | agents_trio"))
    assert ours.split(" | ")[2] == "2.20"   # the median, not the sweep's run
    assert ours.split(" | ")[-1] == "1.00 |"   # beyond the network: 2.20 − 1.20


def _recording_worker(calls: list[tuple[str, int, str]], key: str,
                      **resources: float) -> Callable[..., dict]:
    """A stand-in for ``run_worker`` that records (runtime, N, the run's ``key``) and
    returns a run whose CPU per session-second is 0.001·N, with ``resources`` besides."""
    def run_worker(rt: str, n: int, **kw: Any) -> dict:
        calls.append((rt, n, kw[key]))
        return {"runtime": rt, "n": n, "resources": {
            "cpu_per_session_second": 0.001 * n, "cpu_utilisation": 0.1,
            "host_other_cores": 0.0, **resources}}
    return run_worker


def test_the_repeats_alternate_the_runtimes_and_skip_a_stopped_series(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bench_main = importlib.import_module("bench.__main__")
    calls: list[tuple[str, int, str]] = []
    monkeypatch.setattr(bench_main, "run_worker", _recording_worker(calls, "tag"))
    args = argparse.Namespace(out=tmp_path, with_asyncio=True, cpu_repeats=2, script="full",
                              gc="freeze", ns=[1, 10, 50, 100, 200])
    out = bench_main.cpu_repeats(args, lambda msg: None,
                                 {"trio": None, "asyncio": {"n": 100, "reason": "x"}})
    assert calls == [("asyncio", 1, "repeat1"), ("trio", 1, "repeat1"),
                     ("trio", 1, "repeat2"), ("asyncio", 1, "repeat2"),
                     ("asyncio", 10, "repeat1"), ("trio", 10, "repeat1"),
                     ("trio", 10, "repeat2"), ("asyncio", 10, "repeat2"),
                     ("asyncio", 50, "repeat1"), ("trio", 50, "repeat1"),
                     ("trio", 50, "repeat2"), ("asyncio", 50, "repeat2"),
                     ("trio", 100, "repeat1"), ("trio", 100, "repeat2")]
    assert [(x["runtime"], x["n"], x["repeat"]) for x in out] == [
        (rt, n, int(tag[-1])) for rt, n, tag in calls]
    assert out[0]["cpu_per_session_second"] == pytest.approx(0.001)


def _split(rt: str, n: int, script: str, cpu: float, wakes: float, us: float) -> dict:
    return {"runtime": rt, "n": n, "script": script, "cpu_per_session_second": cpu,
            "wakeups_per_session_second": wakes, "cpu_per_wakeup_us": us}


def test_the_wake_floor_is_the_network_plus_further_wake_ups_at_the_bare_price() -> None:
    split = [_split("trio", 1, "network", 0.018, 54.0, 300.0),
             _split("trio", 10, "whole", 0.0042, 10.0, 400.0),
             _split("trio", 10, "listen", 0.0027, 6.0, 450.0),
             _split("trio", 10, "network", 0.0018, 6.0, 300.0),
             _split("asyncio", 1, "network", 0.017, 54.0, 280.0),
             _split("asyncio", 10, "whole", 0.0100, 12.0, 830.0),
             _split("asyncio", 10, "listen", 0.0060, 6.0, 1000.0),
             _split("asyncio", 10, "network", 0.0017, 6.0, 280.0)]
    # 1.8 ms of network + 4 more wake-ups per session-second at 300 µs
    assert report.wake_floor(split, "trio", 10) == pytest.approx(0.0018 + 4 * 300e-6)
    assert report.wake_floor(split, "asyncio", 10) == pytest.approx(0.0017 + 6 * 280e-6)
    assert report.wake_floor(split[1:], "trio", 10) is None   # no bare wake-up measured
    runs = [_whole("trio", 10, 0.0042), _whole("asyncio", 10, 0.0095)]
    md = "\n".join(report.cpu_split_md(runs, split))
    ours = next(line for line in md.splitlines()
                if line.startswith("| 10 | agents_trio | 10.0 /"))
    # wake-ups, CPU per wake-up, the split's whole run, the floor, floor / LiveKit's 9.5 ms
    assert ours.split(" | ")[2:] == ["10.0 / 6.0 / 6.0", "400 / 300 / 300", "4.20", "3.00",
                                     "0.32 |"]
    assert "At N = 10" not in md     # 3.0 of 9.5: under ⅓
    runs = [_whole("trio", 10, 0.0042), _whole("asyncio", 10, 0.0080)]
    md = "\n".join(report.cpu_split_md(runs, split))
    assert "At N = 10 the wake-ups alone put our floor at 0.38 of LiveKit's figure" in md
    # at asyncio's prices: its network 1.7 ms + 4 more wake-ups at 280 µs = 2.82 of 8.0
    assert report.wake_floor(split, "trio", 10, priced_as="asyncio") == pytest.approx(
        0.0017 + 4 * 280e-6)
    assert "300 µs on Trio here and 280 µs on asyncio" in md
    assert "would still be 0.35 of LiveKit's figure" in md
    # splits measured before wake-ups were counted: no wake-up table
    old = [{k: v for k, v in x.items() if not k.startswith(("wakeups", "cpu_per_wakeup"))}
           for x in split]
    assert "Wake-ups" not in "\n".join(report.cpu_split_md(runs, old))


def test_the_meter_counts_the_wake_ups_of_the_measured_phase() -> None:
    import select

    from bench import worker
    probe = core.Probe(index=0, script=core.listening_script(1.0))
    meter = worker.Meter([probe])
    meter.begin(0.0)
    for _ in range(5):
        select.select([], [], [], 0.001)   # five waits that block: five voluntary switches
    meter.end(1.0)
    res = meter.result()
    assert 5 <= res["wakeups"] <= 50
    assert res["wakeups_per_session_second"] == pytest.approx(res["wakeups"] / 1.0)
    assert res["cpu_per_wakeup_us"] == pytest.approx(
        res["phase_cpu_s"] / res["wakeups"] * 1e6)


def test_the_split_runs_each_part_and_the_bare_wake_up(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bench_main = importlib.import_module("bench.__main__")
    calls: list[tuple[str, int, str]] = []
    monkeypatch.setattr(bench_main, "run_worker", _recording_worker(
        calls, "script", wakeups_per_session_second=5.0, cpu_per_wakeup_us=300.0))
    args = argparse.Namespace(out=tmp_path, with_asyncio=True, script="full", gc="freeze",
                              ns=[10, 200])
    out = bench_main.cpu_split(args, lambda msg: None)
    # without N = 1 in the sweep, the bare wake-up's run comes first
    assert calls == [(rt, n, sc) for n, sc in ((1, "network"), (10, "full"), (10, "listen"),
                                               (10, "network"))
                     for rt in ("trio", "asyncio")]
    assert [x["script"] for x in out[2:4]] == ["whole", "whole"]
    assert out[0]["wakeups_per_session_second"] == 5.0
    calls.clear()
    args.ns = [1, 10]
    bench_main.cpu_split(args, lambda msg: None)
    assert [(n, sc) for _, n, sc in calls[::2]] == [
        (1, "full"), (1, "listen"), (1, "network"), (10, "full"), (10, "listen"),
        (10, "network")]


def test_the_cpu_target_counts_every_n_single_sessions_too() -> None:
    runs = [_run("trio", 1, 0.024), _run("asyncio", 1, 0.040),
            _run("trio", 10, 0.0030), _run("asyncio", 10, 0.0100)]
    for r in runs:
        r["summary"].update(turn_plumbing_ms={"p50": 1.0}, interruption_ms={"p99": 1.0})
        r["summary"]["turn_overhead_ms"]["p50"] = 3.0
    cpu = next(t for t in report.compute_targets(runs) if t["key"] == "cpu")
    assert cpu["per_n"] == pytest.approx({1: 0.6, 10: 0.3})
    assert cpu["ratio"] == pytest.approx(0.6)
    assert not cpu["met"]
    assert cpu["where"].startswith("N = 1, 10")
