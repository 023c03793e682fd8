"""Console mode attacked the way real machines and impatient users do: input that is not
text, reads cancelled while the user types, Ctrl-C pressed twice, audio devices failing
under a running session."""

from __future__ import annotations

import functools
import io
import os
import signal
import subprocess
import sys
import time
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio
import trio.testing

from agents_trio import Agent, AgentServer, AgentSession, JobContext, cli
from agents_trio.console import AudioConsole, run_console, stdin_lines
from agents_trio.testing import FakeLLM

ROOT = Path(__file__).resolve().parents[1]

unix_only = pytest.mark.skipif(sys.platform == "win32", reason="reads a pipe's descriptor")


# -- standard input ---------------------------------------------------------------------------

@unix_only
async def test_bytes_that_are_not_text_do_not_end_the_console() -> None:
    # a strict UTF-8 standard input (a desktop's locale) used to raise UnicodeDecodeError
    # out of the read: the console crashed with a traceback
    r, w = os.pipe()
    with open(r, encoding="utf-8", errors="strict") as stream:
        lines = stdin_lines(stream)
        os.write(w, b"hi\n\xff\xfe\x00garbage\r\n" + b"x" * 50_000 + b"\nlast")
        os.close(w)
        with trio.fail_after(5):
            assert await lines() == "hi"
            assert await lines() == "\ufffd\ufffd\x00garbage"
            assert await lines() == "x" * 50_000
            assert await lines() == "last"       # the end of input ends the last line
            assert await lines() is None
            assert await lines() is None


@unix_only
async def test_a_cancelled_read_leaves_no_reader_behind() -> None:
    # the read used to run in a thread abandoned on cancellation: still blocked on the
    # descriptor, it ate the next line typed (and outlived the console)
    r, w = os.pipe()
    with open(r, encoding="utf-8") as stream:
        try:
            lines = stdin_lines(stream)
            with trio.move_on_after(0.05) as waited:
                await lines()
            assert waited.cancelled_caught
            os.write(w, b"typed after the cancel\n")
            with trio.move_on_after(2):
                assert await lines() == "typed after the cancel"
                return
            pytest.fail("the line typed after the cancelled read was lost")
        finally:
            os.close(w)   # (ends a reader still blocked, before the stream closes)


# -- Ctrl-C -----------------------------------------------------------------------------------

SLOW_CLOSE_AGENT = '''
import sys
import trio
from agents_trio import Agent, AgentServer, AgentSession, JobContext, cli
from agents_trio.testing import FakeLLM

server = AgentServer()

@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    async def slow_cleanup() -> None:
        print("CLOSING", file=sys.stderr, flush=True)
        await trio.sleep(30)      # within the job's 10 s shutdown grace
    ctx.add_shutdown_callback(slow_cleanup)
    session = AgentSession(llm=FakeLLM([]))
    await session.start(Agent(instructions="x"), room=ctx.room)
    print("READY", file=sys.stderr, flush=True)

if __name__ == "__main__":
    cli.run_app(server)
'''


def _wait_for(proc: subprocess.Popen[str], marker: str, seen: list[str]) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        seen.append(line)
        if marker in line:
            return
        if not line:
            break
    pytest.fail(f"no {marker!r} from the agent: {''.join(seen)}")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_ctrl_c_during_the_close_exits_at_once(tmp_path: Path) -> None:
    # the second Ctrl-C used to wait for the whole shutdown grace (10 s here), then Trio
    # re-raised it: a KeyboardInterrupt traceback and status -2
    agent = tmp_path / "agent.py"
    agent.write_text(SLOW_CLOSE_AGENT)
    proc = subprocess.Popen([sys.executable, str(agent), "console", "--text"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    seen: list[str] = []
    try:
        _wait_for(proc, "READY", seen)
        proc.send_signal(signal.SIGINT)
        _wait_for(proc, "CLOSING", seen)
        proc.send_signal(signal.SIGINT)
        started = time.monotonic()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pytest.fail("the second Ctrl-C did not end the process")
        assert time.monotonic() - started < 3
        assert proc.stderr is not None
        err = "".join(seen) + proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            assert stream is not None
            stream.close()
    assert proc.returncode == 1, err
    assert "shutting down" in err and "exiting forcefully" in err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err


# -- audio devices ----------------------------------------------------------------------------

class _Stream:
    """A sounddevice stream whose device the test can unplug."""

    def __init__(self, devices: _Devices, *, callback: Any, finished_callback: Any = None,
                 **options: Any) -> None:
        if devices.refuse:
            raise RuntimeError(devices.refuse)   # sounddevice.PortAudioError
        self.callback, self.finished_callback = callback, finished_callback
        self.active = self.closed = False
        devices.streams.append(self)

    def start(self) -> None:
        self.active = True

    def stop(self) -> None:
        if self.active and self.finished_callback is not None:
            self.finished_callback()     # PortAudio calls it on any end, ours included
        self.active = False

    def close(self) -> None:
        self.closed = True

    def unplug(self) -> None:
        """PortAudio's thread: the device went away; the stream becomes inactive."""
        self.active = False
        if self.finished_callback is not None:
            self.finished_callback()


class _Devices(types.ModuleType):
    def __init__(self, refuse: str | None = None) -> None:
        super().__init__("sounddevice")
        self.refuse = refuse
        self.streams: list[_Stream] = []
        self.InputStream = functools.partial(_Stream, self)
        self.OutputStream = functools.partial(_Stream, self)

    def query_devices(self, kind: str | None = None) -> Any:  # noqa: ANN401
        return {"name": "fake", "max_output_channels": 2, "max_input_channels": 1}


async def test_a_speaker_unplugged_during_playout_ends_the_playout(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the playout used to wait for a device that would never consume the rest: the agent
    # stuck speaking for ever
    from agents_trio.io.audio import silence_frame
    from agents_trio.io.local_audio import SpeakerOutput

    devices = _Devices()
    monkeypatch.setitem(sys.modules, "sounddevice", devices)
    async with SpeakerOutput(sample_rate=16000) as speaker:
        (stream,) = devices.streams
        for _ in range(10):
            await speaker.capture_frame(silence_frame(0.02, sample_rate=16000))
        speaker.flush()
        out = np.zeros((320, 1), np.int16)
        await trio.to_thread.run_sync(lambda: stream.callback(out, 320, None, None))
        await trio.to_thread.run_sync(stream.unplug)
        with trio.fail_after(5):
            ev = await speaker.wait_for_playout()
    assert ev.interrupted and ev.playback_position == pytest.approx(0.02)
    assert stream.closed


class _Listener(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Listen.")


@pytest.mark.parametrize("lost", ["microphone", "speaker"])
async def test_a_device_lost_mid_session_ends_it_once_reported(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, lost: str) -> None:
    # a lost microphone used to leave a deaf agent that looked alive (the session ran on,
    # the console waited for ever); a lost speaker, a mute one
    devices = _Devices()
    monkeypatch.setitem(sys.modules, "sounddevice", devices)
    console = AudioConsole(out=io.StringIO())
    reasons: list[str] = []

    async def entrypoint(ctx: JobContext) -> None:
        session = AgentSession(llm=FakeLLM([]))
        session.on("close", lambda ev: reasons.append(ev.reason.value))
        await session.start(_Listener(), room=ctx.room)
        mic, speaker = devices.streams
        await trio.to_thread.run_sync((mic if lost == "microphone" else speaker).unplug)

    with trio.fail_after(10):
        await run_console(entrypoint, console)
    assert reasons == ["error"]
    assert console.failure is not None and lost in str(console.failure)
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [
        f"the {lost} stopped (unplugged, or a PortAudio error): the session ends"]
    assert all(s.closed and not s.active for s in devices.streams)


def test_a_device_that_will_not_open_is_an_error_message_not_a_traceback(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # the console used to die with LocalAudioUnavailable's traceback (e.g. a device busy,
    # or --input-device naming no device)
    monkeypatch.setitem(sys.modules, "sounddevice",
                        _Devices(refuse="Error opening InputStream: Device unavailable"))
    server = AgentServer()

    @server.rtc_session()
    async def entrypoint(ctx: JobContext) -> None:
        await AgentSession(llm=FakeLLM([])).start(_Listener(), room=ctx.room)

    assert cli.main(server, ["console", "--input-device", "7"]) == 1
    err = capsys.readouterr().err
    assert "cannot open the microphone: Error opening InputStream: Device unavailable" in err
    assert "console --text" in err
