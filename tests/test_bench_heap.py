"""bench/heap.py: the census counts what the collector walks, per type and package."""

from __future__ import annotations

from bench import heap


class _Held:
    def __init__(self, peers: list[object]) -> None:
        self.a: list[object] = []
        self.b = {"k": 1}
        self.peers = peers


def test_the_census_counts_objects_and_their_references_by_type_and_package() -> None:
    peers: list[object] = []
    held = [_Held(peers) for _ in range(20_000)]  # among the most numerous types
    result = heap.census(live=1)
    types = {t["type"]: t for t in result["types"]}
    mine = types[f"{__name__}._Held"]
    assert mine["objects"] == 20_000
    # each instance references its type, its list, its dict and the shared list
    assert mine["references"] >= 4 * 20_000
    assert result["packages"][__name__.split(".")[0]]["objects"] >= 20_000
    assert result["tracked"] >= 40_000  # the instances and their lists (the dicts of atoms are not tracked)
    assert result["references"] >= sum(t["references"] for t in result["types"])
    assert result["full_collection_ms"] > 0
    assert held


def test_the_report_gives_objects_and_references_per_session() -> None:
    run = {"runtime": "trio", "n": 2, "heap": {
        "live_sessions": 2, "tracked": 800, "references": 3000, "frozen": 10,
        "full_collection_ms": 1.5,
        "packages": {"trio": {"objects": 200, "references": 1000},
                     "Python": {"objects": 600, "references": 2000}},
        "types": [{"type": "trio.CancelScope", "objects": 20, "references": 200}]}}
    meta = {"date": "d", "machine": "m", "python": "3", "gc": "freeze", "script": "full",
            "commit": "c"}
    text = heap.render(meta, [run])
    assert "| agents_trio | 2 | 400 | 1500 | 1.5 | 1.88 | 500 |" in text
    assert "| trio | 100 | 500 | 33.3 % |" in text
    assert "| `trio.CancelScope` | 10.00 | 100 |" in text


def test_the_benchmark_report_says_what_a_full_collection_walks() -> None:
    from bench import report

    heap_runs = {"meta": {"date": "2026-01-01 00:00"}, "runs": [
        {"runtime": "trio", "n": 400, "heap": {"live_sessions": 400, "tracked": 160000,
                                                "references": 720000,
                                                "full_collection_ms": 90.0}}]}
    text = "\n".join(report.heap_paragraph(heap_runs))
    assert ("agents_trio at N = 400: 400 tracked objects and 1800 references per session, "
            "one full collection 90.0 ms (125 ns per reference)") in text
    assert report.heap_paragraph(None) == []


def test_a_type_whose_module_is_not_a_string_is_counted() -> None:
    # Cython's metatypes have a descriptor where a type's module name would be; the census
    # met one in a full test run
    class Meta(type):
        __module__ = property(lambda cls: None)  # type: ignore[assignment]

    odd = Meta("Odd", (), {})
    held = [odd() for _ in range(20_000)]
    result = heap.census(live=1)
    assert result["packages"]["?"]["objects"] >= 20_000
    assert any(t["type"] == ".Odd" and t["objects"] == 20_000 for t in result["types"])
    assert held


def test_a_failed_census_run_leaves_the_saved_results_alone(tmp_path, monkeypatch) -> None:
    """A census run that fails (here our N = 400 one, as with the system Python, where
    livekit is not installed) must not overwrite the last good results with a report
    missing its rows."""
    import argparse

    from bench import __main__ as bench_main

    good = tmp_path / "heap.md"
    good.write_text("the last good report\n")
    (tmp_path / "heap.json").write_text("{}\n")

    def run_worker(runtime, n, **_):
        if runtime == "trio" and n == 400:
            return {"runtime": runtime, "n": n, "error": "exit 1: ModuleNotFoundError"}
        return {"runtime": runtime, "n": n, "summary": {"turn_overhead_ms": {"p99": 5.0}},
                "resources": {"gc": {}}, "heap": {"live_sessions": n, "tracked": 10 * n,
                                                  "references": 40 * n, "frozen": 0,
                                                  "full_collection_ms": 1.0, "packages": {},
                                                  "types": []}}

    monkeypatch.setattr(bench_main, "run_worker", run_worker)
    logged: list[str] = []
    args = argparse.Namespace(with_asyncio=True, script="full", gc="freeze", out=tmp_path,
                              tree_info={"commit": "c"})
    assert heap.main(args, logged.append) == 1
    assert good.read_text() == "the last good report\n"
    assert (tmp_path / "heap.json").read_text() == "{}\n"
    assert any("trio N=400" in line and "not written" in line for line in logged), logged
