"""The benchmark harness keeps working: one scripted session in Trio virtual time.

Speed is measured by ``python -m bench`` and reported, never asserted here; this only checks
that the harness runs the script end to end (turns answered, interruption cleared) and that
virtual time gives the same result twice.
"""

from bench import virtual


def test_bench_harness_runs_in_virtual_time() -> None:
    res = virtual.run(n=1, kind="quick")
    assert res["sessions"] == 1
    assert res["errors"] == []
    assert res["deterministic"]
    lat = res["latencies_ms"]
    assert lat["eot_to_llm_request"]["n"] == 3
    assert lat["turn_overhead"]["n"] == 3
    assert lat["threshold_to_clear"]["n"] == 1
