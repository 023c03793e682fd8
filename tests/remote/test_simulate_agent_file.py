"""``simulate`` against an agent file written the LiveKit way (``--agent FILE`` or the
scenario file's ``"agent"`` key): its entrypoint runs as a local job and the scenarios talk to
the session it starts."""

from __future__ import annotations

import json
import pathlib
import shutil

import pytest

from agents_trio.__main__ import main as cli_main

AGENT = pathlib.Path(__file__).resolve().parent.parent / "data" / "livekit_style_agent.py"

WEATHER_TURNS = [
    {"user": "What's the weather in Paris?", "match": "in_order", "expect": [
        {"type": "function_call", "name": "get_weather", "arguments": {"location": "Paris"}},
        {"type": "function_call_output", "contains": "asked from room console"},
        {"type": "message", "role": "assistant", "text": "Sunny and 22 degrees in Paris."}]},
    {"user": "Thanks, bye", "expect": [{"type": "message", "text": "Goodbye!"}]},
]


@pytest.fixture(autouse=True)
def fake_models(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_MODELS", "fake")


def _scenario_file(tmp_path: pathlib.Path, turns: list[dict], **extra: str) -> pathlib.Path:
    path = tmp_path / "scenarios.json"
    path.write_text(json.dumps({**extra, "scenarios": [
        {"name": "paris", "turns": turns}, {"name": "again", "turns": turns[:1]}]}))
    return path


def test_agent_option_plays_the_scenarios_against_the_files_session(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario_file(tmp_path, WEATHER_TURNS)
    assert cli_main(["simulate", str(path), "--agent", str(AGENT)]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("2/2 scenarios passed")
    # the demo agent would not have answered this way
    wrong = _scenario_file(tmp_path, [{"user": "Thanks, bye", "expect": [
        {"type": "message", "text": "Farewell."}]}])
    assert cli_main(["simulate", str(wrong), "--agent", str(AGENT)]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_the_scenario_files_agent_key_is_relative_to_it(
        tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "agents").mkdir()
    shutil.copy(AGENT, tmp_path / "agents" / "weather.py")
    path = _scenario_file(tmp_path, WEATHER_TURNS, agent="agents/weather.py")
    assert cli_main(["simulate", str(path)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("2/2 scenarios passed")


def test_a_bad_agent_file_is_a_clear_error(tmp_path: pathlib.Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = _scenario_file(tmp_path, WEATHER_TURNS)
    assert cli_main(["simulate", str(path), "--agent", str(tmp_path / "none.py")]) == 2
    assert "no such Python file" in capsys.readouterr().err
    empty = tmp_path / "empty.py"
    empty.write_text("x = 1\n")
    assert cli_main(["simulate", str(path), "--agent", str(empty)]) == 2
    assert "no AgentServer" in capsys.readouterr().err
    idle = tmp_path / "idle.py"
    idle.write_text("async def entrypoint(ctx):\n    pass\n")
    assert cli_main(["simulate", str(path), "--agent", str(idle)]) == 2
    assert "started no session" in capsys.readouterr().err
    assert cli_main(["simulate", str(path), "--agent", str(AGENT),
                     "--connect", "127.0.0.1:1"]) == 2
