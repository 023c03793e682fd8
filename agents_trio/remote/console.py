"""A text console to chat with a running agent: ``python -m agents_trio console --connect ADDR``.

Each line typed is one ``RemoteSession.run``; the agent's messages, tool calls, tool outputs
and handoffs are printed as they come back. From a terminal, a line typed while the agent
replies is sent at once and interrupts the reply (the host interrupts the agent when a turn
arrives), as typed chat does in a LiveKit room; from a pipe, each line waits for the reply to
the one before. Lines starting with ``/`` are commands (``/help``).
End of input (Ctrl-D) or ``/quit`` leaves; the session keeps running on its host.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import TextIO

import trio

from ..chat import AgentHandoff, ChatMessage, FunctionCall, FunctionCallOutput
from ..nurseries import open_unwrapping_nursery
from ._typed_lines import answer_lines
from .client import RemoteSession, connect_remote_session
from .errors import RemoteConnectionError, RemoteSessionClosedError, RemoteSessionError

HELP = """commands:
  /history   the conversation so far
  /agent     the current agent, its instructions and tools
  /state     agent and user state, current speech
  /quit      leave (so does Ctrl-D); the agent keeps running"""


def describe_item(item: object) -> str | None:
    """One console line for a chat item (None for items a user does not need to see)."""
    if isinstance(item, ChatMessage):
        who = "agent" if item.role == "assistant" else item.role
        mark = " [interrupted]" if item.interrupted else ""
        return f"{who}> {item.text_content or ''}{mark}"
    if isinstance(item, FunctionCall):
        return f"  [tool call] {item.name}({item.arguments})"
    if isinstance(item, FunctionCallOutput):
        label = "tool error" if item.is_error else "tool output"
        return f"  [{label}] {item.output}"
    if isinstance(item, AgentHandoff):
        return f"  [handoff] {item.old_agent_id or '(start)'} -> {item.new_agent_id}"
    return None


def default_interrupt(stdin: TextIO, lines: object | None) -> bool:
    """Whether typed lines interrupt by default: when they are read from a terminal."""
    if lines is not None:
        return False
    try:
        return stdin.isatty()
    except ValueError:  # a closed stream
        return False


class Console:
    """Talks to ``remote`` line by line; writes to ``out``.

    Args:
        stdin: Where lines come from (read in a worker thread).
        lines: Instead of ``stdin``, an async function returning the next line, or None at
            the end of input.
        interrupt: Whether a line read while a reply is in flight is sent at once (the agent
            is interrupted) rather than after that reply (default: when lines come from
            ``stdin`` and it is a terminal).
    """

    def __init__(self, remote: RemoteSession, *, out: TextIO, stdin: TextIO | None = None,
                 lines: Callable[[], Awaitable[str | None]] | None = None,
                 interrupt: bool | None = None) -> None:
        self.remote = remote
        self.out = out
        self._stdin = stdin or sys.stdin
        self._lines = lines or self._read_stdin
        self.interrupt = default_interrupt(self._stdin, lines) if interrupt is None else interrupt

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def prompt(self) -> None:
        self.out.write("you> ")
        self.out.flush()

    async def _read_stdin(self) -> str | None:
        line = await trio.to_thread.run_sync(self._stdin.readline, abandon_on_cancel=True)
        return None if line == "" else line

    async def read_line(self) -> str | None:
        """The next typed line, stripped (None at the end of input), after a prompt.

        Cancellation: the wait is abandoned (a stdin read in progress finishes in its
        thread and is discarded).
        """
        self.prompt()
        line = await self._lines()
        return None if line is None else line.strip()

    async def greet(self) -> None:
        """Say who the agent is and the last message of the conversation so far.

        Cancellation: the requests in flight are withdrawn.
        """
        info = await self.remote.get_agent_info()
        self.say(f"connected: agent {info.id} ({info.label}). Type a message; /help for "
                 f"commands, Ctrl-D to leave.")
        messages = [item for item in (await self.remote.get_chat_history()).items
                    if isinstance(item, ChatMessage) and item.role in ("user", "assistant")]
        if len(messages) > 1:
            self.say(f"({len(messages) - 1} earlier messages: /history shows them)")
        if messages:
            self.say(describe_item(messages[-1]) or "")

    async def command(self, line: str) -> bool:
        """Run a ``/command``; returns False to leave.

        Cancellation: the requests in flight are withdrawn.
        """
        name = line[1:].split(maxsplit=1)[0].lower() if len(line) > 1 else ""
        if name in ("quit", "exit", "q"):
            return False
        if name == "history":
            for item in (await self.remote.get_chat_history()).items:
                text = describe_item(item)
                if text is not None:
                    self.say(text)
        elif name == "agent":
            info = await self.remote.get_agent_info()
            self.say(f"agent {info.id} ({info.label}): {info.instructions}")
            for tool in info.tools:
                self.say(f"  tool {tool.name}: {tool.description} "
                         f"{json.dumps(tool.parameters.get('properties', {}))}")
        elif name == "state":
            state = await self.remote.get_session_state()
            speech = state.current_speech
            self.say(f"agent {state.agent_id}: {state.agent_state}; user: {state.user_state}; "
                     f"speech: {speech.id + ' (' + speech.source + ')' if speech else 'none'}")
        else:
            self.say(HELP)
        return True

    async def turn(self, text: str) -> None:
        """Send ``text`` as a turn and print what the agent did.

        Cancellation: the turn is withdrawn (the agent may still finish it on the host).
        """
        try:
            result = await self.remote.run(text)
        except (RemoteSessionClosedError, RemoteConnectionError):
            raise
        except RemoteSessionError as e:
            self.say(f"  [error] {e.message}" + (f" ({e.error_type})" if e.error_type else ""))
            return
        lines = [describe_item(ev.item) for ev in result.events]
        for line in lines:
            if line is not None:
                self.say(line)
        if not lines:
            self.say("  (no reply)")

    async def loop(self) -> None:
        """Greet, then read lines and answer them until the end of input or ``/quit`` (and
        the replies in flight are printed).

        Cancellation: stops at once; a turn in flight is withdrawn.
        """
        await self.greet()
        await answer_lines(self.read_line, self.command, self.turn, interrupt=self.interrupt,
                           prompt=self.prompt)
        self.say("bye")


async def run_console(target: str | trio.abc.Stream, *, stdin: TextIO | None = None,
                      lines: Callable[[], Awaitable[str | None]] | None = None,
                      out: TextIO | None = None, connect_timeout: float = 10.0,
                      interrupt: bool | None = None) -> int:
    """Chat with the agent at ``target`` (an address or a connected stream) until the end of
    input; returns the exit status (1 when the host could not be reached or went away).

    Args:
        stdin, lines, interrupt: Where typed lines come from and whether a line interrupts
            the reply in flight (see :class:`Console`).
        connect_timeout: Seconds to keep retrying the connection and waiting for the
            session to be ready.

    Cancellation: cancelling it closes the connection; a turn in flight is withdrawn (the
    agent may still finish it on the host).
    """
    out = out or sys.stdout
    try:
        async with open_unwrapping_nursery() as nursery:
            remote: RemoteSession | None = None
            with trio.move_on_after(connect_timeout):
                connected = await connect_remote_session(nursery, target, retry_interval=0.1)
                await connected.wait_for_ready()
                remote = connected
            if remote is None:
                print(f"could not reach a ready agent at {target} within {connect_timeout} s",
                      file=out, flush=True)
                nursery.cancel_scope.cancel()
                return 1
            await Console(remote, out=out, stdin=stdin, lines=lines, interrupt=interrupt).loop()
            await remote.aclose()
    except (RemoteSessionClosedError, RemoteConnectionError) as e:
        print(f"disconnected: {e.message}", file=out, flush=True)
        return 1
    except ValueError as e:  # a malformed address
        print(f"error: {e}", file=out, flush=True)
        return 2
    return 0


__all__ = ["Console", "default_interrupt", "describe_item", "run_console"]
