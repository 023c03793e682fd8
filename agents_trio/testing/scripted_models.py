"""Fake models that play a :class:`~agents_trio.testing.schedules.Schedule` and record what
they were asked: the LLM answers each request by its trigger (a user input, tool outputs, or
instructions), the TTS speaks each reply for its planned duration, the VAD and STT hear the
scheduled user speech, and every model fails where the schedule says."""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

import trio
from livekit import rtc

from .._errors import APIError
from ..chat import INSTRUCTIONS_ID, ChatContext, ChatMessage, FunctionCallOutput
from ..models import (ChatChunk, FunctionToolCall, SpeechData, SpeechEvent, SpeechEventType,
                      ToolChoice, VADEvent, VADEventType)
from ..events import PlaybackFinishedEvent
from .fake_io import FakeAudioOutput
from .schedules import (DEFAULT_REPLY, Fault, FaultKind, OutputFault, PushFault, Reply,
                        Schedule, StreamFault, ToolCall, UserSpeech)

TriggerKind = Literal["user", "tool_outputs", "instructions", "other"]
_REQUEST_TOKEN = re.compile(r"\s*r(\d+)\b")

FaultT = TypeVar("FaultT", StreamFault, PushFault)
EventT = TypeVar("EventT", bound="VADEvent | SpeechEvent")


def fault_error(kind: FaultKind, where: str) -> BaseException:
    """The exception a scheduled fault raises."""
    if kind == "error":
        return RuntimeError(f"injected failure: {where}")
    return APIError(f"injected provider error: {where}",
                    recoverable=kind == "recoverable_api_error")


def request_number(text: str | None) -> int | None:
    """The number of the LLM request whose reply ``text`` starts (``"r12 ..."``), if any."""
    match = _REQUEST_TOKEN.match(text or "")
    return int(match.group(1)) if match else None


@dataclass
class LLMRequest:
    """One ``llm.chat`` call, as the scripted LLM saw it.

    Attributes:
        number: 1, 2, ... in the order the requests were made.
        at: Trio time of the request.
        chat_ctx: A copy of the context sent.
        tool_choice: The tool choice sent.
        trigger: What the request answers: the last user message (``user``), tool outputs,
            instructions given to ``generate_reply``, or anything else.
        trigger_ids: The user message's id, or the answered call ids.
        reply: The planned reply that was streamed.
        call_ids: Ids of the tool calls streamed.
        ended: ``done``, ``fault`` or ``cancelled`` (None while streaming).
    """

    number: int
    at: float
    chat_ctx: ChatContext
    tool_choice: ToolChoice | None
    trigger: TriggerKind
    trigger_ids: tuple[str, ...]
    reply: Reply
    call_ids: list[str] = field(default_factory=list)
    ended: str | None = None

    def user_message_ids(self) -> list[str]:
        return [i.id for i in self.chat_ctx.items
                if isinstance(i, ChatMessage) and i.role == "user"]


def _trigger(ctx: ChatContext) -> tuple[TriggerKind, tuple[str, ...], str]:
    """What a request answers, from the end of its context (config and handoff items are not
    shown to a model, so they are skipped)."""
    outputs: list[str] = []
    for item in reversed(ctx.items):
        if isinstance(item, FunctionCallOutput):
            outputs.append(item.call_id)
            continue
        if item.type in ("agent_config_update", "agent_handoff", "function_call"):
            continue
        if outputs:
            break
        if isinstance(item, ChatMessage):
            if item.role == "user":
                return "user", (item.id,), item.text_content or ""
            if item.role in ("system", "developer") and item.id != INSTRUCTIONS_ID:
                return "instructions", (), item.text_content or ""
        return "other", (), ""
    if outputs:
        return "tool_outputs", tuple(reversed(outputs)), ""
    return "other", (), ""


class ScriptedLLM:
    """Answers each request with the reply the schedule plans for its trigger.

    ``requests`` records every request; ``open_streams`` counts streams not yet closed.
    """

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.requests: list[LLMRequest] = []
        self.calls: dict[str, ToolCall] = {}  # planned call by the call id it was given
        self.open_streams = 0
        self.hangs: list[Hang] = []  # every model hang of the run (the TTS and output add)

    def plan_for_call(self, call_id: str) -> ToolCall | None:
        return self.calls.get(call_id)

    def request(self, number: int | None) -> LLMRequest | None:
        if number is None or not 1 <= number <= len(self.requests):
            return None
        return self.requests[number - 1]

    def _reply(self, kind: TriggerKind, ids: tuple[str, ...], text: str) -> Reply:
        if kind == "user":
            return self.schedule.reply_for(text) or DEFAULT_REPLY
        if kind == "tool_outputs":
            # the newest step's outputs: an older step's may be committed after them
            planned = [(int(c[1:].split("_")[0]), self.calls[c]) for c in ids if c in self.calls]
            if not planned:
                return DEFAULT_REPLY
            return max(planned, key=lambda p: p[0])[1].reply or DEFAULT_REPLY
        if (kind == "instructions" and self.schedule.goodbye is not None
                and "goodbye" in text.lower()):
            return self.schedule.goodbye
        return self.schedule.greeting

    @asynccontextmanager
    async def chat(self, *, chat_ctx: ChatContext, tools: list[Any] | None = None,
                   tool_choice: ToolChoice | None = None
                   ) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        """The reply the schedule plans for what triggered the request (recorded in
        ``requests``; faults fire as scheduled).

        Cancellation: leaving the block, cancelled or not, closes the stream and records
        when the request ended.
        """
        kind, ids, text = _trigger(chat_ctx)
        request = LLMRequest(number=len(self.requests) + 1, at=trio.current_time(),
                             chat_ctx=chat_ctx.copy(), tool_choice=tool_choice, trigger=kind,
                             trigger_ids=ids, reply=self._reply(kind, ids, text))
        self.requests.append(request)
        self.open_streams += 1
        stream = self._stream(request)
        try:
            yield stream
        finally:
            await stream.aclose()  # not a checkpoint: the generator is suspended at a yield
            self.open_streams -= 1
            if request.ended is None:
                request.ended = "cancelled"

    async def _stream(self, request: LLMRequest) -> AsyncGenerator[ChatChunk, None]:
        reply = request.reply
        started = trio.current_time()
        words = re.findall(r"\S+\s*", f"r{request.number} {reply.text}")
        await trio.sleep(reply.ttft)
        for k, word in enumerate(words):
            await _maybe_fail(reply.llm_fault, k, f"LLM request r{request.number} chunk",
                              self.hangs)
            yield ChatChunk(content=word)
        await _maybe_fail(reply.llm_fault, len(words), f"LLM request r{request.number} chunk",
                          self.hangs)
        await trio.sleep_until(started + reply.duration)
        if reply.calls and request.tool_choice != "none":
            calls = []
            for k, planned in enumerate(reply.calls):
                call_id = f"c{request.number}_{k}"
                self.calls[call_id] = planned
                request.call_ids.append(call_id)
                calls.append(FunctionToolCall(name=planned.name, arguments=planned.arguments,
                                              call_id=call_id))
            yield ChatChunk(tool_calls=calls)
        request.ended = "done"


@dataclass
class Hang:
    """A scheduled hang: ``what`` blocked from ``started`` until ``ended`` (None: never)."""

    what: str
    started: float
    ended: float | None = None


async def hang(hangs: list[Hang], what: str) -> None:
    """Block until cancelled, recording the hang in ``hangs``."""
    record = Hang(what=what, started=trio.current_time())
    hangs.append(record)
    try:
        await trio.sleep_forever()
    finally:
        record.ended = trio.current_time()


async def _maybe_fail(fault: Fault | None, index: int, where: str, hangs: list[Hang]) -> None:
    if fault is None or fault.at != index:
        return
    if fault.kind == "hang":
        await hang(hangs, f"{where} at {index}")
    raise fault_error(fault.kind, f"{where} at {index}")


class ScriptedTTS:
    """Speaks a reply ``r<n> ...`` for the planned ``audio`` seconds (50 ms frames), other text
    at 0.25 s per word; fails at the planned frame."""

    sample_rate = 24000
    num_channels = 1
    FRAME = 0.05

    def __init__(self, llm: ScriptedLLM) -> None:
        self._llm = llm
        self.open_streams = 0
        samples = int(self.sample_rate * self.FRAME)
        self._frame_samples = samples
        self._silence = bytes(2 * samples)

    @asynccontextmanager
    async def stream(self, text: AsyncIterable[str]
                     ) -> AsyncIterator[AsyncIterator[rtc.AudioFrame]]:
        """The planned audio for ``text`` (faults fire as scheduled).

        Cancellation: leaving the block, cancelled or not, closes the stream.
        """
        self.open_streams += 1
        frames = self._synthesize(text)
        try:
            yield frames
        finally:
            await frames.aclose()
            self.open_streams -= 1

    async def _synthesize(self, text: AsyncIterable[str]
                          ) -> AsyncGenerator[rtc.AudioFrame, None]:
        full = "".join([t async for t in text])
        if not full.strip():
            return
        request = self._llm.request(request_number(full))
        reply = request.reply if request is not None else Reply(
            audio=0.25 * len(full.split()), tts_ttfb=0.1)
        await trio.sleep(reply.tts_ttfb)
        where = f"TTS of {full[:20]!r} frame"
        frames = max(1, int(round(reply.audio / self.FRAME)))
        for k in range(frames):
            await _maybe_fail(reply.tts_fault, k, where, self._llm.hangs)
            yield rtc.AudioFrame(self._silence, self.sample_rate, 1, self._frame_samples)
        await _maybe_fail(reply.tts_fault, frames, where, self._llm.hangs)


class UserAudioScript:
    """The scheduled user speech on one clock, shared by the VAD and STT streams (a reopened
    stream continues from now instead of replaying the past).

    ``origin`` is the Trio time of schedule time 0, set by the runner with ``start``.
    """

    def __init__(self, schedule: Schedule, *, min_silence: float = 0.5,
                 min_speech: float = 0.05) -> None:
        self.schedule = schedule
        self.min_silence = min_silence
        self.min_speech = min_speech
        self.origin: float | None = None
        self.started = trio.Event()
        self.fired: dict[Any, float] = {}  # faults that happened (once each), by Trio time

    def start(self, origin: float) -> None:
        self.origin = origin
        self.started.set()

    def speeches(self) -> list[UserSpeech]:
        return [a for a in self.schedule.actions if isinstance(a, UserSpeech)]

    def vad_runs(self) -> list[tuple[float, float]]:
        """The stretches of speech the VAD hears, ``(start, end)``: utterances less than
        ``min_silence`` apart are one stretch, as a real VAD hears them (it ends a speech only
        after that much silence)."""
        runs: list[tuple[float, float]] = []
        for s in sorted(self.speeches(), key=lambda s: s.at):
            end = s.at + s.duration
            if runs and s.at < runs[-1][1] + self.min_silence:
                runs[-1] = (runs[-1][0], max(runs[-1][1], end))
            else:
                runs.append((s.at, end))
        return runs

    def vad_timeline(self) -> list[tuple[float, VADEvent]]:
        out: list[tuple[float, Any]] = []
        for start, end in self.vad_runs():
            eos = end + self.min_silence
            out.append((start + self.min_speech, VADEvent(
                type=VADEventType.START_OF_SPEECH, speech_duration=self.min_speech,
                speaking=True)))
            t = start + 0.25
            while t < eos - 0.1:  # an inference every 0.25 s is enough for the thresholds
                out.append((t, VADEvent(type=VADEventType.INFERENCE_DONE,
                                        speech_duration=min(t, end) - start,
                                        silence_duration=max(0.0, t - end),
                                        raw_accumulated_speech=0.25 if t <= end else 0.0,
                                        raw_accumulated_silence=max(0.0, t - end))))
                t += 0.25
            out.append((eos, VADEvent(type=VADEventType.END_OF_SPEECH,
                                      speech_duration=end - start,
                                      silence_duration=self.min_silence)))
        return out

    def stt_timeline(self) -> list[tuple[float, SpeechEvent]]:
        out: list[tuple[float, Any]] = []
        for s in self.speeches():
            if not s.transcript:
                continue
            end = s.at + s.duration
            interim = " ".join(s.transcript.split()[:2])
            out.append((s.at, SpeechEvent(type=SpeechEventType.START_OF_SPEECH)))
            out.append((end + s.stt_delay / 2, SpeechEvent(
                type=SpeechEventType.INTERIM_TRANSCRIPT,
                alternatives=[SpeechData(text=interim)])))
            out.append((end + s.stt_delay, SpeechEvent(
                type=SpeechEventType.FINAL_TRANSCRIPT,
                alternatives=[SpeechData(text=s.transcript)])))
            out.append((end + s.stt_delay, SpeechEvent(type=SpeechEventType.END_OF_SPEECH)))
        return out

    def faults(self, model: str, kind: type[FaultT]) -> list[FaultT]:
        return [f for f in self.schedule.faults if isinstance(f, kind) and f.model == model]


class _ScriptStream(Generic[EventT]):
    """One VAD or STT stream: frames in (faults may fire), scheduled events out."""

    def __init__(self, script: UserAudioScript, model: str,
                 timeline: Sequence[tuple[float, EventT]]) -> None:
        self._script = script
        self._model = model
        opened = trio.current_time()
        origin = script.origin
        planned: list[tuple[float, EventT | StreamFault]] = [*timeline]
        planned += [(f.at, f) for f in script.faults(model, StreamFault) if f not in script.fired]
        self._timeline = sorted([(at, ev) for at, ev in planned
                                 if origin is None or origin + at >= opened], key=lambda p: p[0])
        self._next = 0

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        script = self._script
        if script.origin is None:
            return
        now = trio.current_time() - script.origin
        for fault in script.faults(self._model, PushFault):
            if fault not in script.fired and now >= fault.at:
                script.fired[fault] = trio.current_time()
                raise fault_error(fault.kind, f"{self._model} push_frame at {now:.2f}")

    def end_input(self) -> None:
        pass

    def __aiter__(self) -> _ScriptStream[EventT]:
        return self

    async def __anext__(self) -> EventT:
        script = self._script
        await script.started.wait()
        assert script.origin is not None
        if self._next >= len(self._timeline):
            await trio.sleep_forever()  # a live stream ends only when it is closed
        at, ev = self._timeline[self._next]
        await trio.sleep_until(script.origin + at)
        self._next += 1
        if isinstance(ev, StreamFault):
            script.fired[ev] = trio.current_time()
            raise fault_error(ev.kind, f"{self._model} stream at {at:.2f}")
        return ev


class _ScriptedRecognizer(Generic[EventT]):
    """A VAD or STT whose streams play the schedule's user audio script."""

    kind = ""

    def __init__(self, script: UserAudioScript) -> None:
        self._script = script
        self.open_streams = 0

    def _timeline(self) -> Sequence[tuple[float, EventT]]:
        raise NotImplementedError

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[_ScriptStream[EventT]]:
        self.open_streams += 1
        try:
            yield _ScriptStream(self._script, self.kind, self._timeline())
        finally:
            self.open_streams -= 1


class ScriptedVAD(_ScriptedRecognizer[VADEvent]):
    """Voice activity of the scheduled speech (start after 50 ms, inferences every 0.25 s, end
    0.5 s after the speech)."""

    kind = "vad"

    def _timeline(self) -> Sequence[tuple[float, VADEvent]]:
        return self._script.vad_timeline()


class ScriptedSTT(_ScriptedRecognizer[SpeechEvent]):
    """Transcripts of the scheduled speech: an interim at ``end + stt_delay/2``, the final at
    ``end + stt_delay``."""

    kind = "stt"

    def _timeline(self) -> Sequence[tuple[float, SpeechEvent]]:
        return self._script.stt_timeline()


class ScriptedAudioOutput(FakeAudioOutput):
    """A :class:`FakeAudioOutput` whose ``capture_frame`` fails or blocks as scheduled, and
    that notices two speeches playing at once: a segment belongs to the task that captured
    its first frame until its playout is waited for or cleared, and a frame from another task
    in between is recorded in ``overlaps`` (Trio time, the segment's start)."""

    def __init__(self, script: UserAudioScript, hangs: list[Hang], *,
                 can_pause: bool = False) -> None:
        super().__init__(can_pause=can_pause)
        self._script = script
        self._hangs = hangs
        self._segment_owner: trio.lowlevel.Task | None = None
        self._segment_started = 0.0
        self.overlaps: list[tuple[float, float]] = []

    async def wait_for_playout(self) -> PlaybackFinishedEvent:
        """As :meth:`FakeAudioOutput.wait_for_playout`; the segment has no owner after it.

        Cancellation: as there; the segment loses its owner too.
        """
        try:
            return await super().wait_for_playout()
        finally:
            self._segment_owner = None

    def clear_buffer(self) -> PlaybackFinishedEvent | None:
        self._segment_owner = None
        return super().clear_buffer()

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        """As :meth:`FakeAudioOutput.capture_frame`, failing or hanging where scheduled.

        Cancellation: only a scheduled hang waits; cancelling it ends the hang (recorded in
        ``hangs``) without taking the frame, and the fault does not fire again.
        """
        task = trio.lowlevel.current_task()
        if self._segment_owner is None:
            self._segment_owner, self._segment_started = task, trio.current_time()
        elif self._segment_owner is not task and (
                not self.overlaps or self.overlaps[-1][1] != self._segment_started):
            self.overlaps.append((trio.current_time(), self._segment_started))
        script = self._script
        if script.origin is not None:
            now = trio.current_time() - script.origin
            for fault in script.schedule.faults:
                if (isinstance(fault, OutputFault) and fault not in script.fired
                        and now >= fault.at):
                    script.fired[fault] = trio.current_time()
                    if fault.kind == "hang":
                        await hang(self._hangs, f"capture_frame at {now:.2f}")
                    # Note: the runtime does not clear an output whose capture_frame raised;
                    # the next speech appends to this segment, which is not counted as an
                    # overlap (it is a stale segment, not two speeches at once)
                    self._segment_owner = None
                    raise fault_error(fault.kind, f"capture_frame at {now:.2f}")
        await super().capture_frame(frame)


class _CountsStreams(Protocol):
    open_streams: int


def stream_counts(*models: _CountsStreams) -> dict[str, int]:
    """Open streams per model kind (for the "nothing left running" invariant)."""
    return {type(m).__name__: m.open_streams for m in models if m.open_streams}


__all__ = ["Hang", "LLMRequest", "ScriptedAudioOutput", "ScriptedLLM", "ScriptedSTT", "ScriptedTTS",
           "ScriptedVAD", "UserAudioScript", "fault_error", "request_number", "stream_counts"]
