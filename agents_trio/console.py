"""``python my_agent.py console``: run an agent file's entrypoint on this machine, no room.

As LiveKit's console, the entrypoint runs as it would in a room, with a job context of its
own (:class:`ConsoleJobContext`: ``ctx.room`` is a stand-in, ``ctx.proc`` holds what the
prewarm loaded, :func:`~agents_trio.job.get_job_context` works). The first session it starts
gets the console as its I/O, whatever ``room=`` says:

- ``--text`` (:class:`TextConsole`): each line read from standard input is a user turn; the
  conversation is printed (``user:``, ``agent:``, tool calls with their arguments and output,
  handoffs), one line per item, in the order they happen.
- audio (:class:`AudioConsole`): the machine's microphone and speaker
  (``agents_trio.io.local_audio``); the conversation is printed the same way.

Text mode's rule for a line read while the agent is replying (generating, running a tool,
or an ``on_enter`` greeting in progress):

- from a terminal, the line interrupts the reply (as typed chat does in a LiveKit room: the
  reply stops where it is, is recorded as interrupted, and the new line is answered);
- from a pipe or a file, lines wait: the next line is read only once the previous reply,
  and everything it started (tool calls, the reply after them, a handoff's greeting), is
  done. A script of lines is then answered in order, each one fully.

``interrupt=`` overrides the choice. At the end of input the console waits for the reply in
progress, then closes the session; the job ends when its entrypoint has returned too.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TextIO

import trio
from livekit import rtc

from .chat import AgentHandoff, ChatMessage
from .events import CloseReason, ConversationItemAddedEvent, FunctionToolsExecutedEvent
from .io.bridge import AsyncioBridge
from .job import JobContext
from .job_process import JobProcess

if TYPE_CHECKING:
    from .io.room import RoomOptions
    from .session import AgentSession

__all__ = ["AudioConsole", "ConsoleIO", "ConsoleJobContext", "ConsoleRoom", "TextConsole",
           "stdin_lines"]

logger = logging.getLogger("agents_trio.console")

#: the next line (without its line end), or None at the end of input
LineSource = Callable[[], Awaitable[str | None]]


def stdin_lines(stream: TextIO | None = None) -> LineSource:
    """Lines of ``stream`` (default: standard input), a pipe, a file or a terminal.

    A stream with a file descriptor (on Unix) is read with Trio's own readiness wait, no
    thread: a cancelled read leaves nothing behind (no reader blocked on the terminal that
    would eat the next line, or hold the process at exit until Enter is pressed). Bytes that
    are not text in the stream's encoding become U+FFFD; they end no conversation. Other
    streams (and Windows) are read in a worker thread.
    """
    source = stream or sys.stdin
    fd = _pollable_fd(source)
    if fd is not None:
        return _FdLines(fd, getattr(source, "encoding", None) or "utf-8")

    async def next_line() -> str | None:
        line = await trio.to_thread.run_sync(source.readline, abandon_on_cancel=True)
        return None if line == "" else line.rstrip("\r\n")

    return next_line


def _pollable_fd(stream: TextIO) -> int | None:
    if sys.platform == "win32":   # Trio waits for sockets only there
        return None
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):   # io.UnsupportedOperation is an OSError
        return None


class _FdLines:
    """The lines of a file descriptor, read when it is readable (see :func:`stdin_lines`).

    Owns the bytes read past the line returned (the next lines), so nothing read is lost
    between calls. Cancellation: a checkpoint; a cancelled call has consumed nothing.
    """

    def __init__(self, fd: int, encoding: str) -> None:
        self._fd = fd
        self._encoding = encoding
        self._pending = bytearray()
        self._ended = False
        self._pollable = True   # False for a regular file or /dev/null: they never block

    async def __call__(self) -> str | None:
        while True:
            end = self._pending.find(b"\n")
            if end >= 0 or (self._ended and self._pending):
                cut = end + 1 if end >= 0 else len(self._pending)
                raw = bytes(self._pending[:cut])
                del self._pending[:cut]
                await trio.lowlevel.checkpoint()
                return raw.decode(self._encoding, errors="replace").rstrip("\r\n")
            if self._ended:
                await trio.lowlevel.checkpoint()
                return None
            await self._readable()
            try:
                chunk = os.read(self._fd, 65536)   # readable: returns at once
            except BlockingIOError:   # a non-blocking descriptor another reader emptied
                continue
            except OSError as e:   # e.g. EIO: the terminal hung up; the input has ended
                logger.warning("standard input failed (%s): end of input", e)
                chunk = b""
            if chunk:
                self._pending += chunk
            else:
                self._ended = True

    async def _readable(self) -> None:
        if self._pollable:
            try:
                await trio.lowlevel.wait_readable(self._fd)
                return
            except PermissionError:   # epoll refuses regular files, which never block
                self._pollable = False
        await trio.lowlevel.checkpoint()


class ConsoleIO(Protocol):
    """What a console gives the session it serves."""

    def attach(self, session: AgentSession) -> AbstractAsyncContextManager[object]:
        """The session's I/O for the block (entered before the session starts)."""

    def serve(self, session: AgentSession) -> AbstractAsyncContextManager[object]:
        """The console's work while the started session runs."""


class TranscriptPrinter:
    """Prints a session's conversation to ``out``, one line per item, as it happens::

        user: What's the weather in Paris?
          tool: get_weather({"location": "Paris"}) -> It is sunny in Paris.
        agent: It is sunny in Paris. [interrupted]
          handoff: Greeter -> Support

    Args:
        echo_user: Print the user's messages too (off when the user typed them on a
            terminal: they are on the screen already).
    """

    def __init__(self, out: TextIO, *, echo_user: bool = True) -> None:
        self.out = out
        self.echo_user = echo_user
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        self.lines.append(text)
        print(text, file=self.out, flush=True)

    @asynccontextmanager
    async def printing(self, session: AgentSession) -> AsyncIterator[None]:
        """Print ``session``'s conversation while the block runs.

        Cancellation: not a checkpoint; leaving the block, cancelled or not, stops printing.
        """
        session.on("conversation_item_added", self._on_item)
        session.on("function_tools_executed", self._on_tools)
        try:
            yield
        finally:
            session.off("conversation_item_added", self._on_item)
            session.off("function_tools_executed", self._on_tools)

    def _on_item(self, ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if isinstance(item, AgentHandoff):
            if item.old_agent_id is not None:
                self.say(f"  handoff: {item.old_agent_id} -> {item.new_agent_id}")
            return
        if not isinstance(item, ChatMessage) or item.role not in ("user", "assistant"):
            return
        if item.role == "user" and not self.echo_user:
            return
        who = "agent" if item.role == "assistant" else "user"
        mark = " [interrupted]" if item.interrupted else ""
        self.say(f"{who}: {item.text_content or ''}{mark}")

    def _on_tools(self, ev: FunctionToolsExecutedEvent) -> None:
        for call, output in ev.zipped():
            if output is None:
                result = "(no output)"
            elif output.is_error:
                result = f"error: {output.output}"
            else:
                result = output.output
            self.say(f"  tool: {call.name}({call.arguments}) -> {result}")


async def wait_for_reply_done(session: AgentSession) -> None:
    """Wait until the conversation waits for the user: no speech queued or generating, no
    tool running, ``on_enter`` done (the innermost agent's); with a realtime model, also
    its reply played (the session alone would take the next input at once).

    Cancellation: a checkpoint only; nothing changes.
    """
    await session.conversation.wait_until(
        lambda: session.closing or session.activity is None
        or (session.activity.settled and not session.activity.replying))


class TextConsole:
    """Text mode: lines from ``lines`` are the user's turns; the conversation goes to ``out``.

    Args:
        lines: The source of lines (:func:`stdin_lines` by default).
        out: Where the conversation is printed.
        interrupt: Whether a line read while the agent replies interrupts it (default:
            when standard input is a terminal; see the module docstring for the rule).
    """

    def __init__(self, *, lines: LineSource | None = None, out: TextIO | None = None,
                 interrupt: bool | None = None) -> None:
        self.lines = lines or stdin_lines()
        self.out = out or sys.stdout
        self.interrupt = sys.stdin.isatty() if interrupt is None else interrupt
        self.printer = TranscriptPrinter(self.out, echo_user=not self.interrupt)

    @asynccontextmanager
    async def attach(self, session: AgentSession) -> AsyncIterator[None]:
        """No audio: the session reads and writes text only; its conversation is printed.

        Cancellation: not a checkpoint; leaving the block stops printing.
        """
        session.input.audio = None
        session.output.audio = None
        session.output.transcription = None
        async with self.printer.printing(session):
            yield

    @asynccontextmanager
    async def serve(self, session: AgentSession) -> AsyncIterator[None]:
        """Feed the lines to ``session`` while the block runs (the session is running).

        Cancellation: leaving the block, cancelled or not, stops reading lines (a read in
        progress is abandoned); the session is left as it is.
        """
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.converse, session)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()

    async def converse(self, session: AgentSession) -> None:
        """Send each line as a user turn (interrupting or waiting, see the module
        docstring); at the end of input wait for the reply in progress and close the
        session.

        Cancellation: cancelling it stops reading; the session is left as it is.
        """
        while (line := await self.lines()) is not None:
            text = line.strip()
            if session.closing:
                break
            if not text:
                continue
            if self.interrupt:
                await _interrupt(session)
            else:
                await wait_for_reply_done(session)
            if session.closing:
                break
            session.generate_reply(user_input=text)
            if not self.interrupt:
                await wait_for_reply_done(session)
        await wait_for_reply_done(session)
        await session.aclose()


async def _interrupt(session: AgentSession) -> None:
    try:
        await session.interrupt()
    except RuntimeError:
        pass  # the playing speech does not allow interruptions: the new reply waits for it


class AudioConsole:
    """Audio mode: the machine's microphone and speaker are the session's audio; the
    conversation is printed to ``out``.

    A device lost while the session runs (unplugged, a PortAudio error) is reported once
    (logged) and ends the session (reason ``error``), never a deaf or mute agent that looks
    alive; :attr:`failure` keeps it (the command line exits with status 1).

    Args:
        input_device, output_device: sounddevice device ids or names (default devices if
            None).
    """

    def __init__(self, *, out: TextIO | None = None, input_device: int | str | None = None,
                 output_device: int | str | None = None) -> None:
        self.out = out or sys.stdout
        self.input_device = input_device
        self.output_device = output_device
        self.printer = TranscriptPrinter(self.out)
        #: the device failure that ended the session, if one did
        self.failure: Exception | None = None
        self._devices: list[Any] = []

    @asynccontextmanager
    async def attach(self, session: AgentSession) -> AsyncIterator[None]:
        """Open the microphone and the speaker for the block.

        Raises:
            LocalAudioUnavailable: No sounddevice, no PortAudio, or no such device.

        Cancellation: leaving the block, cancelled or not, closes both devices.
        """
        from .io.local_audio import MicrophoneInput, SpeakerOutput

        async with MicrophoneInput(device=self.input_device) as mic, \
                SpeakerOutput(device=self.output_device) as speaker:
            session.input.audio = mic
            session.output.audio = speaker
            self._devices = [mic, speaker]
            try:
                async with self.printer.printing(session):
                    yield
            finally:
                self._devices = []

    @asynccontextmanager
    async def serve(self, session: AgentSession) -> AsyncIterator[None]:
        """Watch the devices while the block runs (the session listens to the microphone
        itself): the first one lost ends the session.

        Cancellation: leaving the block, cancelled or not, stops watching.
        """
        async with trio.open_nursery() as nursery:
            for device in self._devices:
                watch = getattr(device, "watch", None)
                if watch is not None:
                    nursery.start_soon(self._end_on_loss, session, watch)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()

    async def _end_on_loss(self, session: AgentSession, watch: Any) -> None:  # noqa: ANN401
        error = await watch.wait_lost()
        if self.failure is not None:   # the other device's loss already ended the session
            return
        self.failure = error
        logger.error("%s: the session ends", error)
        session.shutdown(drain=False, reason=CloseReason.ERROR)


class _ConsoleParticipant:
    """The person at the console, as a room participant would show them."""

    identity = "console-user"
    name = "Console user"
    sid = "PA_console_user"
    metadata = ""
    attributes: dict[str, str] = {}
    kind = rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD
    track_publications: dict[str, object] = {}


class _ConsoleLocalParticipant:
    identity = "console-agent"
    name = "Console agent"
    sid = "PA_console_agent"


class ConsoleRoom(rtc.EventEmitter[str]):
    """What ``ctx.room`` is in console mode: a stand-in that is always connected, named
    ``console``, with the console's user as its one remote participant. Nothing travels
    through it; the console is the session's I/O."""

    def __init__(self) -> None:
        super().__init__()
        self.name = "console"
        self.local_participant = _ConsoleLocalParticipant()
        self.remote_participants = {"console-user": _ConsoleParticipant()}

    def isconnected(self) -> bool:
        return True


class ConsoleJobContext(JobContext):
    """The job context of console mode: the first session the entrypoint starts gets the
    console as its I/O (``room=`` is accepted and ignored, as in LiveKit's console); a
    later one runs without I/O (logged).

    Args:
        bridge: The asyncio bridge (for LiveKit plugins).
        console: The console (:class:`TextConsole` or :class:`AudioConsole`).
        proc: The process (what the prewarm loaded).
    """

    def __init__(self, bridge: AsyncioBridge, console: ConsoleIO, *,
                 proc: JobProcess | None = None, shutdown_grace: float = 10.0) -> None:
        super().__init__(bridge, ConsoleRoom(),  # type: ignore[arg-type]
                         job_id="console", shutdown_grace=shutdown_grace, proc=proc)
        self.console = console
        self.console_session: AgentSession | None = None

    def _open_session_io(self, session: AgentSession, room: rtc.Room | None,
                         room_options: RoomOptions | None) -> AbstractAsyncContextManager[object]:
        if self.console_session is None:
            self.console_session = session
            return self.console.attach(session)
        logger.warning("console mode serves the first session only; this one runs without "
                       "I/O")
        return _nothing()

    def _serve_session(self, session: AgentSession, room: rtc.Room | None
                       ) -> AbstractAsyncContextManager[object]:
        if session is self.console_session:
            return self.console.serve(session)
        return _nothing()


async def run_console(entrypoint: Callable[[JobContext], Awaitable[object]], console: ConsoleIO,
                      *, proc: JobProcess | None = None, shutdown_grace: float = 10.0,
                      on_ready: Callable[[JobContext], object] | None = None) -> None:
    """Run ``entrypoint`` as a console job: the asyncio bridge opens, the entrypoint runs,
    the job ends once it returned and its sessions closed, then the shutdown callbacks run.

    Raises:
        Whatever the entrypoint raised.

    Cancellation: cancelling it shuts the job down (sessions close with ``job_shutdown``,
    the entrypoint gets ``shutdown_grace`` seconds); the shutdown callbacks still run.
    """
    from .io.bridge import open_bridge
    from .job import open_plugin_http_context

    async with open_bridge() as bridge, open_plugin_http_context(bridge):
        ctx = ConsoleJobContext(bridge, console, proc=proc, shutdown_grace=shutdown_grace)
        try:
            await ctx.run_entrypoint(entrypoint, on_ready=on_ready)
        finally:
            await ctx.run_shutdown_callbacks()
        if ctx.console_session is None:
            logger.warning("the entrypoint started no session: nothing to talk to")


@asynccontextmanager
async def _nothing() -> AsyncIterator[None]:
    yield
