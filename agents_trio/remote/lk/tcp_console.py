"""LiveKit's TCP console protocol, agent side: the session's audio I/O carried on the same
``AgentSessionMessage`` connection as the requests and events.

As LiveKit's ``TcpAudioInput``/``TcpAudioOutput`` (``livekit.agents.cli.tcp_console``) do it:
the agent dials the console server (``--connect-addr HOST:PORT``); the console sends the
microphone as ``audio_input`` frames (48 kHz mono PCM16) and answers each
``audio_playback_flush`` with ``audio_playback_finished`` once it has played the segment; the
agent sends its voice as ``audio_output`` frames at 48 kHz, ``audio_playback_flush`` at the end
of a segment and ``audio_playback_clear`` to cut it. The session itself runs at 24 kHz.

Limits: microphone frames queue up to ``max_buffered_frames`` (more are dropped and counted,
as are frames that are not mono PCM16 of the length they announce); the agent's frames go
through the connection's bounded outbox (a console that does not read loses audio, counted
as dropped events, and a flushed segment it never confirms ends when the connection does).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import trio
from livekit import rtc

from ...events import PlaybackFinishedEvent
from ...io.audio import AudioInput, AudioOutput
from .codec import pb

WIRE_SAMPLE_RATE = 48000
AGENT_SAMPLE_RATE = 24000

if TYPE_CHECKING:
    from ...session import AgentSession

_Frame = pb.AgentSessionMessage.ConsoleIO.AudioFrame
_Sink = Callable[[pb.AgentSessionMessage], None]


class ConsoleAudioInput(AudioInput):
    """The console's microphone, resampled to 24 kHz."""

    def __init__(self, *, max_buffered_frames: int = 500) -> None:
        self.sample_rate = AGENT_SAMPLE_RATE
        self._send, self._recv = trio.open_memory_channel[rtc.AudioFrame](max_buffered_frames)
        self._resamplers: dict[int, rtc.AudioResampler] = {}
        self.frames_received = 0
        self.frames_dropped = 0
        self.frames_invalid = 0

    def push_frame(self, frame: _Frame) -> None:
        """Take one ``audio_input`` frame (never blocks)."""
        if frame.num_channels != 1 or not 8000 <= frame.sample_rate <= 192000 or \
                frame.samples_per_channel <= 0:
            self.frames_invalid += 1
            return
        try:
            audio = rtc.AudioFrame(frame.data, frame.sample_rate, 1, frame.samples_per_channel)
        except ValueError:
            self.frames_invalid += 1
            return
        self.frames_received += 1
        if frame.sample_rate == AGENT_SAMPLE_RATE:
            frames = [audio]
        else:
            resampler = self._resamplers.get(frame.sample_rate)
            if resampler is None:
                resampler = rtc.AudioResampler(frame.sample_rate, AGENT_SAMPLE_RATE,
                                               num_channels=1)
                self._resamplers[frame.sample_rate] = resampler
            frames = resampler.push(audio)
        for out in frames:
            try:
                self._send.send_nowait(out)
            except trio.WouldBlock:
                self.frames_dropped += 1
            except trio.ClosedResourceError:
                return

    def close(self) -> None:
        """End the input (the console went away)."""
        self._send.close()

    async def __anext__(self) -> rtc.AudioFrame:
        try:
            return await self._recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None


class ConsoleAudioOutput(AudioOutput):
    """The agent's voice, sent to the console at 48 kHz; playout is what the console says."""

    def __init__(self) -> None:
        super().__init__(sample_rate=AGENT_SAMPLE_RATE)
        self._sink: list[_Sink] = []
        self._resamplers: dict[int, rtc.AudioResampler] = {}
        self._pushed = 0.0
        self._started_at: float | None = None
        self._flushed = False
        self._done = trio.Event()
        self._last: PlaybackFinishedEvent | None = None
        self.frames_sent = 0

    def attach(self, sink: _Sink) -> None:
        """Send through ``sink`` (a console connection); nothing is sent until then."""
        self._sink = [sink]

    def detach(self) -> None:
        """The console went away: a segment waiting for its playout ends, interrupted."""
        self._sink = []
        if self._pushed:
            self._finish(interrupted=True, position=self._played())

    def _send(self, message: pb.AgentSessionMessage) -> None:
        for sink in self._sink:
            sink(message)

    def _played(self) -> float:
        if self._started_at is None:
            return 0.0
        return min(max(0.0, trio.current_time() - self._started_at), self._pushed)

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        """Cancellation: safe; the frame is either queued for the console or not at all."""
        await trio.lowlevel.checkpoint()
        if not self._pushed:
            self._started_at = trio.current_time()
            self.on_playback_started()
        self._pushed += frame.samples_per_channel / frame.sample_rate
        if frame.num_channels != 1:
            raise ValueError("the TCP console plays mono audio")
        resampler = self._resamplers.get(frame.sample_rate)
        if resampler is None:
            resampler = rtc.AudioResampler(frame.sample_rate, WIRE_SAMPLE_RATE, num_channels=1)
            self._resamplers[frame.sample_rate] = resampler
        for out in resampler.push(frame):
            self._send_frame(out)

    def _send_frame(self, frame: rtc.AudioFrame) -> None:
        self.frames_sent += 1
        self._send(pb.AgentSessionMessage(audio_output=_Frame(
            data=bytes(frame.data), sample_rate=WIRE_SAMPLE_RATE, num_channels=1,
            samples_per_channel=frame.samples_per_channel)))

    def flush(self) -> None:
        for resampler in self._resamplers.values():
            for out in resampler.flush():
                self._send_frame(out)
        self._send(pb.AgentSessionMessage(
            audio_playback_flush=pb.AgentSessionMessage.ConsoleIO.AudioPlaybackFlush()))
        if self._pushed:
            self._flushed = True
            if not self._sink:  # nobody to play it: done at once
                self._finish(interrupted=True, position=0.0)

    def clear_buffer(self) -> PlaybackFinishedEvent | None:
        self._send(pb.AgentSessionMessage(
            audio_playback_clear=pb.AgentSessionMessage.ConsoleIO.AudioPlaybackClear()))
        if not self._pushed:
            return None
        return self._finish(interrupted=True, position=self._played())

    def notify_playout_finished(self) -> None:
        """The console played the flushed segment."""
        if self._pushed and self._flushed:
            self._finish(interrupted=False, position=self._pushed)

    def _finish(self, *, interrupted: bool, position: float) -> PlaybackFinishedEvent:
        event = self.on_playback_finished(playback_position=position, interrupted=interrupted)
        self._last = event
        self._pushed = 0.0
        self._started_at = None
        self._flushed = False
        done, self._done = self._done, trio.Event()
        done.set()
        return event

    async def wait_for_playout(self) -> PlaybackFinishedEvent:
        """Wait until the console played the flushed segment (or it was cleared, or the
        console went away).

        Cancellation: only the wait ends; the segment plays on.
        """
        if not self._pushed:
            await trio.lowlevel.checkpoint()
            return self._last or PlaybackFinishedEvent(playback_position=0.0,
                                                       interrupted=False)
        done = self._done
        await done.wait()
        assert self._last is not None
        return self._last


class TcpConsoleIO:
    """The audio input and output of one console connection; :meth:`attach_to` makes them the
    session's (before ``session.start``)."""

    def __init__(self, *, max_buffered_frames: int = 500) -> None:
        self.input = ConsoleAudioInput(max_buffered_frames=max_buffered_frames)
        self.output = ConsoleAudioOutput()

    def attach_to(self, session: AgentSession) -> None:
        session.input.audio = self.input
        session.output.audio = self.output


class TcpConsole:
    """The console of ``python my_agent.py console --connect-addr HOST:PORT`` (what
    ``lk agent console`` runs) for an :class:`~agents_trio.AgentServer` agent: the served
    session's audio, requests and events go to the TCP console server there; the session
    closes when the console hangs up. (``agents_trio.console.ConsoleIO``.)"""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.io = TcpConsoleIO()

    @asynccontextmanager
    async def attach(self, session: AgentSession) -> AsyncIterator[None]:
        """The console's audio is the session's.

        Cancellation: not a checkpoint; nothing to undo.
        """
        self.io.attach_to(session)
        yield

    @asynccontextmanager
    async def serve(self, session: AgentSession) -> AsyncIterator[None]:
        """Dial the console server and serve the session on that connection for the block.

        Raises:
            OSError: The console server cannot be reached.

        Cancellation: leaving the block, cancelled or not, closes the connection.
        """
        from .host import open_session_host

        async with open_session_host(session, listeners=[]) as host, \
                trio.open_nursery() as nursery:
            async def serve_console() -> None:
                try:
                    await host.connect(self.host, self.port, console=self.io)
                finally:
                    session.shutdown(drain=False)  # the console hung up: done

            nursery.start_soon(serve_console)
            try:
                yield
            finally:
                nursery.cancel_scope.cancel()


async def run_console_agent(entrypoint_spec: str, connect_addr: str) -> int:
    """``python -m agents_trio console AGENT.py --connect-addr HOST:PORT``: run the agent
    file's entrypoint against the TCP console listening there, as a console job
    (``agents_trio.console``: ``ctx.run_session(session, agent)`` and
    ``session.start(agent, room=ctx.room)`` both serve the session to the console). Returns
    the exit status.

    Cancellation: cancelling it shuts the job down (its sessions close, the entrypoint gets
    its grace) and closes the bridge.
    """
    import sys

    from ...console import run_console
    from ...job import load_entrypoint

    host, sep, port = connect_addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        print(f"error: --connect-addr must be HOST:PORT, got {connect_addr!r}", file=sys.stderr)
        return 2
    try:
        entrypoint = load_entrypoint(entrypoint_spec)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        await run_console(entrypoint, TcpConsole(host.strip("[]"), int(port)))
    except OSError as e:
        print(f"error: cannot reach the console at {connect_addr}: {e}", file=sys.stderr)
        return 1
    return 0
