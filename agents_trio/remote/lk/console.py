"""The text console (``python -m agents_trio console --connect HOST:PORT``) on LiveKit's
protocol: the same lines and commands as the msgpack console, over a LiveKit-protocol
``RemoteSession`` — to our host or to LiveKit's own ``SessionHost``."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

import trio

from ...chat import ChatMessage
from .._typed_lines import answer_lines
from ..console import HELP, default_interrupt, describe_item
from ..errors import RemoteConnectionError, RemoteSessionClosedError, RemoteSessionError
from .client import RemoteSession, open_remote_session
from .convert import AGENT_STATE_FROM_PB, USER_STATE_FROM_PB, decode_chat_items


class LkConsole:
    """Talks to ``remote`` line by line; writes to ``out``. With ``interrupt``, a line read
    while a reply is in flight is sent at once (the host interrupts the agent), else after
    that reply."""

    def __init__(self, remote: RemoteSession, *, out: TextIO,
                 lines: Callable[[], Awaitable[str | None]], interrupt: bool = False) -> None:
        self.remote = remote
        self.out = out
        self._lines = lines
        self.interrupt = interrupt

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def prompt(self) -> None:
        self.out.write("you> ")
        self.out.flush()

    async def read_line(self) -> str | None:
        """Cancellation: cancelling it abandons the line being read."""
        self.prompt()
        line = await self._lines()
        return None if line is None else line.strip()

    async def greet(self) -> None:
        """Cancellation: as the requests it makes (:meth:`RemoteSession.ping`)."""
        info = await self.remote.get_agent_info()
        self.say(f"connected: agent {info.id}. Type a message; /help for commands, Ctrl-D to "
                 f"leave.")
        history = decode_chat_items((await self.remote.get_chat_history()).items)
        messages = [i for i in history if isinstance(i, ChatMessage)
                    and i.role in ("user", "assistant")]
        if len(messages) > 1:
            self.say(f"({len(messages) - 1} earlier messages: /history shows them)")
        if messages:
            self.say(describe_item(messages[-1]) or "")

    async def command(self, line: str) -> bool:
        """Cancellation: as the requests it makes (:meth:`RemoteSession.ping`); nothing is printed
        for an unanswered one.
        """
        name = line[1:].split(maxsplit=1)[0].lower() if len(line) > 1 else ""
        if name in ("quit", "exit", "q"):
            return False
        if name == "history":
            for item in decode_chat_items((await self.remote.get_chat_history()).items):
                text = describe_item(item)
                if text is not None:
                    self.say(text)
        elif name == "agent":
            info = await self.remote.get_agent_info()
            self.say(f"agent {info.id}: {info.instructions}")
            for tool in info.tools:
                self.say(f"  tool {tool}")
        elif name == "state":
            state = await self.remote.get_session_state()
            self.say(f"agent {state.agent_id}: "
                     f"{AGENT_STATE_FROM_PB.get(state.agent_state, '?')}; user: "
                     f"{USER_STATE_FROM_PB.get(state.user_state, '?')}")
        else:
            self.say(HELP)
        return True

    async def turn(self, text: str) -> None:
        """Cancellation: cancelling it forgets the turn's answer; the host may still run the turn
        (LiveKit's protocol has no cancel).
        """
        try:
            result = await self.remote.run(text)
        except (RemoteSessionClosedError, RemoteConnectionError):
            raise
        except RemoteSessionError as e:
            self.say(f"  [error] {e.message.removeprefix('session request run_input failed: ')}")
            return
        lines = [describe_item(item) for item in decode_chat_items(result.items)]
        for line in lines:
            if line is not None:
                self.say(line)
        if not lines:
            self.say("  (no reply)")

    async def loop(self) -> None:
        """Cancellation: cancelling it ends the console; the agent is unaffected."""
        await self.greet()
        await answer_lines(self.read_line, self.command, self.turn, interrupt=self.interrupt,
                           prompt=self.prompt)
        self.say("bye")


async def run_lk_console(target: str | trio.abc.Stream, *, stdin: TextIO | None = None,
                         lines: Callable[[], Awaitable[str | None]] | None = None,
                         out: TextIO | None = None, connect_timeout: float = 10.0,
                         interrupt: bool | None = None) -> int:
    """Chat with the agent at ``target`` (``HOST:PORT`` or a connected stream) until the end of
    input; returns the exit status (1: unreachable or gone, 2: a malformed address).
    ``interrupt``: whether a line typed during a reply interrupts it (default: when lines are
    read from a terminal), as in :class:`~agents_trio.remote.console.Console`.

    Cancellation: cancelling it closes the connection; the agent keeps running on its host.
    """
    out = out or sys.stdout
    source = stdin or sys.stdin

    async def read_stdin() -> str | None:
        line = await trio.to_thread.run_sync(source.readline, abandon_on_cancel=True)
        return None if line == "" else line

    if isinstance(target, str):
        host, sep, port = target.rpartition(":")
        if not sep or not host or not port.isdigit():
            print(f"error: the address must be HOST:PORT, got {target!r}", file=out, flush=True)
            return 2
    try:
        stream: trio.abc.Stream | None = None
        with trio.move_on_after(connect_timeout):
            while stream is None:
                if not isinstance(target, str):
                    stream = target
                    break
                try:
                    stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
                except OSError:
                    await trio.sleep(0.1)
        if stream is None:
            print(f"could not reach a ready agent at {target} within {connect_timeout} s",
                  file=out, flush=True)
            return 1
        async with open_remote_session(stream) as remote:
            try:
                await remote.wait_for_ready(timeout=connect_timeout)
            except TimeoutError as e:
                print(f"could not reach a ready agent at {target}: {e}", file=out, flush=True)
                return 1
            if interrupt is None:
                interrupt = default_interrupt(source, lines)
            await LkConsole(remote, out=out, lines=lines or read_stdin,
                            interrupt=interrupt).loop()
    except (RemoteSessionClosedError, RemoteConnectionError) as e:
        print(f"disconnected: {e.message}", file=out, flush=True)
        return 1
    return 0


__all__ = ["LkConsole", "run_lk_console"]
