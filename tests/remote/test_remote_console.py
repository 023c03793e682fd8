"""The text console: in-process with scripted lines, and as a user runs it — ``python -m
agents_trio serve`` in one process, ``python -m agents_trio console`` in a pseudo-terminal."""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

from agents_trio import open_session_host
from agents_trio.demo import WeatherAgent
from agents_trio.remote.console import run_console
from agents_trio.remote.demo import demo_session

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _lines(*typed: str) -> Callable[[], Awaitable[str | None]]:
    queue = list(typed)

    async def next_line() -> str | None:
        await trio.lowlevel.checkpoint()
        return queue.pop(0) if queue else None

    return next_line


async def _console(*typed: str, session=None) -> tuple[int, str]:
    session = session or demo_session()
    out = io.StringIO()
    async with session, open_session_host(session, listeners=[]) as host, \
            trio.open_nursery() as nursery:
        await session.start(WeatherAgent())
        client, server = trio.testing.memory_stream_pair()
        nursery.start_soon(host.serve_stream, server)
        status = await run_console(client, lines=_lines(*typed), out=out)
    return status, out.getvalue()


async def test_console_shows_replies_tools_errors_and_silence(autojump_clock) -> None:
    status, text = await _console("What's the weather in Lisbon?", "", "break", "shh",
                                  "/state", "/agent", "/history", "/help", "/quit", "unread")
    assert status == 0
    assert text.startswith("connected: agent weather_agent (WeatherAgent).")
    assert "agent> Hi! Ask me about the weather, or for a story." in text
    assert ("you> agent> Let me check the weather in Lisbon.\n"
            '  [tool call] get_weather({"location": "Lisbon"})\n'
            "  [tool output] It is sunny and 22 degrees in Lisbon.\n"
            "agent> It is sunny and 22 degrees in Lisbon. Anything else?\n") in text
    assert "  [error] the demo model is unavailable (you asked it to break) (APIError)" in text
    assert "you>   (no reply)" in text
    assert "agent weather_agent: listening; user: listening; speech: none" in text
    assert "tool get_weather: Look up the weather." in text
    assert "user> What's the weather in Lisbon?" in text and "/history shows them" not in text
    assert "  /quit      leave" in text
    assert text.rstrip().endswith("bye") and "unread" not in text


async def test_console_reports_a_closed_session(autojump_clock) -> None:
    session = demo_session()

    async def close_then_type() -> str | None:
        await session.aclose()
        return "hello?"

    out = io.StringIO()
    async with session, open_session_host(session, listeners=[]) as host, \
            trio.open_nursery() as nursery:
        await session.start(WeatherAgent())
        client, server = trio.testing.memory_stream_pair()
        nursery.start_soon(host.serve_stream, server)
        status = await run_console(client, lines=close_then_type, out=out)
    assert status == 1
    assert out.getvalue().rstrip().endswith("disconnected: the session closed")


async def test_console_gives_up_on_an_unreachable_host(autojump_clock) -> None:
    out = io.StringIO()
    status = await run_console("unix:/nonexistent/agent.sock", out=out, connect_timeout=2)
    assert status == 1 and "could not reach a ready agent" in out.getvalue()
    assert await run_console("no-port", out=out) == 2


def _read_until(fd: int, pattern: str, deadline: float, seen: bytearray) -> str:
    """Read the pty until ``pattern`` appears (the test's bounded wait on a subprocess)."""
    import select
    import time

    while not re.search(pattern, seen.decode(errors="replace")):
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out waiting for {pattern!r}; got:\n{seen.decode()}")
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            seen += chunk
    return seen.decode(errors="replace")


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_console_in_a_pseudo_terminal_against_the_served_demo() -> None:
    """A user's session: start the host, connect the console, type, read, leave with Ctrl-D."""
    import time

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    server = subprocess.Popen([sys.executable, "-m", "agents_trio", "serve", "--port", "0"],
                              cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    console = None
    master = -1
    try:
        deadline = time.monotonic() + 30
        banner = bytearray()
        assert server.stdout is not None
        address_text = _read_until(server.stdout.fileno(), r"serving the demo agent on \S+\n",
                                   deadline, banner)
        address = re.search(r"on (\S+)\n", address_text).group(1)
        master, slave = pty.openpty()
        console = subprocess.Popen(
            [sys.executable, "-m", "agents_trio", "console", "--connect", address],
            cwd=ROOT, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
        os.close(slave)
        seen = bytearray()
        _read_until(master, r"you> ", deadline, seen)
        os.write(master, b"What's the weather in Lisbon?\n")
        text = _read_until(master, r"Anything else\?\r?\nyou> ", deadline, seen)
        assert "[tool call] get_weather" in text and "sunny and 22 degrees in Lisbon" in text
        os.write(master, b"break\n")
        text = _read_until(master, r"\[error\].*\r?\nyou> ", deadline, seen)
        assert "the demo model is unavailable" in text
        os.write(master, b"\x04")  # Ctrl-D: end of input at the start of a line
        _read_until(master, r"bye", deadline, seen)
        assert console.wait(timeout=max(1.0, deadline - time.monotonic())) == 0
    finally:
        if console is not None and console.poll() is None:
            console.kill()
            console.wait()
        if master >= 0:
            os.close(master)
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        if server.stdout is not None:
            server.stdout.close()
        if server.stderr is not None:
            server.stderr.close()
    assert server.returncode == 0
