"""LiveKit's legacy job/worker names: ``WorkerOptions`` run by ``cli.run_app``,
``AutoSubscribe`` for ``ctx.connect``, and ``JobRequest`` (what ``request_fnc`` gets)."""

from __future__ import annotations

import sys
from typing import Any

import pytest

import agents_trio
from agents_trio import AutoSubscribe, JobContext, JobProcess, WorkerOptions, cli, run_job
from agents_trio.testing import open_fake_room

lk_agents = pytest.importorskip("livekit.agents")


def _prewarm(proc: JobProcess) -> None:
    proc.userdata["warm"] = True


async def _entry(ctx: JobContext) -> None:
    pass


async def _accept(req: agents_trio.JobRequest) -> None:
    await req.accept()


def _load() -> float:
    return 0.25


def test_run_app_takes_worker_options_and_builds_the_server_livekit_would(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ran: dict[str, Any] = {}

    def fake_run_app(lk_server: Any) -> None:  # noqa: ANN401
        ran["server"] = lk_server
        raise SystemExit(0)

    monkeypatch.setattr(lk_agents.cli, "run_app", fake_run_app)
    monkeypatch.setattr(sys, "argv", ["agent.py", "start"])
    kwargs: dict[str, Any] = dict(request_fnc=_accept, prewarm_fnc=_prewarm, load_fnc=_load,
                                  agent_name="weather", num_idle_processes=3,
                                  ws_url="wss://example", api_key="k", api_secret="s",
                                  shutdown_process_timeout=7.0)
    with pytest.raises(SystemExit) as info:
        cli.run_app(WorkerOptions(entrypoint_fnc=_entry, **kwargs))
    assert info.value.code == 0
    ours = ran["server"]
    theirs = lk_agents.AgentServer.from_server_options(
        lk_agents.WorkerOptions(entrypoint_fnc=_entry, **kwargs))
    for attribute in ("load_fnc", "_request_fnc", "_agent_name",
                      "_num_idle_processes", "_ws_url", "_shutdown_process_timeout"):
        assert getattr(ours, attribute) == getattr(theirs, attribute), attribute
    # the prewarm runs inside the job host's per-process preparation (packed worker mode)
    from agents_trio.worker import PrepareJobThread
    assert isinstance(ours.setup_fnc, PrepareJobThread)
    assert ours.setup_fnc.setup == theirs.setup_fnc
    assert ours._entrypoint_fnc.entrypoint.entrypoint is _entry  # noqa: SLF001


def test_worker_options_check_what_they_are_given() -> None:
    with pytest.raises(TypeError, match="async function"):
        WorkerOptions(entrypoint_fnc=_prewarm)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="on_request"):
        WorkerOptions(entrypoint_fnc=_entry, request_fnc="accept")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rooms only"):
        WorkerOptions(entrypoint_fnc=_entry, worker_type=lk_agents.WorkerType.PUBLISHER)
    options = WorkerOptions(entrypoint_fnc=_entry, prewarm_fnc=_prewarm,
                            worker_type=lk_agents.WorkerType.ROOM)
    assert options.server().prewarm().userdata == {"warm": True}
    with pytest.raises(TypeError, match="AgentServer or WorkerOptions"):
        cli.main(_entry, ["console"])  # type: ignore[arg-type]


def test_job_request_is_what_livekits_worker_hands_the_hook() -> None:
    assert agents_trio.JobRequest is lk_agents.JobRequest


async def test_connect_takes_auto_subscribe_members() -> None:
    async def entrypoint(ctx: JobContext) -> None:
        await ctx.connect(auto_subscribe=AutoSubscribe.SUBSCRIBE_ALL)
        await ctx.connect(auto_subscribe=lk_agents.AutoSubscribe.SUBSCRIBE_ALL)
        with pytest.raises(ValueError, match="auto_subscribe"):
            await ctx.connect(auto_subscribe=AutoSubscribe.AUDIO_ONLY)

    await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert [(m.name, m.value) for m in AutoSubscribe] == [
        (m.name, m.value) for m in lk_agents.AutoSubscribe]
