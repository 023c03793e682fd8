"""The report's collector section: the runs around each runtime's 100 ms crossing, with their
longest pauses, and the ``--gc off`` diagnosis when one was saved."""

from bench import report


def _run(rt: str, n: int, p99: float, gen2_ms: float) -> dict:
    return {"runtime": rt, "n": n, "transforms": "off",
            "summary": {"turn_overhead_ms": {"p99": p99}, "failed_sessions": 0,
                        "sessions": n},
            "resources": {"cpu_utilisation": 0.5,
                          "gc": {"gen0": {"max_ms": 1.0}, "gen1": {"max_ms": 2.0},
                                 "gen2": {"max_ms": gen2_ms, "count": 3}}}}


def test_the_collector_section_shows_the_runs_around_the_crossing_and_the_diagnosis() -> None:
    runs = [_run("trio", 100, 20.0, 30.0), _run("trio", 200, 80.0, 70.0),
            _run("trio", 300, 150.0, 140.0), _run("asyncio", 50, 40.0, 45.0),
            _run("asyncio", 80, 130.0, 120.0)]
    off = {"meta": {"date": "today"}, "runs": [_run("trio", 300, 9.0, 0.0)]}
    md = "\n".join(report._gc_md(runs, off))
    rows = [line for line in md.splitlines() if line.startswith("| agents_trio")
            or line.startswith("| LiveKit")]
    assert [r.split(" | ")[1] for r in rows] == ["200", "300", "50", "80"]
    assert "| 1 / 2 / 140 |" in md
    assert "N = 300: p99 9.0 ms" in md
    assert report._gc_md([], None) == []


def test_a_narrow_miss_is_printed_with_enough_digits_to_see_it() -> None:
    row = {"key": "turn_p50", "target": "plumbing ≤ ⅕", "where": "N = 1", "limit": 0.2,
           "ours": 0.73, "theirs": 3.59, "ratio": 0.73 / 3.59, "met": False}
    line = report._targets_md([row])[-1]
    assert "missed by 1.02× (ratio 0.203 > 0.200)" in line
