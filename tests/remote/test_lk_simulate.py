"""Simulations over LiveKit's protocol: the example scenarios through our LiveKit-protocol
host, finalize_simulation answered as LiveKit answers it (with and without the agent's own
verdict), ``python -m agents_trio simulate --connect`` against a served demo, and our
simulator driving LiveKit's own SessionHost."""

from __future__ import annotations

import json
import pathlib

import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents")

from agents_trio.__main__ import main as cli_main  # noqa: E402
from agents_trio.demo import WeatherAgent  # noqa: E402
from agents_trio.remote import lk  # noqa: E402
from agents_trio.remote.demo import demo_session, serve_demo  # noqa: E402
from agents_trio.remote.simulate import (format_results, load_scenarios,  # noqa: E402
                                         run_scenarios)
from lk_agents import lk_weather_session  # noqa: E402
from lk_helpers import Gate, run_asyncio  # noqa: E402

ROOT = pathlib.Path(__file__).parents[2]
WEATHER = ROOT / "examples" / "scenarios" / "weather_demo.json"


async def _through_lk_host(scenarios, **host_options):
    session = demo_session()
    async with session, lk.open_session_host(session, listeners=[], **host_options) as host, \
            trio.open_nursery() as nursery:
        await session.start(WeatherAgent())
        client, server = trio.testing.memory_stream_pair()
        nursery.start_soon(host.serve_stream, server)
        async with lk.open_remote_session(client) as remote:
            results = await run_scenarios(scenarios, remote=remote)
        nursery.cancel_scope.cancel()
    return results


async def test_the_example_scenarios_pass_over_livekit_protocol(autojump_clock) -> None:
    scenarios = load_scenarios(WEATHER)
    results = await _through_lk_host(scenarios)
    table = format_results(results)
    assert all(r.passed for r in results), table
    assert [r.turns_passed for r in results] == [len(s.turns) for s in scenarios]
    assert all(r.agent_verdict is None for r in results)  # no hook: no verdict, as LiveKit


async def test_failures_are_scored_and_finalize_carries_the_verdicts(autojump_clock) -> None:
    told: list[tuple[bool, str]] = []

    async def on_simulation_end(success: bool, reason: str) -> tuple[bool, str] | None:
        told.append((success, reason))
        return (not success, "the agent disagrees") if "get_forecast" in reason else None

    scenarios = load_scenarios(json.dumps({"scenarios": [
        {"name": "ok", "turns": [{"user": "What's the weather in Paris?", "match": "in_order",
                                  "expect": [{"type": "function_call", "name": "get_weather"}]}]},
        {"name": "wrong tool", "turns": [
            {"user": "What's the weather in Paris?", "match": "in_order",
             "expect": [{"type": "function_call", "name": "get_forecast"}]}]},
        {"name": "error expected", "turns": [{"user": "break", "expect_error": "unavailable"}]},
    ]}))
    results = await _through_lk_host(scenarios, on_simulation_end=on_simulation_end)
    assert [r.passed for r in results] == [True, False, True]
    assert told[0] == (True, "") and told[1][0] is False and "get_forecast" in told[1][1]
    assert results[1].agent_verdict == (True, "the agent disagrees")
    assert results[0].agent_verdict is None
    assert "agent's verdict: success: the agent disagrees" in format_results(results)


async def test_a_failing_end_of_simulation_hook_is_reported(autojump_clock) -> None:
    async def broken(success: bool, reason: str) -> tuple[bool, str] | None:
        raise RuntimeError("hook exploded")

    results = await _through_lk_host(load_scenarios(json.dumps([
        {"name": "ok", "turns": [{"user": "hello"}]}])), on_simulation_end=broken)
    assert results[0].passed and "hook exploded" in (results[0].agent_error or "")


async def test_simulate_command_over_livekit_protocol(capsys) -> None:
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            host = await nursery.start(lambda task_status: serve_demo(
                port=0, task_status=task_status))
            status = await trio.to_thread.run_sync(
                cli_main, ["simulate", str(WEATHER), "--connect", host.address])
            nursery.cancel_scope.cancel()
    out = capsys.readouterr().out
    assert status == 0, out
    assert out.splitlines()[-1].endswith("scenarios passed")


async def test_our_simulator_drives_livekit_session_host() -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    done = Gate()

    async def serve_livekit() -> None:
        from livekit.agents.voice.remote_session import SessionHost, TcpSessionTransport
        session, agent = lk_weather_session()
        await session.start(agent)
        host = SessionHost(TcpSessionTransport("127.0.0.1", port))
        host.register_session(session)
        await host.start()
        try:
            await done.wait()
        finally:
            await host.aclose()
            await session.aclose()

    scenarios = load_scenarios(json.dumps([
        {"name": "livekit weather", "turns": [{"user": "weather in Paris?", "expect": [
            {"type": "function_call", "name": "get_weather",
             "arguments": {"location": "Paris"}},
            {"type": "function_call_output", "contains": "sunny"},
            {"type": "message", "role": "assistant", "text": "It is sunny in Paris."}]}]},
        {"name": "empty input", "turns": [{"user": "", "expect_error": "empty run_input"}]},
    ]))
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_asyncio, serve_livekit)
            try:
                async with lk.accept_remote_session(listener) as remote:
                    await remote.wait_for_ready(timeout=10)
                    results = await run_scenarios(scenarios, remote=remote)
            finally:
                done.set()
    await trio.aclose_forcefully(listener)
    assert all(r.passed for r in results), format_results(results)
    # outside a LiveKit simulation job, finalize_simulation answers without a verdict
    assert all(r.agent_verdict is None and r.agent_error is None for r in results)
