"""LiveKit's TCP console protocol, agent side: a console server written here from the protocol
definition (AgentSessionMessage audio_input / audio_output / audio_playback_flush /
audio_playback_clear / audio_playback_finished, 48 kHz mono PCM16) talks to an agents_trio
voice session whose audio goes over the console connection, alongside requests."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import trio
import trio.testing

pytest.importorskip("livekit.protocol")

from agents_trio import Agent  # noqa: E402
from agents_trio.remote import lk  # noqa: E402
from agents_trio.remote.lk.codec import pb  # noqa: E402
from agents_trio.remote.lk.tcp_console import (ConsoleAudioOutput,  # noqa: E402
                                               TcpConsoleIO)
from agents_trio.testing import FakeActions, create_session  # noqa: E402
from lk_helpers import ConsoleServer, mic_frame  # noqa: E402

Frame = pb.AgentSessionMessage.ConsoleIO.AudioFrame


async def test_a_voice_turn_over_the_console_connection(autojump_clock) -> None:
    a = FakeActions()
    a.add_user_speech(0.5, 2.0, "hello")
    a.add_llm("Hi there!")
    a.add_tts(1.0)
    session = create_session(a)
    console = TcpConsoleIO()
    console.attach_to(session)
    finished = []
    console.output.on("playback_finished", finished.append)
    async with session, lk.open_session_host(session, listeners=[]) as host, \
            trio.open_nursery() as nursery:
        client, server = trio.testing.memory_stream_pair()
        nursery.start_soon(functools.partial(host.serve_stream, server, console=console))
        await session.start(Agent(instructions="Say hi."))
        console_server = ConsoleServer(client)
        nursery.start_soon(console_server.read)
        nursery.start_soon(console_server.microphone, 8.0)
        with trio.fail_after(20):
            while not finished:
                await trio.sleep(0.1)
        history = await console_server.request(
            "h", get_chat_history=pb.SessionRequest.GetChatHistory())
        nursery.cancel_scope.cancel()

    texts = [(i.message.role, i.message.content[0].text, i.message.interrupted)
             for i in history.get_chat_history.items if i.WhichOneof("item") == "message"]
    assert texts == [(pb.USER, "hello", False), (pb.ASSISTANT, "Hi there!", False)]
    assert console_server.rates == {48000}
    assert console_server.flushes >= 1 and len(console_server.segments) == 1
    assert console_server.segments[0] == pytest.approx(1.0, abs=0.02)
    assert finished[0].interrupted is False
    assert finished[0].playback_position == pytest.approx(1.0, abs=0.02)
    assert console.input.frames_received > 100 and console.input.frames_invalid == 0
    assert "conversation_item_added" in console_server.events


async def test_console_output_clear_and_a_vanished_console(autojump_clock) -> None:
    sent: list[str] = []
    out = ConsoleAudioOutput()
    out.attach(lambda m: sent.append(m.WhichOneof("message") or ""))
    frame = trio_frame(0.5)
    await out.capture_frame(frame)
    await trio.sleep(0.2)
    event = out.clear_buffer()
    assert event is not None and event.interrupted
    assert event.playback_position == pytest.approx(0.2)
    assert sent[-1] == "audio_playback_clear" and "audio_output" in sent
    # a flushed segment waits for the console; the console vanishing ends it, interrupted
    await out.capture_frame(frame)
    out.flush()
    async with trio.open_nursery() as nursery:
        waited = []

        async def wait() -> None:
            waited.append(await out.wait_for_playout())

        nursery.start_soon(wait)
        await trio.sleep(0.1)
        assert not waited
        out.detach()
    assert waited[0].interrupted


async def test_bad_microphone_frames_are_counted_not_fatal(autojump_clock) -> None:
    console = TcpConsoleIO()
    console.input.push_frame(Frame(data=b"xx", sample_rate=48000, num_channels=1,
                                   samples_per_channel=480))
    console.input.push_frame(Frame(data=b"\x00" * 1920, sample_rate=48000, num_channels=2,
                                   samples_per_channel=480))
    console.input.push_frame(Frame(data=b"\x00" * 960, sample_rate=0, num_channels=1,
                                   samples_per_channel=480))
    assert console.input.frames_invalid == 3 and console.input.frames_received == 0
    small = TcpConsoleIO(max_buffered_frames=2)
    for _ in range(100):
        small.input.push_frame(mic_frame(samples=480).audio_input)
    assert small.input.frames_dropped > 0


def trio_frame(seconds: float):
    from livekit import rtc
    samples = int(24000 * seconds)
    return rtc.AudioFrame(np.zeros(samples, dtype=np.int16).tobytes(), 24000, 1, samples)


AGENT_FILE = '''
from agents_trio import Agent
from agents_trio.testing import FakeActions, create_session


async def entrypoint(ctx):
    a = FakeActions()
    a.add_user_speech(0.2, 0.6, "hello")
    a.add_llm("Hi there!", ttft=0.05, duration=0.05)
    a.add_tts(0.3, ttfb=0.05, duration=0.05)
    session = create_session(a)
    await ctx.run_session(session, Agent(instructions="Say hi."))
'''


async def test_console_command_runs_an_agent_file_against_a_console_server(tmp_path) -> None:
    """``python -m agents_trio console agent.py --connect-addr HOST:PORT`` (a subprocess) dials
    the console server; a voice turn plays; hanging up ends the command with status 0."""
    import os
    import sys

    agent = tmp_path / "my_agent.py"
    agent.write_text(AGENT_FILE)
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    root = str(__import__("pathlib").Path(__file__).parents[2])
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(functools.partial(
                trio.run_process, [sys.executable, "-m", "agents_trio", "console", str(agent),
                                   "--connect-addr", f"127.0.0.1:{port}"],
                cwd=root, env=env, check=False, capture_stderr=True))
            stream = await listener.accept()
            console_server = ConsoleServer(stream)
            async with trio.open_nursery() as talk:
                talk.start_soon(console_server.read)
                talk.start_soon(console_server.microphone, 30.0)
                while not console_server.segments:
                    await trio.sleep(0.05)
                history = await console_server.request(
                    "h", get_chat_history=pb.SessionRequest.GetChatHistory())
                talk.cancel_scope.cancel()
            await stream.aclose()  # the console hangs up
            status = await proc.wait()
    await listener.aclose()
    assert status == 0, proc.stderr
    texts = [i.message.content[0].text for i in history.get_chat_history.items
             if i.WhichOneof("item") == "message"]
    assert texts == ["hello", "Hi there!"]
    assert console_server.segments[0] == pytest.approx(0.3, abs=0.03)


SERVER_AGENT_FILE = '''
from agents_trio import Agent, AgentServer, JobContext, cli
from agents_trio.testing import FakeActions, create_session

server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    a = FakeActions()
    a.add_user_speech(0.2, 0.6, "hello")
    a.add_llm("Hi there!", ttft=0.05, duration=0.05)
    a.add_tts(0.3, ttfb=0.05, duration=0.05)
    await create_session(a).start(Agent(instructions="Say hi."), room=ctx.room)


if __name__ == "__main__":
    cli.run_app(server)
'''


async def test_an_agent_server_file_serves_livekits_tcp_console(tmp_path) -> None:
    """``python my_agent.py console --connect-addr HOST:PORT`` (what ``lk agent console``
    runs) for a file written with AgentServer and cli.run_app: the session started without
    ``async with`` is served to the console; hanging up ends the command with status 0."""
    import os
    import sys

    agent = tmp_path / "my_agent.py"
    agent.write_text(SERVER_AGENT_FILE)
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    root = str(__import__("pathlib").Path(__file__).parents[2])
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            proc = await nursery.start(functools.partial(
                trio.run_process, [sys.executable, str(agent), "console",
                                   "--connect-addr", f"127.0.0.1:{port}"],
                cwd=root, env=env, check=False, capture_stderr=True))
            stream = await listener.accept()
            console_server = ConsoleServer(stream)
            async with trio.open_nursery() as talk:
                talk.start_soon(console_server.read)
                talk.start_soon(console_server.microphone, 30.0)
                while not console_server.segments:
                    await trio.sleep(0.05)
                history = await console_server.request(
                    "h", get_chat_history=pb.SessionRequest.GetChatHistory())
                talk.cancel_scope.cancel()
            await stream.aclose()  # the console hangs up
            status = await proc.wait()
    await listener.aclose()
    assert status == 0, proc.stderr
    texts = [i.message.content[0].text for i in history.get_chat_history.items
             if i.WhichOneof("item") == "message"]
    assert texts == ["hello", "Hi there!"]
