"""The CPU figure taken apart: the fake network alone (inputs with no session) delivers every
input its frames on the sessions' schedule and stops at each input's close; the report derives
the turns', the frames' and the beyond-the-network shares from the three runs."""

from __future__ import annotations

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
