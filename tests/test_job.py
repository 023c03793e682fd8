"""Running an entrypoint in a room: the job runner, the JobContext, the ``connect`` command
and the example agent — against a fake room (no server), with the real SDK audio path, so on
the wall clock (each test well under a second of audio)."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio
from livekit import rtc

from agents_trio import Agent, AgentSession
from agents_trio.__main__ import main
from agents_trio.io.room import RoomConnectError, RoomDisconnectedError
from agents_trio.job import JobContext, load_entrypoint, run_job
from agents_trio.testing import FakeLLM, FakeRemoteParticipant, FakeTTS, open_fake_room
from agents_trio.testing.actions import FakeLLMResponse, FakeTTSResponse

ROOT = Path(__file__).resolve().parents[1]


class Quiet(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Be brief.")


def quick_session() -> AgentSession:
    return AgentSession(
        llm=FakeLLM([FakeLLMResponse(input="hello", content="Hi!", ttft=0.01, duration=0.02)]),
        tts=FakeTTS([FakeTTSResponse(input="Hi!", audio_duration=0.1, ttfb=0.01,
                                     duration=0.02)]))


async def test_an_entrypoint_runs_a_session_until_the_participant_leaves() -> None:
    seen: dict[str, Any] = {}

    async def entrypoint(ctx: JobContext) -> str:
        room = ctx.room
        user = FakeRemoteParticipant("user")
        ctx.bridge.call_soon(room.join, user)
        seen["participant"] = (await ctx.wait_for_participant()).identity

        async def leave_later() -> None:
            await trio.sleep(0.1)
            ctx.bridge.call_soon(room.leave, user, rtc.DisconnectReason.CLIENT_INITIATED)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(leave_later)
            reason = await ctx.run_session(quick_session(), Quiet())
        seen["bridge"] = ctx.bridge
        return reason

    with trio.fail_after(5):
        reason = await run_job(entrypoint, url="wss://fake", token="t",
                               open_room_fn=open_fake_room)
    assert reason == "participant_disconnected"
    assert seen["participant"] == "user"
    assert seen["bridge"].closed
    assert not open_fake_room.rooms[-1].connected  # disconnected when the job ended


async def test_shutdown_closes_the_running_session_with_its_reason() -> None:
    async def entrypoint(ctx: JobContext) -> str | None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_shutdown_soon, ctx)
            return await ctx.run_session(quick_session(), Quiet())

    with trio.fail_after(5):
        assert await run_job(entrypoint, url="wss://fake", token="t",
                             open_room_fn=open_fake_room) == "job_shutdown"


async def _shutdown_soon(ctx: JobContext) -> None:
    await trio.sleep(0.05)
    ctx.shutdown()


async def test_an_entrypoint_ignoring_shutdown_is_cancelled_after_the_grace(
        autojump_clock: trio.testing.MockClock) -> None:
    cancelled = []

    async def stubborn(ctx: JobContext) -> None:
        ctx.shutdown_grace = 1.0
        ctx.shutdown()
        try:
            await trio.sleep_forever()
        finally:
            cancelled.append(trio.current_time())

    await run_job(stubborn, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert len(cancelled) == 1


async def test_bad_connection_input_fails_clearly() -> None:
    with pytest.raises(RoomConnectError, match="room name"):
        await run_job(_never, url="wss://x", api_key="k", api_secret="s")
    with pytest.raises(RoomConnectError, match="invalid LiveKit URL"):
        await run_job(_never, url="localhost:7880", token="t")


async def _never(ctx: JobContext) -> None:  # pragma: no cover - must not run
    raise AssertionError("the entrypoint ran")


def test_load_entrypoint_from_a_module_or_a_file(tmp_path: Path) -> None:
    app = tmp_path / "my_app.py"
    app.write_text(textwrap.dedent("""
        async def entrypoint(ctx):
            return "ran"
        async def other(ctx):
            return "other"
    """))
    assert load_entrypoint(f"{app}").__name__ == "entrypoint"
    assert load_entrypoint(f"{app}:other").__name__ == "other"
    assert load_entrypoint("agents_trio.job:run_job") is run_job
    with pytest.raises(ValueError, match="no 'missing'"):
        load_entrypoint(f"{app}:missing")
    with pytest.raises(ValueError, match="cannot import"):
        load_entrypoint("no_such_module_xyz:entrypoint")


def _cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str,
         env: dict[str, str] | None = None) -> tuple[int, str]:
    for key in [k for k in os.environ if k.startswith("LIVEKIT_")]:
        monkeypatch.delenv(key)
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(ROOT)
    code = main(list(args))
    return code, capsys.readouterr().err


def test_connect_command_explains_missing_settings(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    app = "examples/livekit_agent.py"
    code, err = _cli(capsys, monkeypatch, "connect", app)
    assert code == 1 and "LIVEKIT_URL" in err
    code, err = _cli(capsys, monkeypatch, "connect", app, env={"LIVEKIT_URL": "wss://x"})
    assert code == 1 and "LIVEKIT_API_KEY" in err
    code, err = _cli(capsys, monkeypatch, "connect", app, "--url", "wss://x", "--api-key", "k",
                     "--api-secret", "s")
    assert code == 1 and "--room" in err
    code, err = _cli(capsys, monkeypatch, "connect", "examples/nope.py", "--url", "wss://x",
                     "--token", "t")
    assert code == 1 and "cannot import" in err


def test_connect_command_reports_an_unreachable_server(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code, err = _cli(capsys, monkeypatch, "connect", "examples/livekit_agent.py", "--url",
                     f"ws://127.0.0.1:{port}", "--token", "t", "--log-level", "ERROR")
    assert code == 1
    assert "could not connect" in err and "unreachable" in err


def test_connect_command_explains_a_room_that_dropped(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    import functools

    import agents_trio.job

    app = tmp_path / "dropping_app.py"
    app.write_text(textwrap.dedent("""
        async def entrypoint(ctx):
            ctx.bridge.call_soon(ctx.room.drop)
            await ctx.wait_for_participant()
    """))
    monkeypatch.setattr(agents_trio.job, "run_job", functools.partial(
        agents_trio.job.run_job, open_room_fn=open_fake_room))
    code, err = _cli(capsys, monkeypatch, "connect", str(app), "--url", "wss://x", "--token",
                     "t", "--log-level", "ERROR")
    assert code == 1
    assert "disconnected before a participant joined" in err


# -- the example agent ------------------------------------------------------------------------
def _example() -> Any:
    return load_entrypoint(str(ROOT / "examples" / "livekit_agent.py"))


def test_the_example_uses_fakes_without_provider_keys() -> None:
    pytest.importorskip("livekit.agents", reason="the example adapts LiveKit plugins")
    module = sys.modules[_example().__module__]
    models = module.build_models({})
    assert type(models["llm"]).__name__ == "EchoLLM"
    assert type(models["tts"]).__name__ == "BeepTTS"
    assert models["stt"] is None  # no key: the agent takes chat text only


async def test_the_example_greets_and_answers_chat_in_a_room() -> None:
    pytest.importorskip("livekit.agents", reason="the example adapts LiveKit plugins")
    entrypoint = _example()
    module = sys.modules[entrypoint.__module__]
    module.build_models = lambda: {"llm": module.EchoLLM(), "tts": module.BeepTTS()}

    async def in_room(ctx: JobContext) -> None:
        room = ctx.room
        ctx.bridge.call_soon(room.join, FakeRemoteParticipant("user"))

        async def user() -> None:
            await _until(lambda: room.transcripts("agent") or room.local_participant
                         .attributes.get("lk.agent.state") == "speaking")
            ctx.bridge.call_soon(room.send_chat, "user", "hi")  # interrupts the greeting
            await _until(lambda: any(w.text == "You said: hi." and w.final
                                     for w in room.transcripts("agent")))
            ctx.shutdown()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(user)
            await entrypoint(ctx)

    with trio.fail_after(10):
        await run_job(in_room, url="wss://fake", token="t", open_room_fn=open_fake_room)
    room = open_fake_room.rooms[-1]
    texts = [w.text for w in room.transcripts("agent")]
    assert texts[-1] == "You said: hi."
    assert len(room.local_participant.published) == 0  # unpublished on the way out


async def _until(predicate: Any, timeout: float = 5.0) -> None:
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.01)


# -- a room that drops early (issue 15, item 16) ---------------------------------------------
async def test_waiting_for_a_participant_fails_clearly_when_the_room_drops(
        autojump_clock: trio.testing.MockClock) -> None:
    async def entrypoint(ctx: JobContext) -> None:
        async def drop_later() -> None:
            await trio.sleep(1)
            ctx.bridge.call_soon(ctx.room.drop)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(drop_later)
            await ctx.wait_for_participant()

    with trio.fail_after(5), pytest.raises(RoomDisconnectedError, match="disconnected"):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)


async def test_a_room_dropped_before_run_session_ends_the_job_with_job_shutdown(
        autojump_clock: trio.testing.MockClock) -> None:
    async def entrypoint(ctx: JobContext) -> str | None:
        ctx.bridge.call_soon(ctx.room.drop)
        await trio.sleep(1)
        return await ctx.run_session(quick_session(), Quiet())

    with trio.fail_after(5):
        assert await run_job(entrypoint, url="wss://fake", token="t",
                             open_room_fn=open_fake_room) == "job_shutdown"


async def test_a_room_dropping_just_before_run_session_ends_the_job_with_job_shutdown(
        autojump_clock: trio.testing.MockClock) -> None:
    async def entrypoint(ctx: JobContext) -> str | None:
        ctx.room.drop()   # seen by run_session before the job's watcher had a turn
        return await ctx.run_session(quick_session(), Quiet())

    with trio.fail_after(5):
        assert await run_job(entrypoint, url="wss://fake", token="t",
                             open_room_fn=open_fake_room) == "job_shutdown"


async def test_a_room_drop_ends_a_job_whose_entrypoint_runs_no_session(
        autojump_clock: trio.testing.MockClock) -> None:
    ended = []

    async def entrypoint(ctx: JobContext) -> None:
        ctx.shutdown_grace = 3.0
        ctx.bridge.call_soon(ctx.room.drop)
        try:
            await trio.sleep_forever()
        finally:
            ended.append((trio.current_time(), ctx.shutdown_reason))

    started = trio.current_time()
    with trio.fail_after(10):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    [(at, reason)] = ended
    assert reason == "job_shutdown" and at - started == pytest.approx(3.0)


async def test_cancelling_the_job_closes_its_session_with_job_shutdown(
        autojump_clock: trio.testing.MockClock) -> None:
    """What LiveKit cancelling a job becomes (issue 15, item 21)."""
    reasons: list[str] = []

    async def entrypoint(ctx: JobContext) -> str | None:
        session = quick_session()
        session.on("close", lambda ev: reasons.append(ev.reason))
        return await ctx.run_session(session, Quiet())

    with trio.move_on_after(2):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert reasons == ["job_shutdown"]


async def test_shutdown_while_the_session_starts_closes_it_with_job_shutdown() -> None:
    """The job shuts down while ``session.start()`` waits for a slow toolset set-up: the
    session closes with ``job_shutdown`` at once (the shutdown used to be dropped: the session
    ran on until the grace cancelled the entrypoint, and closed ``user_initiated``)."""
    from agents_trio.llm import Toolset

    setup_began = trio.Event()

    class SlowSetup(Toolset):
        async def setup(self) -> Toolset:
            setup_began.set()
            await trio.sleep_forever()
            return self

    class Tooled(Agent):
        def __init__(self) -> None:
            super().__init__(instructions="Be brief.", tools=[SlowSetup(id="slow")])

    async def shutdown_in_setup(ctx: JobContext) -> None:
        await setup_began.wait()
        ctx.shutdown()

    async def entrypoint(ctx: JobContext) -> tuple[str | None, float]:
        ctx.shutdown_grace = 3.0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(shutdown_in_setup, ctx)
            began = trio.current_time()
            reason = await ctx.run_session(quick_session(), Tooled())
            return reason, trio.current_time() - began

    with trio.fail_after(5):
        result = await run_job(entrypoint, url="wss://fake", token="t",
                               open_room_fn=open_fake_room)
    assert result is not None, "the entrypoint was cancelled after the grace"
    reason, seconds = result
    assert reason == "job_shutdown"
    assert seconds < 1.0
