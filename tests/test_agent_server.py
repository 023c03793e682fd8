"""Running an agent the LiveKit way: ``AgentServer`` + ``@server.rtc_session()`` +
``cli.run_app(server)``, sessions started with ``session.start(agent, room=ctx.room)``
without ``async with`` and owned by the job, the console (text mode from a pipe, typed text
interrupting the agent), prewarm, shutdown callbacks, and the wiring of ``start``/``dev``/
``connect`` to LiveKit's worker (no server needed)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from livekit import rtc

from agents_trio import (Agent, AgentServer, AgentSession, CloseReason, FunctionToolCall,
                         JobContext, JobProcess, function_tool,
                         cli, get_job_context)
from agents_trio.console import ConsoleJobContext, TextConsole, run_console
from agents_trio.job import run_job
from agents_trio.testing import FakeLLM, FakeRemoteParticipant, open_fake_room
from agents_trio.testing.actions import FakeLLMResponse

ROOT = Path(__file__).resolve().parents[1]
AGENT_FILE = ROOT / "tests" / "data" / "livekit_style_agent.py"


class Quiet(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Be brief.")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "AGENT_MODELS": "fake"}


# -- the example file, as a user runs it ------------------------------------------------------

def test_console_text_answers_piped_lines_in_order_and_exits_0() -> None:
    lines = "Hi there\nWhat's the weather in Paris?\n\nThanks, bye\n"
    done = subprocess.run([sys.executable, str(AGENT_FILE), "console", "--text"],
                          input=lines, capture_output=True, text=True, env=_env(), timeout=60,
                          cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "agent: Hello! Ask me about the weather.",
        "user: Hi there",
        "agent: Hi! Which city?",
        "user: What's the weather in Paris?",
        "agent: Let me check.",
        '  tool: get_weather({"location": "Paris"}) -> It is sunny and 22 degrees in Paris '
        "(asked from room console).",
        "agent: Sunny and 22 degrees in Paris.",
        "user: Thanks, bye",
        "agent: Goodbye!",
    ]
    # the session closed at the end of input; the callback ran in the prewarmed process
    assert "shutdown callback: reason=user_initiated prewarmed_here=True" in done.stderr


def test_console_without_audio_devices_says_so_and_points_to_text_mode() -> None:
    from agents_trio.io.local_audio import device_available

    if device_available("input") and device_available("output"):
        pytest.skip("this machine has audio devices")
    done = subprocess.run([sys.executable, str(AGENT_FILE), "console"], capture_output=True,
                          text=True, env=_env(), timeout=60, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert done.returncode == 1
    assert "no local audio" in done.stderr and "console --text" in done.stderr


def test_an_unknown_command_prints_the_commands() -> None:
    server = AgentServer()
    assert cli.main(server, []) == 2
    with pytest.raises(SystemExit):
        cli.main(server, ["serve"])


# -- the console on virtual time: the turn rule ---------------------------------------------

STORY = "Once upon a time there was a lighthouse keeper who counted ships every night."


def _story_llm() -> FakeLLM:
    return FakeLLM([
        # the story streams for 10 s; the second line arrives at 1 s
        FakeLLMResponse(input="Tell me a story", content=STORY, ttft=0.2, duration=10.0),
        FakeLLMResponse(input="Stop, what time is it?", content="It is noon.", ttft=0.2,
                        duration=0.5),
    ])


def _timed_lines(script: list[tuple[float, str]]) -> Any:  # noqa: ANN401 - a LineSource
    """Lines available at given virtual times (then the end of input)."""
    pending = list(script)

    async def next_line() -> str | None:
        if not pending:
            return None
        at, line = pending.pop(0)
        await trio.sleep_until(at)
        return line

    return next_line


async def _converse(console: TextConsole) -> list[float]:
    ends: list[float] = []

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession(llm=_story_llm())
        await session.start(Quiet(), room=ctx.room)

    await run_console(entrypoint, console, on_ready=lambda ctx: ctx.add_shutdown_callback(
        lambda: ends.append(trio.current_time())))
    return ends


async def test_a_line_typed_while_the_agent_replies_interrupts_it(
        autojump_clock: trio.testing.MockClock) -> None:
    out = io.StringIO()
    console = TextConsole(lines=_timed_lines([(0.0, "Tell me a story"),
                                              (1.0, "Stop, what time is it?")]),
                          out=out, interrupt=True)
    with trio.fail_after(30):
        ends = await _converse(console)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    # (the fake LLM sends its text at once, then takes 10 s to finish the stream)
    assert lines == [f"agent: {STORY} [interrupted]", "agent: It is noon."]
    assert ends and ends[0] < 5.0  # the story did not run its 10 s


async def test_piped_lines_wait_for_the_reply_in_progress(
        autojump_clock: trio.testing.MockClock) -> None:
    out = io.StringIO()
    console = TextConsole(lines=_timed_lines([(0.0, "Tell me a story"),
                                              (1.0, "Stop, what time is it?")]),
                          out=out, interrupt=False)
    with trio.fail_after(30):
        await _converse(console)
    assert out.getvalue().splitlines() == [
        "user: Tell me a story", f"agent: {STORY}",
        "user: Stop, what time is it?", "agent: It is noon."]


async def test_end_of_input_waits_for_the_reply_then_closes_the_session(
        autojump_clock: trio.testing.MockClock) -> None:
    out = io.StringIO()
    console = TextConsole(lines=_timed_lines([(0.0, "Tell me a story")]), out=out,
                          interrupt=True)
    with trio.fail_after(30):
        ends = await _converse(console)
    assert out.getvalue().splitlines() == [f"agent: {STORY}"]
    assert ends and ends[0] >= 10.0


# -- sessions owned by the job ------------------------------------------------------------------

async def test_start_without_a_job_or_async_with_says_what_to_do() -> None:
    session = AgentSession()
    with pytest.raises(RuntimeError, match="needs a job to own the session") as info:
        await session.start(Quiet())
    assert "async with AgentSession" in str(info.value)
    with pytest.raises(RuntimeError, match="links the room of a job"):
        await session.start(Quiet(), room=object())  # type: ignore[arg-type]
    async with session:
        with pytest.raises(RuntimeError, match="links the room of a job"):
            await session.start(Quiet(), room=object())  # type: ignore[arg-type]
        await session.start(Quiet())  # as always inside the block
        assert session.state.value == "running"


async def test_the_job_ends_when_its_session_closes_and_callbacks_get_the_reason() -> None:
    events: list[str] = []
    returned = trio.Event()
    user = FakeRemoteParticipant("user")

    async def entrypoint(ctx: JobContext) -> None:
        ctx.bridge.call_soon(ctx.room.join, user)
        session = AgentSession()
        session.on("close", lambda ev: events.append(f"session closed: {ev.reason}"))
        await session.start(Quiet(), room=ctx.room)
        await ctx.connect()
        await ctx.wait_for_participant()
        ctx.add_shutdown_callback(
            lambda reason: events.append(f"callback: {reason}, room connected: "
                                         f"{ctx.room.isconnected()}"))

        async def callback_without_reason() -> None:
            await trio.sleep(0)
            events.append("async callback")

        ctx.add_shutdown_callback(callback_without_reason)
        events.append("entrypoint returned")
        returned.set()

    async def leave_after_the_entrypoint_returned(ctx: JobContext) -> None:
        await returned.wait()
        await trio.sleep(0.05)
        events.append("user leaves")
        ctx.bridge.call_soon(ctx.room.leave, user, rtc.DisconnectReason.CLIENT_INITIATED)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room,
                          on_ready=lambda ctx: nursery.start_soon(
                              leave_after_the_entrypoint_returned, ctx))
    assert events[:3] == ["entrypoint returned", "user leaves",
                          "session closed: participant_disconnected"]
    assert sorted(events[3:]) == sorted([
        "async callback", "callback: participant_disconnected, room connected: False"])


async def test_a_session_in_async_with_links_the_room_given_to_start() -> None:
    seen: dict[str, Any] = {}

    async def entrypoint(ctx: JobContext) -> None:
        async with AgentSession() as session:
            await session.start(Quiet(), room=ctx.room)
            seen["audio"] = type(session.output.audio).__name__
            seen["running"] = session.state.value
        seen["closed"] = session.state.value

    with trio.fail_after(5):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert seen == {"audio": "RoomAudioOutput", "running": "running", "closed": "closed"}


async def test_shutdown_closes_owned_sessions_and_callbacks_get_job_shutdown() -> None:
    reasons: list[str] = []

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession()
        session.on("close", lambda ev: reasons.append(f"close: {ev.reason}"))
        ctx.add_shutdown_callback(lambda reason: reasons.append(f"callback: {reason}"))
        await session.start(Quiet(), room=ctx.room)
        ctx.shutdown()

    with trio.fail_after(5):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert reasons == ["close: job_shutdown", "callback: job_shutdown"]


async def test_an_entrypoint_failing_after_start_closes_its_session_and_raises() -> None:
    closed: list[str] = []

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession()
        session.on("close", lambda ev: closed.append(str(ev.reason)))
        await session.start(Quiet(), room=ctx.room)
        raise KeyError("boom")

    with trio.fail_after(5), pytest.raises(KeyError, match="boom"):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert closed == ["job_shutdown"]


async def test_shutdown_takes_livekits_free_text_reason() -> None:
    reasons: list[str] = []

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession()
        session.on("close", lambda ev: reasons.append(f"close: {ev.reason}"))
        ctx.add_shutdown_callback(lambda reason: reasons.append(f"callback: {reason}"))
        await session.start(Quiet(), room=ctx.room)
        ctx.shutdown(reason="the caller hung up")

    with trio.fail_after(5):
        await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)
    assert reasons == ["close: job_shutdown", "callback: the caller hung up"]


async def test_connect_is_idempotent_and_refuses_what_it_cannot_honour() -> None:
    async def entrypoint(ctx: JobContext) -> None:
        await ctx.connect()
        await ctx.connect(auto_subscribe="subscribe_all")
        with pytest.raises(ValueError, match="encryption"):
            await ctx.connect(encryption=object())
        with pytest.raises(ValueError, match="auto_subscribe"):
            await ctx.connect(auto_subscribe="audio_only")

    await run_job(entrypoint, url="wss://fake", token="t", open_room_fn=open_fake_room)


async def test_console_mode_has_a_job_context_with_the_prewarmed_process(
        autojump_clock: trio.testing.MockClock) -> None:
    server = AgentServer(setup_fnc=lambda proc: proc.userdata.update(model="loaded"))
    seen: dict[str, Any] = {}

    @server.rtc_session()
    async def entrypoint(ctx: JobContext) -> None:
        seen["ctx"] = get_job_context()
        seen["model"] = ctx.proc.userdata["model"]
        seen["participant"] = (await ctx.wait_for_participant()).identity
        await AgentSession().start(Quiet(), room=ctx.room)

    console = TextConsole(lines=_timed_lines([]), out=io.StringIO(), interrupt=False)
    await run_console(server.entrypoint, console, proc=server.prewarm())
    assert isinstance(seen["ctx"], ConsoleJobContext)
    assert seen["model"] == "loaded" and seen["participant"] == "console-user"


# -- AgentServer and the LiveKit commands -------------------------------------------------------

def _prewarm(proc: JobProcess) -> None:
    proc.userdata["x"] = 1


async def _entry(ctx: JobContext) -> None:
    pass


def test_agent_server_checks_what_it_is_given() -> None:
    with pytest.raises(TypeError, match="setup_fnc"):
        AgentServer(setup_fnc="prewarm")  # type: ignore[arg-type]
    server = AgentServer()
    with pytest.raises(TypeError, match="async function"):
        server.rtc_session(_prewarm)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rooms only"):
        server.rtc_session(_entry, type="publisher")
    with pytest.raises(RuntimeError, match="no entrypoint"):
        server.entrypoint  # noqa: B018
    assert server.rtc_session(agent_name="a")(_entry) is _entry
    with pytest.raises(RuntimeError, match="one rtc_session"):
        server.rtc_session(_entry)


@pytest.mark.parametrize("argv", [["start"], ["dev", "--log-level", "INFO"],
                                  ["connect", "--room", "demo", "--participant-identity", "a1"]])
def test_start_dev_and_connect_run_livekits_worker_with_the_trio_entrypoint(
        argv: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("livekit.agents")
    from livekit.agents import cli as livekit_cli

    from agents_trio.server import ServerEntrypoint
    from agents_trio.worker import PrepareJobThread, TrioJobEntrypoint

    ran: dict[str, Any] = {}

    def fake_run_app(lk_server: Any) -> None:  # noqa: ANN401
        ran["server"], ran["argv"] = lk_server, list(sys.argv)
        raise SystemExit(0)

    monkeypatch.setattr(livekit_cli, "run_app", fake_run_app)
    monkeypatch.setattr(sys, "argv", ["my_agent.py", *argv])
    server = AgentServer(ws_url="wss://example", api_key="k", api_secret="s",
                         num_idle_processes=2, setup_fnc=_prewarm)
    server.rtc_session(_entry, agent_name="weather")
    started: list[object] = []
    server.on("worker_started", started.append)
    with pytest.raises(SystemExit) as info:
        cli.run_app(server)
    assert info.value.code == 0
    lk_server = ran["server"]
    assert ran["argv"] == ["my_agent.py", *argv]
    entry = lk_server._entrypoint_fnc  # noqa: SLF001 - LiveKit's server, no accessor
    assert isinstance(entry, TrioJobEntrypoint)
    assert isinstance(entry.entrypoint, ServerEntrypoint) and entry.entrypoint.entrypoint is _entry
    # the prewarm runs inside the job host's per-process preparation (packed worker mode)
    assert isinstance(lk_server.setup_fnc, PrepareJobThread)
    assert lk_server.setup_fnc.setup is _prewarm
    assert lk_server._agent_name == "weather"  # noqa: SLF001
    assert lk_server._num_idle_processes == 2  # noqa: SLF001
    lk_server.emit("worker_started", "now")
    assert started == ["now"]


def test_an_entrypoint_in_the_script_run_as_main_reaches_livekits_job_processes(
        tmp_path: Path) -> None:
    """``python my_agent.py start``: LiveKit's pool pickles the entrypoint and the prewarm;
    a forkserver child (LiveKit's default on Linux) finds them in the script again."""
    pytest.importorskip("livekit.agents")
    script = tmp_path / "my_agent.py"
    script.write_text(textwrap.dedent("""
        import multiprocessing, sys
        from agents_trio import AgentServer, JobProcess, cli

        server = AgentServer()

        def prewarm(proc):
            proc.userdata["ready"] = True

        server.setup_fnc = prewarm

        @server.rtc_session()
        async def entrypoint(ctx):
            pass

        def in_job_process(entry, setup):
            proc = JobProcess()
            setup(proc)
            ok = entry.entrypoint.entrypoint is entrypoint and proc.userdata["ready"]
            sys.exit(0 if ok else 3)

        if __name__ == "__main__":
            lk = server.build_livekit_server(ws_url="wss://x", api_key="k", api_secret="s")
            child = multiprocessing.get_context("forkserver").Process(
                target=in_job_process, args=(lk._entrypoint_fnc, lk.setup_fnc))
            child.start()
            child.join()
            sys.exit(child.exitcode)
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=_env(), timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_a_livekit_job_sees_the_process_its_prewarm_filled() -> None:
    pytest.importorskip("livekit.agents")
    import asyncio
    from types import SimpleNamespace

    from agents_trio.worker import TrioJobEntrypoint

    lk_proc = SimpleNamespace(userdata={"vad": "loaded"}, pid=1234)
    shutdowns: list[str] = []
    job = SimpleNamespace(
        _info=SimpleNamespace(url="wss://fake", token="t", job=SimpleNamespace(id="AJ_1")),
        proc=lk_proc, shutdown=lambda reason="": shutdowns.append(reason))
    seen: dict[str, Any] = {}

    async def entrypoint(ctx: JobContext) -> None:
        seen["userdata"], seen["pid"] = ctx.proc.userdata, ctx.proc.pid

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(asyncio.wait_for(
            TrioJobEntrypoint(entrypoint, open_room_fn=open_fake_room)(job), 10))
    finally:
        loop.close()
    assert seen["userdata"] is lk_proc.userdata and seen["pid"] == 1234
    assert shutdowns == ["agents_trio entrypoint finished"]


async def test_on_session_end_runs_after_the_sessions_closed_and_before_the_callbacks(
        autojump_clock: trio.testing.MockClock) -> None:
    order: list[str] = []
    server = AgentServer()

    async def session_ended(ctx: JobContext) -> None:
        order.append("on_session_end")

    @server.rtc_session(on_session_end=session_ended)
    async def entrypoint(ctx: JobContext) -> None:
        ctx.add_shutdown_callback(lambda: order.append("shutdown callback"))
        session = AgentSession()
        session.on("close", lambda ev: order.append("session closed"))
        await session.start(Quiet(), room=ctx.room)
        order.append("entrypoint returned")

    console = TextConsole(lines=_timed_lines([]), out=io.StringIO(), interrupt=False)
    await run_console(server.entrypoint, console, proc=server.prewarm())
    assert order == ["entrypoint returned", "session closed", "on_session_end",
                     "shutdown callback"]


async def test_the_servers_session_end_timeout_bounds_on_session_end(
        autojump_clock: trio.testing.MockClock) -> None:
    order: list[str] = []
    server = AgentServer(session_end_timeout=5.0)

    async def session_ended(ctx: JobContext) -> None:
        order.append("on_session_end")
        await trio.sleep_forever()

    @server.rtc_session(on_session_end=session_ended)
    async def entrypoint(ctx: JobContext) -> None:
        ctx.add_shutdown_callback(lambda: order.append("shutdown callback"))

    console = TextConsole(lines=_timed_lines([]), out=io.StringIO(), interrupt=False)
    with trio.fail_after(60):
        began = trio.current_time()
        await run_console(server.entrypoint, console, proc=server.prewarm())
    assert order == ["on_session_end", "shutdown callback"]
    assert trio.current_time() - began == pytest.approx(5.0, abs=1.0)


def test_download_files_runs_each_imported_livekit_plugins_download(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("livekit.agents")
    from livekit.agents import Plugin

    class FakePlugin:
        def __init__(self, package: str, fail: bool = False) -> None:
            self.package, self.fail, self.downloads = package, fail, 0

        def download_files(self) -> None:
            self.downloads += 1
            if self.fail:
                raise OSError("offline")

    monkeypatch.setattr(Plugin, "registered_plugins", [])
    assert cli.main(AgentServer(), ["download-files"]) == 0
    assert "nothing to download" in capsys.readouterr().out
    good, bad = FakePlugin("livekit.plugins.good"), FakePlugin("livekit.plugins.bad", fail=True)
    monkeypatch.setattr(Plugin, "registered_plugins", [good, bad])
    assert cli.main(AgentServer(), ["download-files"]) == 1
    assert good.downloads == 1 and bad.downloads == 1
    assert "livekit.plugins.bad failed: offline" in capsys.readouterr().err


async def test_audio_console_uses_the_local_devices_and_prints_the_conversation(
        autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch) -> None:
    from agents_trio.console import AudioConsole
    from agents_trio.io import local_audio
    from agents_trio.io.audio import silence_frame
    from agents_trio.testing import FakeActions, FakeAudioOutput, create_session

    opened: list[str] = []

    class Microphone(local_audio.AudioInput):
        def __init__(self, **_: object) -> None:
            self.sample_rate = 16000

        async def __aenter__(self) -> Microphone:
            opened.append("microphone")
            return self

        async def __aexit__(self, *_: object) -> None:
            opened.append("microphone closed")

        async def __anext__(self) -> Any:  # noqa: ANN401
            await trio.sleep(0.02)
            return silence_frame(0.02, sample_rate=16000)

    class Speaker(FakeAudioOutput):
        def __init__(self, **_: object) -> None:
            super().__init__()

        async def __aenter__(self) -> Speaker:
            opened.append("speaker")
            return self

        async def __aexit__(self, *_: object) -> None:
            opened.append("speaker closed")

    monkeypatch.setattr(local_audio, "MicrophoneInput", Microphone)
    monkeypatch.setattr(local_audio, "SpeakerOutput", Speaker)
    script = FakeActions()
    script.add_user_speech(0.5, 1.0, "hello")
    script.add_llm("Hi there!")
    script.add_tts(0.5)
    out = io.StringIO()
    console = AudioConsole(out=out)
    jobs: list[JobContext] = []

    async def entrypoint(ctx: JobContext) -> None:
        session = create_session(script)
        session.on("conversation_item_added", lambda ev: ctx.shutdown(CloseReason.ERROR)
                   if getattr(ev.item, "role", None) == "assistant" else None)
        await session.start(Quiet(), room=ctx.room)

    with trio.fail_after(30):
        await run_console(entrypoint, console, on_ready=jobs.append)
    assert out.getvalue().splitlines() == ["user: hello", "agent: Hi there!"]
    assert opened == ["microphone", "speaker", "speaker closed", "microphone closed"]
    assert jobs[0].end_reason == "error"


class _Billing(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Billing.")

    async def on_exit(self) -> None:
        pass


class _Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Front desk.")

    async def on_exit(self) -> None:
        # the old agent takes a while to leave: the handoff is in flight meanwhile
        await trio.sleep(1.0)

    @function_tool
    async def transfer(self) -> tuple[Agent, str]:
        """Transfer to billing."""
        return _Billing(), "transferring"


async def test_piped_lines_wait_for_a_handoff_in_flight(
        autojump_clock: trio.testing.MockClock) -> None:
    # the next line arrives while the old agent drains: it goes to the new agent once that
    # agent waits for the user, not to the closing one (which used to raise and end the job)
    out = io.StringIO()
    llm = FakeLLM([
        FakeLLMResponse(input="to billing", content="", ttft=0.1, duration=0.1, tool_calls=[
            FunctionToolCall(name="transfer", arguments="{}", call_id="t1")]),
        FakeLLMResponse(input="transferring", content="One moment.", ttft=0.1, duration=0.1),
        FakeLLMResponse(input="my invoice?", content="42 euros.", ttft=0.1, duration=0.1),
    ])

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession(llm=llm)
        await session.start(_Desk(), room=ctx.room)

    console = TextConsole(lines=_timed_lines([(0.0, "to billing"), (0.0, "my invoice?")]),
                          out=out, interrupt=False)
    with trio.fail_after(30):
        await run_console(entrypoint, console)
    assert out.getvalue().splitlines() == [
        "user: to billing", "  tool: transfer({}) -> transferring", "agent: One moment.",
        "  handoff: __desk -> __billing", "user: my invoice?", "agent: 42 euros."]
