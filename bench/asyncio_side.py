"""The asyncio side: the same fakes against LiveKit Agents' base classes, and the driver.

Configured as PERF-BASELINE describes: VAD end-of-turn detection, endpointing 0.5/3.0 (fixed),
VAD interruption with min_duration 0.05, no false-interruption resume, preemptive generation
off, AEC warm-up off, user-away timer off, recording off. Time is the event loop's clock
(``loop.time()``, monotonic).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from livekit import rtc
from livekit.agents import (
    NOT_GIVEN,
    Agent,
    AgentSession,
    APIConnectOptions,
    ChatContext,
    RunContext,
    function_tool,
    llm,
    stt,
    tts,
    vad,
)
from livekit.agents.types import DEFAULT_API_CONNECT_OPTIONS
from livekit.agents.voice.io import AudioInput, AudioOutput, AudioOutputCapabilities

from . import common, core
from .asyncio_arrivals import Arrivals, Network
from .core import (
    FRAME,
    IN_SAMPLES,
    LLM_TTFT,
    OUT_RATE,
    TOKEN_INTERVAL,
    Probe,
)


def now() -> float:
    return asyncio.get_running_loop().time()


async def sleep_until(deadline: float) -> None:
    await asyncio.sleep(max(0.0, deadline - now()))


# -- audio in / out --------------------------------------------------------------------------
class PacedInput(common.PacedFrames, AudioInput):
    """20 ms / 16 kHz frames at real-time pace: frame k is due at t0 + (k+1)·20 ms and comes
    from the fake network through an asyncio queue."""

    _AudioFrame = rtc.AudioFrame

    def __init__(self, probe: Probe, network: Network) -> None:
        super().__init__(label="bench")
        self.probe = probe
        self.network = network
        self.started = asyncio.Event()
        self.frames = core.InputFrames(probe)
        self.closed = False
        self._queue: asyncio.Queue[rtc.AudioFrame] = asyncio.Queue()
        self._put = self._queue.put_nowait

    async def __anext__(self) -> rtc.AudioFrame:
        if self.probe.t0 is None:
            self._first_pull(now())
        return await self._queue.get()


class RealtimeSink(AudioOutput):
    """A non-blocking sink with a real-time playout clock; ``clear_buffer`` ends playback at
    once. Records the first frame of each reply and every clear."""

    def __init__(self, probe: Probe, arrivals: Arrivals) -> None:
        super().__init__(label="bench", capabilities=AudioOutputCapabilities(pause=False),
                         sample_rate=OUT_RATE)
        self.probe = probe
        self._arrivals = arrivals   # the end of playout arrives as the room's event would
        self._capturing = False
        self._pushed = 0.0
        self._started_at = 0.0
        self._reply = -1
        self._playout_end: list[Any] | None = None   # its arrival, while one is due

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await super().capture_frame(frame)
        if not self._capturing:
            self._capturing = True
            self._pushed = 0.0
            t = now()
            self._started_at = t
            self._reply = common.sink_first_frame(self.probe, frame.data[0], t)
            self.on_playback_started(created_at=time.time())
        self._pushed += frame.duration
        self.probe.frames_out += 1

    def flush(self) -> None:
        super().flush()
        if not self._capturing:
            return
        self._capturing = False
        pushed = self._pushed
        self._playout_end = self._arrivals.at(self._started_at + pushed,
                                              lambda: self._finished(pushed))

    def _finished(self, pushed: float) -> None:
        self._playout_end = None
        self.on_playback_finished(playback_position=pushed, interrupted=False)

    def clear_buffer(self) -> None:
        t = now()
        self.probe.clears.append((t, self._reply))
        if not self._capturing and self._playout_end is None:
            return
        if self._playout_end is not None:
            self._arrivals.cancel(self._playout_end)
            self._playout_end = None
        self._capturing = False
        played = min(self._pushed, max(0.0, t - self._started_at))
        self.on_playback_finished(playback_position=played, interrupted=True)


# -- models ----------------------------------------------------------------------------------
class _VADStream(vad.VADStream):
    def __init__(self, v: BenchVAD, probe: Probe) -> None:
        self.core = core.VadCore(probe, now)
        super().__init__(v)

    async def _main_task(self) -> None:
        c = self.core
        send = self._event_ch.send_nowait
        INF, START, END = (vad.VADEventType.INFERENCE_DONE, vad.VADEventType.START_OF_SPEECH,
                           vad.VADEventType.END_OF_SPEECH)
        async for frame in self._input_ch:
            if not isinstance(frame, rtc.AudioFrame):
                continue
            event, speaking, speech, silence = c.process(frame.data[0])
            ts = c.n * FRAME
            send(vad.VADEvent(type=INF, samples_index=c.n * IN_SAMPLES, timestamp=ts,
                              speech_duration=speech * FRAME, silence_duration=silence * FRAME,
                              frames=[frame], probability=1.0 if speaking else 0.0,
                              speaking=speaking, raw_accumulated_silence=silence * FRAME,
                              raw_accumulated_speech=speech * FRAME))
            if event == 1:
                c.threshold_emitted()
                send(vad.VADEvent(type=START, samples_index=c.n * IN_SAMPLES, timestamp=ts,
                                  speech_duration=speech * FRAME, silence_duration=0.0,
                                  speaking=True))
            elif event == 2:
                send(vad.VADEvent(type=END, samples_index=c.n * IN_SAMPLES, timestamp=ts,
                                  speech_duration=speech * FRAME,
                                  silence_duration=silence * FRAME, speaking=False))
                c.ended()


class BenchVAD(vad.VAD):
    def __init__(self, probe: Probe) -> None:
        super().__init__(capabilities=vad.VADCapabilities(update_interval=FRAME))
        self.probe = probe

    def stream(self) -> vad.VADStream:
        return _VADStream(self, self.probe)


class _STTStream(stt.RecognizeStream):
    def __init__(self, s: BenchSTT, probe: Probe, conn_options: APIConnectOptions) -> None:
        self.core = core.SttCore(probe, now)
        super().__init__(stt=s, conn_options=conn_options)

    async def _run(self) -> None:
        c = self.core
        async for frame in self._input_ch:
            if not isinstance(frame, rtc.AudioFrame):
                continue
            text = c.process(frame.data[0])
            if text is not None:
                self._event_ch.send_nowait(stt.SpeechEvent(
                    type=stt.SpeechEventType.FINAL_TRANSCRIPT,
                    alternatives=[stt.SpeechData(language="en", text=text, confidence=1.0)]))


class BenchSTT(stt.STT):
    def __init__(self, probe: Probe) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=True, interim_results=False,
                                                          offline_recognize=False))
        self.probe = probe

    async def _recognize_impl(self, buffer: Any, *, language: Any = NOT_GIVEN,
                              conn_options: APIConnectOptions) -> stt.SpeechEvent:
        raise NotImplementedError

    def stream(self, *, language: Any = NOT_GIVEN,
               conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
               ) -> stt.RecognizeStream:
        return _STTStream(self, self.probe, conn_options)


class _LLMStream(llm.LLMStream):
    def __init__(self, model: BenchLLM, probe: Probe, *, chat_ctx: llm.ChatContext,
                 tools: list, conn_options: APIConnectOptions) -> None:
        super().__init__(model, chat_ctx=chat_ctx, tools=tools, conn_options=conn_options)
        self.probe = probe
        self.until = model.arrivals.until

    async def _run(self) -> None:
        probe = self.probe
        reply, started = common.llm_begin(probe, self._chat_ctx.items, now)
        if reply is None:
            return
        r = reply.index
        done = False
        try:
            toks = core.tokens(reply.text)
            for i, tok in enumerate(toks):
                await self.until(started + LLM_TTFT + i * TOKEN_INTERVAL)
                if i == 0:
                    probe.llm_first_token[r] = now()
                self._event_ch.send_nowait(llm.ChatChunk(
                    id=f"r{r}", delta=llm.ChoiceDelta(role="assistant", content=tok)))
            if reply.tool:
                await self.until(started + LLM_TTFT + len(toks) * TOKEN_INTERVAL)
                self._event_ch.send_nowait(llm.ChatChunk(
                    id=f"r{r}", delta=llm.ChoiceDelta(role="assistant", tool_calls=[
                        llm.FunctionToolCall(name=reply.tool, arguments="{}",
                                             call_id=f"call_{r}")])))
            done = True
        finally:
            if not done:
                probe.llm_cancelled[r] = now()


class BenchLLM(llm.LLM):
    """ttft 0.2 s, then a 4-char token every 20 ms; a tool call after the text if scripted."""

    def __init__(self, probe: Probe, arrivals: Arrivals) -> None:
        super().__init__()
        self.probe = probe
        self.arrivals = arrivals

    def chat(self, *, chat_ctx: llm.ChatContext, tools: list | None = None,
             conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
             parallel_tool_calls: Any = NOT_GIVEN, tool_choice: Any = NOT_GIVEN,
             extra_kwargs: Any = NOT_GIVEN) -> llm.LLMStream:
        return _LLMStream(self, self.probe, chat_ctx=chat_ctx, tools=tools or [],
                          conn_options=conn_options)


class _TTSStream(tts.SynthesizeStream):
    def __init__(self, model: BenchTTS, probe: Probe, conn_options: APIConnectOptions) -> None:
        super().__init__(tts=model, conn_options=conn_options)
        self.probe = probe
        self.until = model.arrivals.until

    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        probe = self.probe
        output_emitter.initialize(request_id="bench", sample_rate=OUT_RATE, num_channels=1,
                                  mime_type="audio/pcm", frame_size_ms=20, stream=True)
        output_emitter.start_segment(segment_id="bench")
        c = core.TtsCore()
        r = -1
        buf = b""
        done = False
        try:
            async for chunk in self._input_ch:
                if not isinstance(chunk, str):
                    continue
                c.add_text(chunk)
                if r < 0:
                    self._mark_started()
                    r, buf = common.tts_first_text(probe, c, now)
                while True:
                    n, ready = c.next_chunk()
                    if not n:
                        break
                    if ready > now():
                        await self.until(ready)
                    if r not in probe.tts_first_audio:
                        probe.tts_first_audio[r] = now()
                    c.emitted += n
                    for _ in range(n):
                        output_emitter.push(buf)
            done = True
        finally:
            if not done and r >= 0:
                probe.tts_cancelled[r] = now()


class BenchTTS(tts.TTS):
    """Streaming: the first audio 0.1 s after the first text, then audio for each text chunk
    as it arrives (20 ms frames, 24 kHz)."""

    def __init__(self, probe: Probe, arrivals: Arrivals) -> None:
        super().__init__(capabilities=tts.TTSCapabilities(streaming=True),
                         sample_rate=OUT_RATE, num_channels=1)
        self.probe = probe
        self.arrivals = arrivals

    def synthesize(self, text: str, *, conn_options: APIConnectOptions =
                   DEFAULT_API_CONNECT_OPTIONS) -> tts.ChunkedStream:
        raise NotImplementedError

    def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
               ) -> tts.SynthesizeStream:
        return _TTSStream(self, self.probe, conn_options)


# -- agents ----------------------------------------------------------------------------------
class Billing(common.BillingAgent, Agent):
    _now = staticmethod(now)


class FrontDesk(common.FrontDeskAgent, Agent):
    _now = staticmethod(now)
    _Billing = Billing
    _ChatContext = ChatContext
    _function_tool = staticmethod(function_tool)

    @function_tool
    async def transfer_to_billing(self, context: RunContext):
        """Transfer the user to the billing agent."""
        return self._transfer()


class Warmup(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="warm-up")


def make_session(probe: Probe, network: Network, *, transforms: bool
                 ) -> tuple[AgentSession, PacedInput]:
    session = AgentSession(
        vad=BenchVAD(probe), stt=BenchSTT(probe), llm=BenchLLM(probe, network.arrivals),
        tts=BenchTTS(probe, network.arrivals),
        turn_handling={
            "turn_detection": "vad",
            "endpointing": {"mode": "fixed", "min_delay": core.MIN_DELAY,
                            "max_delay": core.MAX_DELAY},
            "interruption": {"mode": "vad", "min_duration": core.INTERRUPT_MIN_DURATION,
                             "resume_false_interruption": False},
            "preemptive_generation": {"enabled": False},
        },
        tts_text_transforms=NOT_GIVEN if transforms else None,
        aec_warmup_duration=None,
        user_away_timeout=None,
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
        async with asyncio.timeout(probe.script.close_at + slack):
            session, inp = make_session(probe, network, transforms=transforms)
            if on_session is not None:
                on_session(session)
            t = now()
            await session.start(agent if agent is not None else FrontDesk(
                    probe, history=history, extra_tools=extra_tools), record=False)
            probe.start_latency = now() - t
            try:
                await inp.started.wait()
                assert probe.t0 is not None
                await sleep_until(probe.t0 + probe.script.close_at)
            finally:
                inp.close()                 # the user hangs up: no more frames
                t = now()
                await session.aclose()
                probe.close_latency = now() - t
    except TimeoutError:
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
    tasks = []
    for i, probe in enumerate(probes):
        await sleep_until(t_start + (spread * i / n if n else 0.0))
        tasks.append(asyncio.create_task(run_session(
            probe, network, transforms=transforms, history=history, extra_tools=extra_tools)))
        if on_spawned is not None:
            on_spawned()
    await asyncio.gather(*tasks)


async def run_network_only(probes: list[Probe], network: Network, *, spread: float) -> None:
    """The fake network alone (``common.run_network_only``): inputs with no session."""
    await common.run_network_only(probes, network, spread=spread, now=now,
                                  sleep_until=sleep_until, new_event=asyncio.Event,
                                  audio_frame=rtc.AudioFrame)


async def warm_up(network: Network) -> None:
    probe = Probe(index=0, script=core.warmup_script())
    await run_session(probe, network, transforms=True, agent=Warmup())


def runtime_info() -> dict:
    from livekit.agents import __version__
    return {"runtime": "livekit-agents", "version": __version__}
