"""Our side: real-time fakes on agents_trio's model protocols, and the session driver.

All time comes from ``trio.current_time()``: the wall clock when the run uses Trio's system
clock (``python -m bench``), virtual time under ``MockClock`` (``python -m bench --virtual``).
"""

from __future__ import annotations

import heapq
import inspect
import itertools
import math
from contextlib import asynccontextmanager
from collections.abc import Callable
from typing import Any

import trio
from livekit import rtc

from agents_trio import (
    Agent,
    AgentSession,
    ChatChunk,
    ChatContext,
    FunctionToolCall,
    RunContext,
    SpeechData,
    SpeechEvent,
    SpeechEventType,
    VADEvent,
    VADEventType,
    function_tool,
)
from agents_trio.io.audio import AudioInput, AudioOutput
from agents_trio.io.frame_feed import FeedAttachment, FrameFeed
from agents_trio.text_transforms import DEFAULT as DEFAULT_TRANSFORMS
from agents_trio.nurseries import EndOfInput

from . import common, core, kernel_timer
from .core import (
    FRAME,
    LLM_TTFT,
    OUT_RATE,
    OUT_SAMPLES,
    TOKEN_INTERVAL,
    Probe,
)

now = trio.current_time

# -- audio in / out --------------------------------------------------------------------------
class Arrivals:
    """When the fakes' data arrives: the network's frames, the LLM's tokens, the TTS's audio
    and the end of the sink's playout.

    A real service's data reaches a Trio client through its socket: the task waits parked,
    and the I/O manager reschedules it when the bytes come. This models that: a fake waits for
    its next arrival parked on this object (``until``), or leaves a callback (``at``), and one
    task (``run``) wakes when the earliest is due and reschedules every waiter whose data has
    come. On Trio's system clock on Linux that task waits for a kernel timer to become
    readable (``bench/kernel_timer.py``), which Trio's I/O manager watches like a socket;
    under any other clock (the ``MockClock`` of ``--virtual`` and the tests) it waits on a
    cancel scope's deadline.

    ``trio.sleep_until`` in each fake would instead give every wait a cancel scope of its
    own and end it by raising ``Cancelled``: about 2.5× the Python calls of a wake-up by I/O
    (134 against 54 per wake-up, counted with ``sys.setprofile``), kept objects that young
    collections promote, and a cost no real client pays for its data. The asyncio sides
    wait the same way (``bench/asyncio_arrivals.py``).
    """

    def __init__(self) -> None:
        self._heap: list[list[Any]] = []   # [due, seq, task or callback, None once dropped]
        self._seq = itertools.count()
        self._timer: _FdTimer | _ScopeTimer | None = None   # chosen by ``run``
        self._armed = math.inf

    async def until(self, due: float) -> None:
        """Return when ``due`` comes: the data the caller waits for has arrived."""
        if due <= now():
            await trio.lowlevel.checkpoint()
            return
        entry = self._add(due, trio.lowlevel.current_task())

        def abandon(_: Any) -> trio.lowlevel.Abort:
            entry[2] = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abandon)

    def at(self, due: float, callback: Callable[[], object]) -> list[Any]:
        """Call ``callback`` (in the run task) when ``due`` comes; ``cancel`` the returned
        entry to drop it."""
        return self._add(due, callback)

    @staticmethod
    def cancel(entry: list[Any]) -> None:
        entry[2] = None

    def _add(self, due: float, waiter: Any) -> list[Any]:
        entry = [due, next(self._seq), waiter]
        heapq.heappush(self._heap, entry)
        if due < self._armed and self._timer is not None:
            self._armed = due
            self._timer.arm(due)
        return entry

    async def run(self) -> None:
        timer = self._timer = _FdTimer() if _kernel_timers() else _ScopeTimer()
        heap = self._heap
        try:
            if heap:
                self._armed = heap[0][0]
                timer.arm(self._armed)
            while True:
                await timer.wait()
                self._armed = math.inf
                t = now()
                while heap and heap[0][0] <= t:
                    waiter = heapq.heappop(heap)[2]
                    if isinstance(waiter, trio.lowlevel.Task):
                        trio.lowlevel.reschedule(waiter)
                    elif waiter is not None:
                        waiter()
                if heap:
                    self._armed = heap[0][0]
                    timer.arm(self._armed)
        finally:
            self._timer = None
            self._armed = math.inf
            timer.close()


def _kernel_timers() -> bool:
    """Kernel timers end the waits: on Linux, on Trio's own clock (monotonic time plus an
    offset, so a timer armed for the remaining time is due at the deadline)."""
    clock = type(trio.lowlevel.current_clock())
    return (kernel_timer.available() and clock.__name__ == "SystemClock"
            and clock.__module__.startswith("trio."))


class _FdTimer:
    """The arrivals' wake-up on a kernel timer, read by Trio's I/O manager."""

    def __init__(self) -> None:
        self._timer = kernel_timer.KernelTimer()

    def arm(self, due: float) -> None:
        self._timer.arm(kernel_timer.rounded_up(due - now()))

    async def wait(self) -> None:
        await trio.lowlevel.wait_readable(self._timer.fd)
        self._timer.consume()

    def close(self) -> None:
        self._timer.close()


class _ScopeTimer:
    """The arrivals' wake-up on a cancel scope's deadline (virtual time)."""

    def __init__(self) -> None:
        self._deadline = math.inf
        self._scope: trio.CancelScope | None = None

    def arm(self, due: float) -> None:
        self._deadline = due
        if self._scope is not None:
            self._scope.deadline = due

    async def wait(self) -> None:
        with trio.CancelScope(deadline=self._deadline) as self._scope:
            await trio.sleep_forever()
        self._scope = None
        self._deadline = math.inf

    def close(self) -> None:
        pass


class Network(common.Network):
    """The fake network (``common.Network``) on Trio: its frames and the fake services' data
    arrive through one ``Arrivals``."""

    def __init__(self) -> None:
        self.arrivals = Arrivals()
        super().__init__(trio.Event, self.arrivals.until, now)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.arrivals.run)
            await super().run()


class PacedInput(common.PacedFrames, AudioInput):
    """20 ms / 16 kHz frames at real-time pace: frame k is due at t0 + (k+1)·20 ms and comes
    from the fake network through its feed."""

    _AudioFrame = rtc.AudioFrame

    def __init__(self, probe: Probe, network: Network) -> None:
        self.probe = probe
        self.network = network
        self.started = trio.Event()
        self.frames = core.InputFrames(probe)
        self.closed = False
        # the session attaches to the feed (agents_trio's push path, as the room's input
        # offers): the network hands each frame to the session in the network's own step
        self.feed = _PacedFeed(self)
        self._put = self.feed.put_nowait

    def start_taking(self) -> None:
        """The session takes its first frame (attaches, or pulls): time zero."""
        if self.probe.t0 is None:
            self._first_pull(now())

    async def __anext__(self) -> rtc.AudioFrame:
        self.start_taking()
        try:
            return await self.feed.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


class _PacedFeed(FrameFeed[rtc.AudioFrame]):
    """A paced input's feed: attaching to it is the session's first take (time zero)."""

    def __init__(self, inp: PacedInput) -> None:
        super().__init__()
        self._inp = inp

    def attach(self, attachment: FeedAttachment[rtc.AudioFrame]) -> None:
        self._inp.start_taking()
        super().attach(attachment)


class RealtimeSink(AudioOutput):
    """A non-blocking sink with a real-time playout clock; ``clear_buffer`` ends playback at
    once. Records the first frame of each reply and every clear."""

    def __init__(self, probe: Probe, arrivals: Arrivals) -> None:
        super().__init__(sample_rate=OUT_RATE)
        self.probe = probe
        self._arrivals = arrivals   # the end of playout arrives as the room's event would
        self._changed = trio.Event()
        self._finished = None
        self._reset()

    def _reset(self) -> None:
        self._capturing = False
        self._pushed = 0.0
        self._started_at: float | None = None
        self._flushed = False
        self._reply = -1

    def _wake(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        if not self._capturing:
            self._reset()
            self._finished = None
            self._capturing = True
            t = now()
            self._started_at = t
            self._reply = common.sink_first_frame(self.probe, frame.data[0], t)
            self.on_playback_started(created_at=t)
        self._pushed += frame.duration
        self.probe.frames_out += 1

    def flush(self) -> None:
        self._flushed = True
        self._wake()

    def _finish(self, position: float, interrupted: bool):
        ev = self.on_playback_finished(playback_position=position, interrupted=interrupted)
        self._finished = ev
        self._capturing = False
        self._wake()
        return ev

    def clear_buffer(self):
        t = now()
        self.probe.clears.append((t, self._reply))
        if not self._capturing or self._started_at is None:
            return None
        played = min(self._pushed, max(0.0, t - self._started_at))
        return self._finish(played, interrupted=True)

    async def wait_for_playout(self):
        while True:
            ev = self._finished
            if ev is not None:
                self._finished = None
                return ev
            changed = self._changed
            if self._flushed and self._started_at is not None:
                end = self._started_at + self._pushed
                if end <= now():
                    self._finish(self._pushed, interrupted=False)
                    continue
                entry = self._arrivals.at(end, self._wake)
                try:
                    await changed.wait()
                finally:
                    self._arrivals.cancel(entry)
            else:
                await changed.wait()


# -- models ----------------------------------------------------------------------------------
class _VADStream:
    """Inference inside ``push_frame``, whose events it returns (the runtime's protocol lets
    a synchronous VAD hand them over there); the iteration only ends with the input."""

    def __init__(self, probe: Probe) -> None:
        self.core = core.VadCore(probe, now)
        self._end = EndOfInput()   # as agents_trio's own SileroVAD stream iterates

    def push_frame(self, frame: rtc.AudioFrame) -> list[VADEvent]:
        c = self.core
        event, speaking, speech, silence = c.process(frame.data[0])
        out = [VADEvent(
            type=VADEventType.INFERENCE_DONE, speech_duration=speech * FRAME,
            silence_duration=silence * FRAME, speaking=speaking,
            probability=1.0 if speaking else 0.0)]
        if event == 1:
            c.threshold_emitted()
            out.append(VADEvent(type=VADEventType.START_OF_SPEECH,
                                speech_duration=speech * FRAME, speaking=True))
        elif event == 2:
            out.append(VADEvent(type=VADEventType.END_OF_SPEECH,
                                speech_duration=speech * FRAME,
                                silence_duration=silence * FRAME))
            c.ended()
        return out

    def end_input(self) -> None:
        self._end.end()

    def __aiter__(self):
        return self._end


class BenchVAD:
    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    @asynccontextmanager
    async def stream(self):
        s = _VADStream(self.probe)
        try:
            yield s
        finally:
            s.end_input()


class _STTStream:
    def __init__(self, probe: Probe) -> None:
        self.core = core.SttCore(probe, now)
        self._send, self._recv = trio.open_memory_channel[SpeechEvent](math.inf)

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        text = self.core.process(frame.data[0])
        if text is not None:
            self._send.send_nowait(SpeechEvent(type=SpeechEventType.FINAL_TRANSCRIPT,
                                               alternatives=[SpeechData(text=text)]))

    def end_input(self) -> None:
        self._send.close()

    def __aiter__(self):
        return self._recv.__aiter__()


class BenchSTT:
    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    @asynccontextmanager
    async def stream(self):
        s = _STTStream(self.probe)
        try:
            yield s
        finally:
            s.end_input()


class BenchLLM:
    """ttft 0.2 s, then a 4-char token every 20 ms; a tool call after the text if scripted."""

    def __init__(self, probe: Probe, arrivals: Arrivals) -> None:
        self.probe = probe
        self.arrivals = arrivals

    @asynccontextmanager
    async def chat(self, *, chat_ctx: Any, tools: Any = None, tool_choice: Any = None):
        yield self._stream(chat_ctx)

    async def _stream(self, chat_ctx: Any):
        probe = self.probe
        reply, started = common.llm_begin(probe, chat_ctx.items, now)
        if reply is None:
            return
        r = reply.index
        until = self.arrivals.until
        done = False
        try:
            toks = core.tokens(reply.text)
            for i, tok in enumerate(toks):
                await until(started + LLM_TTFT + i * TOKEN_INTERVAL)
                if i == 0:
                    probe.llm_first_token[r] = now()
                yield ChatChunk(content=tok)
            if reply.tool:
                await until(started + LLM_TTFT + len(toks) * TOKEN_INTERVAL)
                yield ChatChunk(tool_calls=[FunctionToolCall(
                    name=reply.tool, arguments="{}", call_id=f"call_{r}")])
            done = True
        finally:
            if not done:
                probe.llm_cancelled[r] = now()


class BenchTTS:
    """Streaming: the first audio 0.1 s after the first text, then audio for each text chunk
    as it arrives (20 ms frames, 24 kHz)."""

    sample_rate = OUT_RATE
    num_channels = 1

    def __init__(self, probe: Probe, arrivals: Arrivals) -> None:
        self.probe = probe
        self.arrivals = arrivals

    @asynccontextmanager
    async def stream(self, text: Any):
        yield self._synthesize(text)

    async def _synthesize(self, text: Any):
        probe = self.probe
        until = self.arrivals.until
        tts = core.TtsCore()
        r = -1
        buf = b""
        done = False
        try:
            async for chunk in text:
                tts.add_text(chunk)
                if r < 0:
                    r, buf = common.tts_first_text(probe, tts, now)
                while True:
                    n, ready = tts.next_chunk()
                    if not n:
                        break
                    if ready > now():
                        await until(ready)
                    if r not in probe.tts_first_audio:
                        probe.tts_first_audio[r] = now()
                    tts.emitted += n
                    for _ in range(n):
                        yield rtc.AudioFrame(buf, OUT_RATE, 1, OUT_SAMPLES)
            done = True
        finally:
            if not done and r >= 0:
                probe.tts_cancelled[r] = now()


# -- agents ----------------------------------------------------------------------------------
class Billing(common.BillingAgent, Agent):
    _now = staticmethod(now)


class FrontDesk(common.FrontDeskAgent, Agent):
    _now = staticmethod(now)
    _Billing = Billing
    _ChatContext = ChatContext
    _function_tool = staticmethod(function_tool)

    @function_tool
    async def transfer_to_billing(self, ctx: RunContext):
        """Transfer the user to the billing agent."""
        return self._transfer()


class Warmup(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="warm-up")


def _off_switches() -> dict[str, Any]:
    """AEC warm-up and the user-away timer off, as on the asyncio side (when this version of
    agents_trio has them)."""
    params = inspect.signature(AgentSession.__init__).parameters
    return {k: None for k in ("aec_warmup_duration", "user_away_timeout") if k in params}


_OFF = _off_switches()


def make_session(probe: Probe, network: Network, *, transforms: bool
                 ) -> tuple[AgentSession, PacedInput]:
    session = AgentSession(
        vad=BenchVAD(probe), stt=BenchSTT(probe), llm=BenchLLM(probe, network.arrivals),
        tts=BenchTTS(probe, network.arrivals),
        turn_handling={
            "turn_detection": "vad",
            "endpointing": {"min_delay": core.MIN_DELAY, "max_delay": core.MAX_DELAY},
            "interruption": {"min_duration": core.INTERRUPT_MIN_DURATION,
                             "resume_false_interruption": False},
            "preemptive_generation": {"enabled": False},
        },
        tts_text_transforms=DEFAULT_TRANSFORMS if transforms else None,
        **_OFF,
    )
    inp = PacedInput(probe, network)
    session.input.audio = inp
    session.output.audio = RealtimeSink(probe, network.arrivals)
    return session, inp


async def run_session(probe: Probe, network: Network, *, transforms: bool,
                      agent: Agent | None = None, slack: float = 30.0,
                      on_session: Any = None, history: int = 0, extra_tools: int = 0) -> None:
    """One scripted session, start to close; failures are recorded on the probe. The
    front desk starts with ``history`` earlier messages and ``extra_tools`` unused tools."""
    probe.started_at = now()
    inp = None
    try:
        with trio.fail_after(probe.script.close_at + slack):
            session, inp = make_session(probe, network, transforms=transforms)
            if on_session is not None:
                on_session(session)
            async with session:
                t = now()
                await session.start(agent if agent is not None else FrontDesk(
                    probe, history=history, extra_tools=extra_tools))
                probe.start_latency = now() - t
                await inp.started.wait()
                assert probe.t0 is not None
                await trio.sleep_until(probe.t0 + probe.script.close_at)
                inp.close()                 # the user hangs up: no more frames
                t = now()
                await session.aclose()
                probe.close_latency = now() - t
    except trio.TooSlowError:
        probe.error = "timeout"
    except Exception as e:  # noqa: BLE001 - a failed session is a result
        probe.error = f"{type(e).__name__}: {e}"[:300]
    finally:
        if inp is not None:
            inp.close()
    probe.ended_at = now()


async def run_phase(probes: list[Probe], network: Network, *, spread: float, transforms: bool,
                    on_spawned: Any = None, history: int = 0, extra_tools: int = 0) -> None:
    """Start the sessions spread over ``spread`` seconds; return when all have closed."""
    t_start = now()
    n = len(probes)
    async with trio.open_nursery() as nursery:
        for i, probe in enumerate(probes):
            await trio.sleep_until(t_start + (spread * i / n if n else 0.0))
            nursery.start_soon(lambda p=probe: run_session(
                p, network, transforms=transforms, history=history, extra_tools=extra_tools))
            if on_spawned is not None:
                on_spawned()


async def run_network_only(probes: list[Probe], network: Network, *, spread: float) -> None:
    """The fake network alone (``common.run_network_only``): inputs with no session."""
    await common.run_network_only(probes, network, spread=spread, now=now,
                                  sleep_until=trio.sleep_until, new_event=trio.Event,
                                  audio_frame=rtc.AudioFrame)


async def warm_up(network: Network) -> None:
    probe = Probe(index=0, script=core.warmup_script())
    await run_session(probe, network, transforms=True, agent=Warmup())


def runtime_info() -> dict:
    import agents_trio
    return {"runtime": "agents_trio", "trio": trio.__version__,
            "version": getattr(agents_trio, "__version__", "0.1.0")}
