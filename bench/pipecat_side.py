"""The Pipecat side: the same fakes on Pipecat's own base classes, and the driver.

Each session is what a Pipecat bot is by default: ``Pipeline([input, stt, user aggregator,
llm, tts, output, assistant aggregator])`` run by a ``PipelineWorker`` with default
``PipelineParams`` (RTVI on, turn tracking on, metrics off) in its own ``WorkerRunner``.
The fakes:

* ``PacedInput`` (``BaseInputTransport``): the fake network's 20 ms / 16 kHz frames, pushed
  with ``push_audio_frame`` from a receive task, as a network transport does;
* ``BenchVAD`` (``VADAnalyzer``, inside the user aggregator as Pipecat 1.x places it): voice
  confidence from the samples; ``VADParams`` set to the same 0.06 s start / 0.30 s stop;
* ``BenchSTT`` (``STTService``): a finalized transcript 0.2 s after the speech ends;
* ``BenchLLM`` (``LLMService``): ttft 0.2 s, then a 4-char token every 20 ms, a tool call
  through ``run_function_calls``;
* ``BenchTTS`` (``TTSService``, shaped like Pipecat's websocket TTS services): text goes to a
  synthesis task per audio context, audio comes back through ``append_to_audio_context``;
* ``RealtimeSink`` (``BaseOutputTransport``): paces ``write_audio_frame`` on a real-time
  clock the way Pipecat's websocket transport does, and records every interruption.

Turn detection: Pipecat's default start strategies (VAD, then transcription); its default stop
strategy is the Smart Turn model, which has no counterpart in the other two runtimes' VAD +
fixed-endpointing configuration, so the stop strategy here is Pipecat's
``SpeechTimeoutUserTurnStopStrategy`` with 0.2 s after the VAD's 0.3 s stop: end of turn 0.5 s
after the speech, as on the other sides. Interruptions are Pipecat's default: a user turn that
starts broadcasts an ``InterruptionFrame``. Text reaches the TTS token by token (``TOKEN``
mode) with transforms off and sentence by sentence (``SENTENCE``, Pipecat's default) with
them on. Pipecat has no agent handoff: the transfer tool is a registered function that adds
a developer message to the context and asks for no further inference; the handoff latency
has no counterpart. Time is the event loop's clock.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass, fields
from typing import Any, TypeVar

from loguru import logger
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.audio.vad.vad_analyzer import VADAnalyzer, VADParams, VADState
from pipecat.frames.frames import (
    EndFrame,
    Frame,
    FunctionCallFromLLM,
    FunctionCallResultProperties,
    InputAudioRawFrame,
    InterruptionFrame,
    LLMContextFrame,
    LLMFullResponseEndFrame,
    LLMFullResponseStartFrame,
    OutputAudioRawFrame,
    StartFrame,
    TranscriptionFrame,
    TTSAudioRawFrame,
    TTSStoppedFrame,
)
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.aggregators.llm_context import LLMContext
from pipecat.processors.aggregators.llm_response_universal import (
    LLMContextAggregatorPair,
    LLMUserAggregatorParams,
)
from pipecat.processors.frame_processor import FrameDirection
from pipecat.services.llm_service import FunctionCallParams, LLMService
from pipecat.services.settings import LLMSettings, ServiceSettings, STTSettings, TTSSettings
from pipecat.services.stt_service import STTService
from pipecat.services.tts_service import TextAggregationMode, TTSService
from pipecat.transports.base_input import BaseInputTransport
from pipecat.transports.base_output import BaseOutputTransport
from pipecat.transports.base_transport import TransportParams
from pipecat.turns.user_stop import SpeechTimeoutUserTurnStopStrategy
from pipecat.turns.user_turn_strategies import UserTurnStrategies
from pipecat.utils.time import time_now_iso8601
from pipecat.workers.runner import WorkerRunner

from . import common, core
from .asyncio_arrivals import Arrivals, Network
from .core import (
    FRAME,
    IN_RATE,
    IN_SAMPLES,
    LLM_TTFT,
    MIN_DELAY,
    OUT_RATE,
    REPLY_BASE,
    STT_FINAL_FRAMES,
    TOKEN_INTERVAL,
    TRANSFER_TOOL,
    VAD_END_FRAMES,
    VAD_START_FRAMES,
    Probe,
)


def now() -> float:
    return asyncio.get_running_loop().time()


async def sleep_until(deadline: float) -> None:
    await asyncio.sleep(max(0.0, deadline - now()))


_S = TypeVar("_S", bound=ServiceSettings)


def settings(cls: type[_S], **given: Any) -> _S:
    """A service's settings with every field given (None: the fake has no such setting), as
    Pipecat asks of a service's ``__init__``."""
    values: dict[str, Any] = {f.name: None for f in fields(cls) if f.name != "extra"}
    values.update(given)
    return cls(**values)


def first_sample(audio: bytes) -> int:
    """The first 16-bit sample: what the fakes read the script from."""
    return int.from_bytes(audio[:2], "little", signed=True)


def last_user_text(messages: list[Any]) -> tuple[str | None, bool]:
    """(text of the last user message, whether a tool result follows it) in an
    ``LLMContext``'s messages (OpenAI-shaped dicts)."""
    tool_after = False
    for m in reversed(messages):
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if role == "tool":
            tool_after = True
        elif role == "user":
            content = m.get("content")
            if isinstance(content, list):
                content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
            return content, tool_after
    return None, tool_after


# -- logs ------------------------------------------------------------------------------------
class LogCounter:
    """Counts Pipecat's (loguru's) warnings and errors instead of printing every debug line;
    the stdlib loggers of the other two sides are set to WARNING the same way."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.first: list[str] = []

    def __call__(self, message: Any) -> None:
        record = message.record
        key = f"{record['level'].name} {record['name']}"
        self.counts[key] = self.counts.get(key, 0) + 1
        if len(self.first) < 10:
            self.first.append(f"{key}: {record['message'][:200]}")


def quiet_logs(counter: LogCounter | None = None) -> None:
    logger.remove()
    if counter is not None:
        logger.add(counter, level="WARNING")


# -- audio in / out --------------------------------------------------------------------------
def _input_frame(data: bytes, rate: int, channels: int, _samples: int) -> InputAudioRawFrame:
    return InputAudioRawFrame(audio=data, sample_rate=rate, num_channels=channels)


class PacedInput(common.PacedFrames, BaseInputTransport):
    """20 ms / 16 kHz frames at real-time pace: frame k is due at t0 + (k+1)·20 ms and comes
    from the fake network through an asyncio queue; a receive task hands each to
    ``push_audio_frame``, as Pipecat's network transports do."""

    _AudioFrame = staticmethod(_input_frame)

    def __init__(self, probe: Probe, network: Network) -> None:
        super().__init__(TransportParams(audio_in_enabled=True, audio_in_sample_rate=IN_RATE))
        self.probe = probe
        self.network = network
        self.started = asyncio.Event()
        self.frames = core.InputFrames(probe)
        self.closed = False
        self._queue: asyncio.Queue[InputAudioRawFrame] = asyncio.Queue()
        self._put = self._queue.put_nowait
        self._receive_task: asyncio.Task | None = None

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        if self._receive_task is None:
            self._receive_task = self.create_task(self._receive())
        await self.set_transport_ready(frame)

    async def _receive(self) -> None:
        self._first_pull(now())
        get = self._queue.get
        push = self.push_audio_frame
        while True:
            await push(await get())

    async def _stop_receiving(self) -> None:
        self.close()
        if self._receive_task is not None:
            await self.cancel_task(self._receive_task)
            self._receive_task = None

    async def stop(self, frame: EndFrame) -> None:
        await super().stop(frame)
        await self._stop_receiving()

    async def cancel(self, frame: Any) -> None:
        await super().cancel(frame)
        await self._stop_receiving()

    async def cleanup(self) -> None:
        await super().cleanup()
        await self._stop_receiving()


class RealtimeSink(BaseOutputTransport):
    """An output transport with a real-time playout clock: ``write_audio_frame`` returns when
    the chunk's slot comes, as Pipecat's websocket transport paces it. Records the first
    chunk of each reply and every interruption it handles (the ``clear_buffer`` of the other
    two sides: the queued audio is dropped here)."""

    def __init__(self, probe: Probe) -> None:
        super().__init__(TransportParams(audio_out_enabled=True, audio_out_sample_rate=OUT_RATE))
        self.probe = probe
        self._next_send = 0.0
        self._reply = -1

    async def start(self, frame: StartFrame) -> None:
        await super().start(frame)
        await self.set_transport_ready(frame)

    async def write_audio_frame(self, frame: OutputAudioRawFrame) -> bool:
        t = now()
        value = first_sample(frame.audio)
        if value >= REPLY_BASE:
            self._reply = common.sink_first_frame(self.probe, value, t)
        self.probe.frames_out += 1
        duration = len(frame.audio) / (2 * frame.num_channels * frame.sample_rate)
        if self._next_send <= t:
            self._next_send = t + duration
        else:
            await asyncio.sleep(self._next_send - t)
            self._next_send += duration
        return True

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, InterruptionFrame):
            self.probe.clears.append((now(), self._reply))
            self._next_send = 0.0


# -- models ----------------------------------------------------------------------------------
class BenchVAD(VADAnalyzer):
    """Voice confidence 1 for a speech frame, 0 for silence; Pipecat's own state machine turns
    that into start (3 frames) and stop (15 frames). Records the threshold and end events when
    ``analyze_audio`` hands the new state back to the event loop."""

    def __init__(self, probe: Probe) -> None:
        super().__init__(sample_rate=IN_RATE, params=VADParams(
            confidence=0.5, start_secs=VAD_START_FRAMES * FRAME,
            stop_secs=VAD_END_FRAMES * FRAME, min_volume=0.0))
        self.probe = probe
        self._speaking = False
        self._utterance = -1

    def num_frames_required(self) -> int:
        return IN_SAMPLES

    def voice_confidence(self, buffer: bytes) -> float:
        return 1.0 if first_sample(buffer) else 0.0

    async def analyze_audio(self, buffer: bytes) -> VADState:
        value = first_sample(buffer)
        if value:
            self._utterance = value - core.SPEECH_BASE
        state = await super().analyze_audio(buffer)
        speaking = state in (VADState.SPEAKING, VADState.STOPPING)
        if speaking != self._speaking:
            self._speaking = speaking
            probe = self.probe
            if speaking:
                probe.vad_threshold.setdefault(self._utterance, now())
            else:
                probe.vad_end[self._utterance] = now()
        return state


class BenchSTT(STTService):
    """A finalized transcript 10 frames (0.2 s) after the speech ends."""

    def __init__(self, probe: Probe) -> None:
        super().__init__(ttfs_p99_latency=STT_FINAL_FRAMES * FRAME, sample_rate=IN_RATE,
                         settings=settings(STTSettings))
        self.core = core.SttCore(probe, now)

    async def run_stt(self, audio: bytes) -> AsyncGenerator[Frame | None, None]:
        text = self.core.process(first_sample(audio))
        if text is not None:
            yield TranscriptionFrame(text=text, user_id="", timestamp=time_now_iso8601(),
                                     finalized=True)


class BenchLLM(LLMService):
    """ttft 0.2 s, then a 4-char token every 20 ms; a tool call after the text if scripted.
    The completion runs in ``process_frame``, as Pipecat's LLM services run it, so an
    interruption cancels it with the processor's task."""

    def __init__(self, probe: Probe, arrivals: Arrivals) -> None:
        super().__init__(settings=settings(LLMSettings, filter_incomplete_user_turns=False,
                                           use_provider_thinking_default=False))
        self.probe = probe
        self._until = arrivals.until

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, LLMContextFrame):
            try:
                await self.push_frame(LLMFullResponseStartFrame())
                await self._complete(frame.context)
            finally:
                await self.push_frame(LLMFullResponseEndFrame())
        else:
            await self.push_frame(frame, direction)

    async def _complete(self, context: LLMContext) -> None:
        probe = self.probe
        text, tool_after = last_user_text(context.messages)
        reply, started = common.llm_begin_text(probe, text, tool_after, now)
        if reply is None:
            return
        r = reply.index
        done = False
        try:
            toks = core.tokens(reply.text)
            for i, tok in enumerate(toks):
                await self._until(started + LLM_TTFT + i * TOKEN_INTERVAL)
                if i == 0:
                    probe.llm_first_token[r] = now()
                await self._push_llm_text(tok)
            if reply.tool:
                await self._until(started + LLM_TTFT + len(toks) * TOKEN_INTERVAL)
                await self.run_function_calls([FunctionCallFromLLM(
                    function_name=reply.tool, tool_call_id=f"call_{r}", arguments={},
                    context=context)])
            done = True
        finally:
            if not done:
                probe.llm_cancelled[r] = now()


class _Synthesis:
    """One audio context's synthesis: text in, audio chunks out at ``TtsCore``'s pace."""

    __slots__ = ("core", "done", "reply", "task", "wake")

    def __init__(self) -> None:
        self.core = core.TtsCore()
        self.reply = -1
        self.done = False
        self.wake = asyncio.Event()
        self.task: asyncio.Task | None = None


class BenchTTS(TTSService):
    """Streaming, shaped like Pipecat's websocket TTS services: ``run_tts`` hands the text to
    the context's synthesis task (the fake server) and yields nothing; the task appends 20 ms
    frames to the audio context, the first 0.1 s after the first text, then at 2× real time
    in 100 ms chunks; ``flush_audio`` says the text is complete."""

    def __init__(self, probe: Probe, arrivals: Arrivals, *, sentences: bool) -> None:
        super().__init__(
            text_aggregation_mode=(TextAggregationMode.SENTENCE if sentences
                                   else TextAggregationMode.TOKEN),
            push_start_frame=True, sample_rate=OUT_RATE, settings=settings(TTSSettings))
        self.probe = probe
        self._until = arrivals.until
        self._synth: dict[str, _Synthesis] = {}

    async def run_tts(self, text: str, context_id: str) -> AsyncGenerator[Frame | None, None]:
        s = self._synth.get(context_id)
        if s is None:
            s = self._synth[context_id] = _Synthesis()
            s.core.add_text(text)
            s.reply, _buf = common.tts_first_text(self.probe, s.core, now)
            s.task = self.create_task(self._synthesize(context_id, s))
        else:
            s.core.add_text(text)
            s.wake.set()
        yield None

    async def flush_audio(self, context_id: str | None = None) -> None:
        s = self._synth.get(context_id or "")
        if s is not None:
            s.done = True
            s.wake.set()

    async def _synthesize(self, context_id: str, s: _Synthesis) -> None:
        probe = self.probe
        c = s.core
        r = s.reply
        buf = core.out_bytes(REPLY_BASE + r)
        append = self.append_to_audio_context
        while True:
            n, ready = c.next_chunk()
            if n:
                if ready > now():
                    await self._until(ready)
                if r not in probe.tts_first_audio:
                    probe.tts_first_audio[r] = now()
                c.emitted += n
                for _ in range(n):
                    await append(context_id, TTSAudioRawFrame(
                        audio=buf, sample_rate=OUT_RATE, num_channels=1, context_id=context_id))
            elif s.done:
                break
            else:
                s.wake.clear()
                await s.wake.wait()
        self._synth.pop(context_id, None)
        await append(context_id, TTSStoppedFrame(context_id=context_id))
        await self.remove_audio_context(context_id)

    async def _drop(self, context_id: str) -> None:
        s = self._synth.pop(context_id, None)
        if s is not None and s.task is not None:
            self.probe.tts_cancelled[s.reply] = now()
            await self.cancel_task(s.task)

    async def on_audio_context_interrupted(self, context_id: str) -> None:
        await self._drop(context_id)

    async def cleanup(self) -> None:
        for context_id in list(self._synth):
            s = self._synth.pop(context_id)
            if s.task is not None:
                await self.cancel_task(s.task)
        await super().cleanup()


# -- the bot ---------------------------------------------------------------------------------
FRONT_DESK = "You are the front desk of a small company."
BILLING = "You are the billing agent."


def transfer_schema() -> FunctionSchema:
    return FunctionSchema(name=TRANSFER_TOOL, description="Transfer the user to billing.",
                          properties={}, required=[])


@dataclass
class Bot:
    """One session: the worker that runs its pipeline, the paced input, the LLM context."""

    worker: PipelineWorker
    input: PacedInput
    context: LLMContext


def make_bot(probe: Probe, network: Network, *, transforms: bool,
             history: int = 0, extra_tools: int = 0) -> Bot:
    """One session's pipeline and worker. ``history`` prior user/assistant messages and
    ``extra_tools`` more tool schemas in the context (the sweeps of turn cost)."""
    messages: list[Any] = [{"role": "system", "content": FRONT_DESK}]
    for i in range(history):
        messages.append({"role": "user" if i % 2 == 0 else "assistant",
                         "content": f"earlier message {i}"})
    tools = [transfer_schema()] + [
        FunctionSchema(name=f"tool_{i}", description=f"Unused tool {i}.", properties={},
                       required=[]) for i in range(extra_tools)]
    context = LLMContext(messages=messages, tools=ToolsSchema(standard_tools=tools))
    strategies = UserTurnStrategies(stop=[SpeechTimeoutUserTurnStopStrategy(
        user_speech_timeout=round(MIN_DELAY - VAD_END_FRAMES * FRAME, 6))])
    user, assistant = LLMContextAggregatorPair(context, user_params=LLMUserAggregatorParams(
        vad_analyzer=BenchVAD(probe), user_turn_strategies=strategies))
    llm = BenchLLM(probe, network.arrivals)

    async def transfer_to_billing(params: FunctionCallParams) -> None:
        params.context.add_message({"role": "developer", "content": BILLING})
        probe.tool_return = now()
        await params.result_callback(None, properties=FunctionCallResultProperties(
            run_llm=False))

    llm.register_function(TRANSFER_TOOL, transfer_to_billing)

    async def unused(params: FunctionCallParams) -> None:
        await params.result_callback(None)

    for i in range(extra_tools):
        llm.register_function(f"tool_{i}", unused)
    inp = PacedInput(probe, network)
    pipeline = Pipeline([inp, BenchSTT(probe), user, llm,
                         BenchTTS(probe, network.arrivals, sentences=transforms),
                         RealtimeSink(probe), assistant])
    return Bot(PipelineWorker(pipeline), inp, context)


async def run_session(probe: Probe, network: Network, *, transforms: bool,
                      slack: float = 30.0, history: int = 0, extra_tools: int = 0,
                      on_bot: Any = None) -> None:
    """One scripted session, start to close; failures are recorded on the probe.
    ``on_bot`` is called with the session's ``Bot`` once it is built."""
    probe.started_at = now()
    probe.handoff_supported = False
    inp = None
    runner_task = None
    try:
        async with asyncio.timeout(probe.script.close_at + slack):
            bot = make_bot(probe, network, transforms=transforms, history=history,
                           extra_tools=extra_tools)
            if on_bot is not None:
                on_bot(bot)
            worker, inp = bot.worker, bot.input
            started = asyncio.Event()

            @worker.event_handler("on_pipeline_started")
            async def _started(_worker: Any, _frame: Any) -> None:
                started.set()

            runner = WorkerRunner(handle_sigint=False)
            t = now()
            await runner.add_workers(worker)
            runner_task = asyncio.create_task(runner.run())
            await started.wait()
            probe.start_latency = now() - t
            try:
                await inp.started.wait()
                assert probe.t0 is not None
                await sleep_until(probe.t0 + probe.script.close_at)
            finally:
                inp.close()                 # the user hangs up: no more frames
                t = now()
                await worker.stop_when_done()
                await runner_task
                probe.close_latency = now() - t
    except TimeoutError:
        probe.error = "timeout"
    except Exception as e:  # noqa: BLE001 - a failed session is a result
        probe.error = f"{type(e).__name__}: {e}"[:300]
    finally:
        if inp is not None:
            inp.close()
        if runner_task is not None and not runner_task.done():
            runner_task.cancel()
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


async def warm_up(network: Network) -> None:
    probe = Probe(index=0, script=core.warmup_script())
    await run_session(probe, network, transforms=True)


def runtime_info() -> dict:
    from importlib.metadata import version
    return {"runtime": "pipecat-ai", "version": version("pipecat-ai")}


# -- one session in virtual time (the tests) --------------------------------------------------
def virtual_session(kind: str, *, transforms: bool, index: int = 1) -> dict[str, Any]:
    """One session of the ``kind`` script on ``virtual_asyncio``'s loop: the probe's record,
    the session's latencies and its LLM context's messages, as JSON-ready data.

    Importing Pipecat replaces ``asyncio.wait_for`` process-wide (with ``wait_for2``'s, below
    Python 3.12), which other asyncio code in the same process then runs on: the test suite
    calls this through ``python -m bench.pipecat_side`` in a process of its own.
    """
    from . import analysis, virtual_asyncio

    bots: list[Bot] = []

    async def main() -> Probe:
        quiet_logs()
        network = Network()
        net = asyncio.create_task(network.run())
        probe = Probe(index=index, script=core.build_script(index, kind=kind))
        try:
            await run_session(probe, network, transforms=transforms, on_bot=bots.append)
        finally:
            net.cancel()
        return probe

    probe = virtual_asyncio.run(main())
    return {"probe": probe.to_json(), "samples": analysis.session_samples(probe),
            "messages": [m for m in bots[0].context.messages if isinstance(m, dict)]}


def main(argv: list[str] | None = None) -> None:
    import argparse
    import json
    import sys

    ap = argparse.ArgumentParser(prog="python -m bench.pipecat_side",
                                 description="one Pipecat session in virtual time, as JSON")
    ap.add_argument("--script", choices=["full", "quick"], default="full")
    ap.add_argument("--transforms", choices=["on", "off"], default="off")
    ap.add_argument("--index", type=int, default=1)
    args = ap.parse_args(argv)
    out = virtual_session(args.script, transforms=args.transforms == "on", index=args.index)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
