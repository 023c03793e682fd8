"""The README's main job: the offline demo prints the whole conversation."""

from __future__ import annotations

import io

from agents_trio.__main__ import main as cli_main
from agents_trio.demo import main


def test_demo_prints_states_transcripts_tools_and_the_interruption() -> None:
    out = io.StringIO()
    lines = main(realtime=False, out=out)
    text = out.getvalue()
    assert lines and all(line in text for line in lines)
    assert "agent    listening -> thinking" in text
    assert "stt      final   \"What's the weather in Lisbon?\"" in text
    assert "tool     get_weather" in text and "sunny and 22 degrees in Lisbon" in text
    assert "[interrupted]" in text and "playback interrupted" in text
    assert lines[-1].split()[1:] == ["close", "user_initiated"]
    times = [float(line.split()[0].removesuffix("s")) for line in lines]
    assert times == sorted(times)  # in time order, though some events are stamped late


def test_cli_rejects_unknown_commands(capsys) -> None:
    try:
        cli_main(["nonsense"])
    except SystemExit as e:
        assert e.code == 2
    else:  # pragma: no cover
        raise AssertionError("argparse accepted an unknown command")
