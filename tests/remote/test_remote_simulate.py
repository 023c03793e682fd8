"""Simulation: scenario files played against example agents, in-process and through a host."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import sys

import pytest
import trio
import trio.testing

from agents_trio import AgentSession, open_remote_session, open_session_host
from agents_trio.__main__ import main as cli_main
from agents_trio.demo import WeatherAgent
from agents_trio.remote.demo import demo_session
from agents_trio.remote.simulate import (ScenarioError, format_results, load_scenarios,
                                         run_scenarios)
from agents_trio.testing import FakeLLM

ROOT = pathlib.Path(__file__).parents[2]
WEATHER = ROOT / "examples" / "scenarios" / "weather_demo.json"
CLINIC = ROOT / "examples" / "scenarios" / "clinic_receptionist.json"


def _clinic_module():
    if "clinic_receptionist" in sys.modules:
        return sys.modules["clinic_receptionist"]
    spec = importlib.util.spec_from_file_location(
        "clinic_receptionist", ROOT / "examples" / "clinic_receptionist.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["clinic_receptionist"] = module
    spec.loader.exec_module(module)
    return module


def _demo_factory():
    return demo_session(), WeatherAgent()


def _clinic_factory():
    clinic = _clinic_module()
    return AgentSession(llm=FakeLLM(clinic.script().llm_responses)), clinic.Receptionist()


async def _remotely(factory, scenarios):
    session, agent = factory()
    async with session, open_session_host(session, listeners=[]) as host, \
            trio.open_nursery() as nursery:
        await session.start(agent)
        client, server = trio.testing.memory_stream_pair()
        nursery.start_soon(host.serve_stream, server)
        async with open_remote_session(client) as remote:
            return await run_scenarios(scenarios, remote=remote)


@pytest.mark.parametrize("where", ["in_process", "remote"])
@pytest.mark.parametrize(("path", "factory"), [(WEATHER, _demo_factory),
                                               (CLINIC, _clinic_factory)],
                         ids=["weather_demo", "clinic_receptionist"])
async def test_example_scenarios_pass(autojump_clock, where, path, factory) -> None:
    scenarios = load_scenarios(path)
    if where == "remote":
        results = await _remotely(factory, scenarios)
    else:
        results = await run_scenarios(scenarios, factory=factory)
    table = format_results(results)
    assert all(r.passed for r in results), table
    assert [r.turns_passed for r in results] == [len(s.turns) for s in scenarios]
    assert table.splitlines()[-1] == f"{len(results)}/{len(results)} scenarios passed"
    assert all(" PASS " in line for line in table.splitlines()[1:-1])


FAILING = json.dumps({"scenarios": [
    {"name": "wrong tool", "turns": [
        {"user": "What's the weather in Paris?", "expect": [
            {"type": "message"}, {"type": "function_call", "name": "get_forecast"}]},
        {"user": "never played"}]},
    {"name": "extra items", "turns": [
        {"user": "What's the weather in Paris?", "expect": [{"type": "message"}]}]},
    {"name": "wrong arguments", "turns": [
        {"user": "What's the weather in Paris?", "match": "in_order", "expect": [
            {"type": "function_call", "arguments": {"location": "Rome"}}]}]},
    {"name": "no error", "turns": [{"user": "hello", "expect_error": "unavailable"}]},
    {"name": "unexpected error", "turns": [{"user": "break"}]},
    {"name": "silence expected", "turns": [{"user": "hello", "expect": []}]},
    {"name": "reply expected", "turns": [
        {"user": "shh", "match": "in_order", "expect": [{"type": "message"}]}]},
    {"name": "wrong agent", "turns": [{"user": "shh"}], "expect_agent": "billing"},
]})


async def test_failures_say_what_went_wrong(autojump_clock) -> None:
    results = await run_scenarios(load_scenarios(FAILING), factory=_demo_factory)
    failures = {r.name: (r.turns_passed, r.failure) for r in results}
    assert failures["wrong tool"] == (0, "turn 1: item 2: expected function_call "
                                         "name='get_forecast', but its name is get_weather")
    assert failures["extra items"][1].startswith("turn 1: 3 unexpected item(s): function_call")
    assert failures["wrong arguments"][1] == (
        "turn 1: expected function_call arguments={'location': 'Rome'} in order, but in the "
        'next function_call its arguments {"location": "Paris"} lack {"location": "Rome"}')
    assert failures["no error"][1] == ("turn 1: expected an error containing 'unavailable', "
                                       "got 1 item(s)")
    assert failures["unexpected error"][1].startswith("turn 1: failed: the demo model is")
    assert failures["silence expected"][1].startswith("turn 1: 1 unexpected item(s): message")
    assert failures["reply expected"][1] == ("turn 1: expected message in order; "
                                             "got no items")
    assert failures["wrong agent"] == (1, "ended with agent weather_agent, expected billing")
    table = format_results(results)
    assert table.count(" FAIL ") == len(results) and table.endswith("0/8 scenarios passed")


@pytest.mark.parametrize(("text", "message"), [
    ('{"scenarios": [{"name": "x", "turns": [{"user": "hi", "expcet": []}]}]}',
     "Object contains unknown field `expcet` - at `$.scenarios[0].turns[0]`"),
    (('{"scenarios": [{"name": "x", "turns": [{"user": "hi", "expect": '
      '[{"type": "song"}]}]}]}'), "at `$.scenarios[0].turns[0].expect[0].type`"),
    ('[{"turns": []}]', "missing required field `name`"),
    ('{"scenarios": [', "scenario text: "),
])
def test_bad_scenario_files_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=None) as info:
        load_scenarios(text)
    assert message in str(info.value)


def test_a_missing_scenario_file_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ScenarioError, match="cannot read .*nope.json"):
        load_scenarios(tmp_path / "nope.json")


def test_simulate_command_prints_the_table_and_its_status(tmp_path, capsys) -> None:
    assert cli_main(["simulate", str(WEATHER)]) == 0
    out = capsys.readouterr().out
    assert "weather in Lisbon" in out and out.rstrip().endswith("3/3 scenarios passed")
    failing = tmp_path / "failing.json"
    failing.write_text(json.dumps({"scenarios": [{"name": "rude", "turns": [
        {"user": "shh", "expect": [{"type": "message"}]}]}]}))
    assert cli_main(["simulate", str(failing)]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert cli_main(["simulate", str(tmp_path / "missing.json")]) == 2
