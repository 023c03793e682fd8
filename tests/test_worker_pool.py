"""The worker pool's supervision (``python -m agents_trio worker --processes N``), with small
Python processes standing in for the workers: they drain on SIGTERM, crash, or keep crashing.
Real processes, so these run on the real clock; they wait on positive witnesses (files the
children write), never on elapsed time."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from agents_trio.worker_pool import WorkerPool

# a stand-in worker: says it is up, drains on SIGTERM (writes a file), exits 0
DRAINING = """
import signal, sys, pathlib
d = pathlib.Path(sys.argv[1]); i = sys.argv[2]
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
(d / f"up-{i}-{len(list(d.glob(f'up-{i}-*')))}").touch()
signal.sigwait({signal.SIGTERM})
(d / f"drained-{i}").touch()
"""

# crashes on its first run (no marker yet), then behaves like DRAINING
CRASHES_ONCE = """
import pathlib, sys
d = pathlib.Path(sys.argv[1])
if not (d / "crashed").exists():
    (d / "crashed").touch()
    sys.exit(3)
""" + DRAINING


async def until(predicate: object, timeout: float = 20.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():  # type: ignore[operator]
            await trio.sleep(0.02)


def command(script: str, tmp: Path, index: int) -> list[str]:
    return [sys.executable, "-c", script, str(tmp), str(index)]


def test_the_pool_runs_every_process_and_drains_them_all_on_stop(tmp_path: Path) -> None:
    pool = WorkerPool([command(DRAINING, tmp_path, i) for i in range(3)])

    async def main() -> int:
        async with trio.open_nursery() as nursery:
            result: list[int] = []

            async def run() -> None:
                result.append(await pool.run())

            nursery.start_soon(run)
            await until(lambda: len(list(tmp_path.glob("up-*"))) == 3)
            pool.stop()
        return result[0]

    assert trio.run(main) == 0
    assert sorted(p.name for p in tmp_path.glob("drained-*")) == [
        "drained-0", "drained-1", "drained-2"]
    assert [s.starts for s in pool.slots] == [1, 1, 1]


def test_a_crashed_process_is_restarted(tmp_path: Path) -> None:
    pool = WorkerPool([command(CRASHES_ONCE, tmp_path, 0), command(DRAINING, tmp_path, 1)],
                      restart_delay=0.01)

    async def main() -> int:
        async with trio.open_nursery() as nursery:
            result: list[int] = []

            async def run() -> None:
                result.append(await pool.run())

            nursery.start_soon(run)
            await until(lambda: len(list(tmp_path.glob("up-*"))) == 2)
            pool.stop()
        return result[0]

    assert trio.run(main) == 0
    assert [s.starts for s in pool.slots] == [2, 1]
    assert (tmp_path / "drained-0").exists() and (tmp_path / "drained-1").exists()


def test_a_process_that_keeps_failing_stops_the_pool(tmp_path: Path) -> None:
    # fails at once, but only once the healthy one is up (so it is up to be drained): each
    # failing run blocks reading a FIFO until the healthy one, up, holds it open with a byte
    # per run in it
    os.mkfifo(tmp_path / "gate")
    failing = ("import os, pathlib, sys\n"
               "os.read(os.open(str(pathlib.Path(sys.argv[1]) / 'gate'), os.O_RDONLY), 1)\n"
               "raise SystemExit(3)\n")
    opens_gate = DRAINING.replace(
        "signal.sigwait(", "import os; g = os.open(str(d / 'gate'), os.O_RDWR); "
        "os.write(g, b'x' * 8)\nsignal.sigwait(")
    pool = WorkerPool([command(failing, tmp_path, 0), command(opens_gate, tmp_path, 1)],
                      restart_delay=0.01, max_quick_failures=3)
    assert trio.run(pool.run) == 1
    assert pool.slots[0].starts == 3
    assert (tmp_path / "drained-1").exists()  # the healthy one was drained, not killed


def test_the_pool_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="at least one"):
        WorkerPool([])
    with pytest.raises(ValueError, match="restart_delay"):
        WorkerPool([["x"]], restart_delay=5, max_restart_delay=1)
    with pytest.raises(ValueError, match="max_quick_failures"):
        WorkerPool([["x"]], max_quick_failures=0)


def test_a_process_started_while_the_pool_stops_is_stopped_too(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    # the stop comes while the process is being spawned (trio's open_process waits for a
    # thread): the process it brings must be told to drain as well, not waited for forever
    real_open_process = trio.lowlevel.open_process
    spawning, release = trio.Event(), trio.Event()

    async def held_open_process(*args: object, **kwargs: object) -> trio.Process:
        spawning.set()
        await release.wait()
        return await real_open_process(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(trio.lowlevel, "open_process", held_open_process)
    pool = WorkerPool([command(DRAINING, tmp_path, 0)])

    async def main() -> int:
        result: list[int] = []
        async with trio.open_nursery() as nursery:
            async def run() -> None:
                result.append(await pool.run())

            nursery.start_soon(run)
            await spawning.wait()
            pool.stop()
            release.set()
            with trio.fail_after(20):  # the pool ends: its one process was told to stop
                while not result:
                    await trio.sleep(0.02)
        return result[0]

    assert trio.run(main) == 0
    # told at once, it may not have set up its drain yet: it ended either way
    process = pool.slots[0].process
    assert process is not None and process.returncode is not None
    assert pool.slots[0].starts == 1
