"""One generation step of a speech: LLM → segments → TTS → audio output, plus tool dispatch.

The step runs inside the speech's step scope (interruption cancels it). Function calls read
from the LLM stream are started in the *tool nursery* the caller passes in, which lives
outside that scope: interrupting a speech never cancels its running tools.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterable, AsyncIterator, Callable
from contextlib import nullcontext
from typing import Any, Protocol

import msgspec
import trio
from livekit import rtc

from .model_capabilities import audio_frame_of
from .text_transforms import apply
from ._iterators import aclosing, node_items
from ._ids import short_id
from .chat import INSTRUCTIONS_ID, ChatContext, ChatItem, ChatMessage, FunctionCall
from .instructions import InputModality, Instructions, render_instructions
from .io.audio import AudioOutput, AudioOutputStalled, write_frames
from .io.resample import FrameResampler, output_sample_rate
from .io.transcript_sync import TimedWord, heard_text, next_start, timed_words, word_starts
from .events import LLMMetrics, PlaybackStartedEvent, TTSMetrics
from .hosts import ActivityBasics
from .agent import Agent
from .models import (ChatChunk, CompletionUsage, FlushSentinel, FunctionToolCall, ModelSettings,
                     ToolChoice)
from .speech_handle import SpeechHandle
from .tools import FunctionTool, ToolOutcome
from .cancel_tools import with_cancel_tools
from .toolsets import flatten_tools
from .nurseries import Flag, Pipe

logger = logging.getLogger("agents_trio")


class FrameQueue(Pipe[rtc.AudioFrame]):
    """A segment's audio, from the task that produces it to the playout: ``send_nowait``
    appends a frame (no schedule point); ``take`` hands over every frame waiting, up to a
    limit, after one schedule point, waiting only when there is none (a memory channel would
    move the frames one by one, a send and a receive each). ``async with`` closes it for
    sending; iterating it drains it frame by frame."""

    __slots__ = ()


class NodeTranscript:
    """A segment's transcript as the agent's overridden ``transcription_node`` makes it: the
    node reads the segment's text as it is generated and what it yields is the transcript."""

    __slots__ = ("input", "text", "ended", "scope")

    def __init__(self) -> None:
        self.input: Pipe[str] = Pipe()  # the segment's text as generated, to the node
        self.text = ""  # what the node yielded so far
        self.ended = Flag()  # the node's output ended (or the node failed, or was cancelled)
        self.scope = trio.CancelScope()  # the node's run (cancelled when the playout is cut)


class Segment:
    """Text between two flushes, and the audio synthesized for it.

    The TTS gets the text; everything else (the transcript synchronizer, the transcription
    output, the history) gets the *transcript*, the text as the agent's transcription node
    made it: the text itself for an agent that keeps the default node (``node`` is None).
    """

    def __init__(self) -> None:
        self.text = ""
        self.text_chunks: Pipe[str] = Pipe()  # the text as generated, to the TTS
        self.text_ended_at: float | None = None
        self.frames: FrameQueue | None = None
        self.audio_duration = 0.0
        self.message_id: str | None = None  # realtime messages carry the server's id
        self.text_complete = Flag()  # its text ended (see end_text)
        self.audio_complete = False  # the TTS finished the segment
        self.timestamps: list[TimedWord] = []  # word timings given by the TTS, if any
        self.forwarded = ""  # the transcription released so far (paced by the playback)
        self.transcript_closed = False  # its end was forwarded: nothing more is released
        self.playback_started = Flag()
        self.pacing = trio.CancelScope()  # the synchronizer's work on it (ended by playout)
        self.cut = False  # playout ended early (interrupted or stalled)
        self.node: NodeTranscript | None = None  # an overridden transcription node's output

    def end_text(self) -> None:
        """No more text comes (a flush, the LLM's end, a realtime message's text stream
        ended): its time is kept, and the TTS and the transcription node get their input's
        end. Only the first call counts."""
        if self.text_ended_at is not None:
            return
        self.text_ended_at = trio.current_time()
        self.text_chunks.close()
        self.text_complete.set()
        if self.node is not None:
            self.node.input.close()

    @property
    def transcript(self) -> str:
        """The transcript so far."""
        node = self.node
        return self.text if node is None else node.text

    @property
    def transcript_complete(self) -> bool:
        """Nothing is added to the transcript any more."""
        return self._transcript_ended.is_set()

    @property
    def _transcript_ended(self) -> Flag:
        node = self.node
        return self.text_complete if node is None else node.ended

    async def wait_transcript_complete(self) -> None:
        """Wait until nothing is added to the transcript any more: the text ended, or the
        transcription node did (it failed, or was cancelled).

        Cancellation: a checkpoint only.
        """
        await self._transcript_ended.wait()

    def word_starts(self) -> list[tuple[str, float]]:
        """When each word of the transcript so far starts in the segment's audio, at the
        transcript synchronizer's pace (see ``io.transcript_sync``): the words it shows by a
        position are the words a cut there keeps. A last word the transcript may still add
        to is not counted yet."""
        text_complete = self.transcript_complete
        return word_starts(self.transcript, audio_duration=self.audio_duration,
                           complete=self.audio_complete and text_complete,
                           text_complete=text_complete, timestamps=self.timestamps)

    def on_playback_started(self, _: object) -> None:
        self.playback_started.set()

    def release_transcript(self, text: str, *, final: bool,
                           forward: Callable[..., None]) -> None:
        """Forward ``text`` (a part, or the segment's end when ``final``). Once the end went
        out the segment's transcript is closed: a part the synchronizer computed after that
        is already in the end, and is not released again."""
        if self.transcript_closed:
            return
        self.transcript_closed = final
        self.forwarded += text
        forward(text, final=final)


class StepState:
    """What one generation step produced."""

    def __init__(self, message_id: str) -> None:
        self.calls: list[FunctionCall] = []
        self.outcomes: dict[str, ToolOutcome] = {}
        self.played_text = ""
        self.authorized_at: float | None = None
        self.started_speaking_at: float | None = None
        self.llm_ttft: float | None = None  # the llm_node's first text, from its start
        self.tts_ttfb: float | None = None  # the tts_node's first audio of the first segment
        self.message_id = message_id
        self.pending_metrics: list[Any] = []
        self.error: BaseException | None = None
        self.current_message_id: str | None = None  # the realtime message being played
        self.heard_seconds = 0.0  # played audio of that message (for truncation)
        self.said: ChatMessage | None = None  # the assistant message committed for the step
        self.gained: list[ChatItem] = []  # what AgentTasks awaited by its tools said


class ReplyRequest(msgspec.Struct, kw_only=True):
    """Inputs of a pipeline reply step."""

    chat_ctx: ChatContext
    tools: list[Any]  # as given: toolsets whole, flattened at each step
    tool_choice: ToolChoice | None = None
    instructions: str | None = None
    modality: InputModality = "audio"  # of the input the reply answers
    in_on_enter: bool = False
    say_text: str | AsyncIterable[str] | None = None
    #: a ``say``'s own audio, played instead of synthesizing its text
    say_audio: AsyncIterable[rtc.AudioFrame] | None = None
    add_to_chat_ctx: bool = True
    generation: Any = None  # a realtime response the server started
    sync_chat_ctx: bool = False  # realtime: push the agent's context before generating
    #: the metrics of the user message this reply answers (its e2e latency is counted from
    #: the user's end of speech)
    user_metrics: dict[str, Any] | None = None


def _chunk_parts(chunk: object) -> tuple[str | None, list[FunctionToolCall]]:
    if isinstance(chunk, str):
        return chunk, []
    if isinstance(chunk, ChatChunk):   # the delta is what counts (LiveKit's form)
        if chunk.delta is None:
            return chunk.content, list(chunk.tool_calls)
        return chunk.delta.content, list(chunk.delta.tool_calls)
    logger.warning("llm_node yielded an unexpected %s; skipped", type(chunk).__name__)
    return None, []


_BURST = 64


#: how often the transcript synchronizer looks again while it waits for text or audio
_PACE_POLL = 0.1


class _WaitingText:
    """A segment's text for the TTS node, as the LLM generates it. The chunks already waiting
    are handed over without a schedule point (one per chunk would be a task step each); only
    an empty pipe is waited on, so cancellation still lands whenever the node waits for
    text."""

    def __init__(self, recv: Pipe[str]) -> None:
        self._recv = recv

    def __aiter__(self) -> _WaitingText:
        return self

    async def __anext__(self) -> str:
        try:
            return self._recv.receive_nowait()
        except trio.WouldBlock:
            pass
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
        try:
            return await self._recv.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None


async def _text_source(text: str | AsyncIterable[str]) -> AsyncIterator[str]:
    if isinstance(text, str):
        yield text
    else:
        async for chunk in text:
            yield chunk


def with_instructions_for(chat_ctx: ChatContext, instructions: Instructions,
                          modality: InputModality) -> ChatContext:
    """A copy of ``chat_ctx`` whose instructions message is ``instructions`` rendered for
    ``modality`` (``chat_ctx`` itself when it has no instructions message)."""
    idx = chat_ctx.index_by_id(INSTRUCTIONS_ID)
    if idx is None:
        return chat_ctx
    ctx = chat_ctx.copy()
    ctx.items[idx] = ChatMessage(role="system",
                                 content=[render_instructions(instructions, modality)],
                                 id=INSTRUCTIONS_ID, created_at=ctx.items[idx].created_at)
    return ctx


class GenerationHost(ActivityBasics, Protocol):
    """What a generation step needs from the activity it runs for."""

    @property
    def llm(self) -> object: ...

    @property
    def tts(self) -> object: ...

    @property
    def audio_output_enabled(self) -> bool: ...

    @property
    def use_tts_aligned_transcript(self) -> bool: ...

    def report_model_error(self, handle: SpeechHandle, error: BaseException, *,
                           source: object) -> None: ...

    def llm_metrics(self, handle: SpeechHandle, *, ttft: float, duration: float,
                    usage: CompletionUsage | None, request_id: str) -> LLMMetrics: ...

    def tts_metrics(self, handle: SpeechHandle, *, ttfb: float, duration: float,
                    audio_duration: float, characters: int) -> TTSMetrics: ...

    def on_text_playback_started(self, handle: SpeechHandle) -> None: ...

    def forward_transcription_nowait(self, text: str, *, final: bool = True) -> None: ...

    def dispatch_tool(self, handle: SpeechHandle, call: FunctionCall, step: StepState,
                      tools: list[FunctionTool], tool_nursery: trio.Nursery) -> None: ...


class Generation:
    """Runs one pipeline step for ``handle`` on ``activity``."""

    def __init__(self, activity: GenerationHost, handle: SpeechHandle, request: ReplyRequest,
                 step: StepState) -> None:
        self.activity = activity
        self.handle = handle
        self.request = request
        self.step = step
        self.settings = ModelSettings(tool_choice=request.tool_choice)
        # this step's own list: llm_node may add a tool for this call only, and the step's
        # tool calls are looked up in it; the next step starts again from request.tools
        self.tools = with_cancel_tools(flatten_tools(request.tools))
        # the agent's transcription node, when it overrides the default (which changes
        # nothing: without an override, a segment's transcript is its text)
        self.transcription_node = _overridden_transcription_node(activity.agent)

    async def run(self, tool_nursery: trio.Nursery) -> None:
        """Generate, wait for the scheduler, play; tools start in ``tool_nursery``.

        Cancellation: cancelled through the speech's step scope (an interruption or the
        close); what was played is recorded in the step, the output is cleared, and the tools
        already started keep running in ``tool_nursery``.
        """
        activity = self.activity
        segments: Pipe[Segment] = Pipe()
        calls: Pipe[FunctionToolCall] = Pipe()
        audio = activity.audio_output_enabled or (
            self.request.say_audio is not None and activity.session.output.active_audio is not None)
        async with trio.open_nursery() as nursery:
            played: Pipe[Segment] = Pipe()  # segments with audio, to the playout
            if audio and activity.options.preemptive_generation.preemptive_tts:
                nursery.start_soon(self._tts, segments, played)
            nursery.start_soon(self._play_when_authorized, nursery, tool_nursery, audio,
                               segments, calls, played)
            # the LLM runs in this task: the request goes out in the step that started the
            # generation, with no hop to a task of its own
            await self._llm(segments, calls)

    async def _play_when_authorized(
            self, nursery: trio.Nursery, tool_nursery: trio.Nursery, audio: bool,
            segments: Pipe[Segment], calls: Pipe[FunctionToolCall],
            played: Pipe[Segment]) -> None:
        """Wait for the scheduler, then play (and dispatch the tool calls) as the LLM goes."""
        activity, handle = self.activity, self.handle
        await handle.wait_scheduled()
        self._flush_metrics()
        if audio and not activity.options.preemptive_generation.preemptive_tts:
            nursery.start_soon(self._tts, segments, played)
        await handle.wait_authorized()
        self.step.authorized_at = trio.current_time()
        nursery.start_soon(self._dispatch_tools, calls, tool_nursery)
        if audio:
            # the transcript synchronizer, for the transcription output this speech starts
            # with (as LiveKit, which synchronizes only for one): without one, what was
            # played still reaches the history when each segment's playout ends
            paced: Pipe[Segment] | None = None
            if activity.session.output.active_transcription is not None:
                paced = Pipe()
                nursery.start_soon(self._pace_transcripts, paced)
            await self._play_audio(played, paced, nursery)
        else:
            await self._play_text(segments)

    # -- LLM --------------------------------------------------------------------------------
    async def _llm(self, segments: Pipe[Segment],
                   tool_calls: Pipe[FunctionToolCall]) -> None:
        activity = self.activity
        chat_ctx = self.request.chat_ctx
        if isinstance(activity.agent.instructions, Instructions):
            # the context holds the spoken rendering; a typed turn gets the text one
            chat_ctx = with_instructions_for(chat_ctx, activity.agent.instructions,
                                             self.request.modality)
        if self.request.instructions:
            chat_ctx = chat_ctx.copy()
            chat_ctx.add_message(role="system", content=self.request.instructions)
        started = trio.current_time()
        ttft: float | None = None
        usage: CompletionUsage | None = None
        request_id = ""
        segment = self._new_segment()
        async with segments, tool_calls:
            segments.send_nowait(segment)
            try:
                async with aclosing(await self._source(chat_ctx)) as chunks:
                    async for chunk in chunks:
                        if isinstance(chunk, FlushSentinel):
                            segment.end_text()
                            segment = self._new_segment()
                            segments.send_nowait(segment)
                            continue
                        text, calls = _chunk_parts(chunk)
                        if isinstance(chunk, ChatChunk):
                            request_id = chunk.id or request_id
                            usage = chunk.usage or usage
                        if text:
                            if ttft is None:
                                ttft = trio.current_time() - started
                            segment.text += text
                            segment.text_chunks.send_nowait(text)
                            if segment.node is not None:
                                segment.node.input.send_nowait(text)
                        for call in calls:
                            tool_calls.send_nowait(call)
            except Exception as e:  # a failing model: stored on the handle, emitted, no reply
                self.step.error = e
                activity.report_model_error(self.handle, e, source=activity.llm)
            finally:
                segment.end_text()
        if self.request.say_text is None:
            self.step.llm_ttft = ttft
            self.step.pending_metrics.append(activity.llm_metrics(
                self.handle, ttft=ttft or 0.0, duration=trio.current_time() - started,
                usage=usage, request_id=request_id))
            self._flush_metrics()

    async def _source(self, chat_ctx: ChatContext) -> AsyncIterator[Any]:
        """The LLM node's output (see ``node_items``), or the fixed text of a ``say``."""
        if self.request.say_text is None:
            return await node_items(self.activity.agent.llm_node(
                chat_ctx, self.tools, self.settings), text=True)
        return _text_source(self.request.say_text)

    def _new_segment(self) -> Segment:
        segment = Segment()
        if self.transcription_node is not None:
            segment.node = NodeTranscript()
        return segment

    def _flush_metrics(self) -> None:
        # A preemptive step reports its metrics only once it is used (scheduled).
        if self.handle.scheduled:
            for m in self.step.pending_metrics:
                self.activity.session.emit_metrics(m)
            self.step.pending_metrics.clear()

    # -- TTS ---------------------------------------------------------------------------------
    async def _tts(self, segments: Pipe[Segment],
                   played: Pipe[Segment]) -> None:
        activity = self.activity
        transforms = activity.session.tts_text_transforms
        given_audio = self.request.say_audio  # played for the first segment, not synthesized
        # the TTS's word timestamps pace the transcript only when the agent (else the
        # session) asked for use_tts_aligned_transcript
        aligned = activity.use_tts_aligned_transcript
        async with played:
            async for segment in segments:
                frames_send = segment.frames = FrameQueue()
                played.send_nowait(segment)
                synthesized = given_audio is None
                # closed with the node: a transform's generator is not left to the GC
                text = apply(transforms, _WaitingText(segment.text_chunks))
                source = (activity.agent.tts_node(text, self.settings)
                          if given_audio is None else aiter(given_audio))
                given_audio = None
                started = trio.current_time()
                ttfb: float | None = None
                # to the output's rate (None: it takes any); the word timestamps are read
                # before resampling, which makes new frames. Done here, per frame, rather than
                # in generator layers: each layer costs a resumption per frame.
                rate = output_sample_rate(activity.session.output.active_audio)
                resampler = None if rate is None else FrameResampler(rate)
                try:
                    async with (frames_send, aclosing(text),
                                aclosing(await node_items(source)) as items):
                        async for item in items:
                            frame = audio_frame_of(item)
                            if aligned:  # use_tts_aligned_transcript: pace by its words
                                segment.timestamps.extend(timed_words(frame))
                            # a frame already at the output's rate skips the resampler
                            for out in ((frame,) if resampler is None or resampler.passes(frame)
                                        else resampler.push(frame)):
                                if ttfb is None and synthesized:
                                    ttfb = self._note_ttfb(segment, started)
                                segment.audio_duration += out.duration
                                frames_send.send_nowait(out)
                        for out in () if resampler is None else resampler.flush():
                            if ttfb is None and synthesized:
                                ttfb = self._note_ttfb(segment, started)
                            segment.audio_duration += out.duration
                            frames_send.send_nowait(out)
                except Exception as e:
                    self.step.error = e
                    activity.report_model_error(self.handle, e, source=activity.tts)
                    return
                segment.audio_complete = True
                if segment.text and synthesized:
                    self.step.pending_metrics.append(activity.tts_metrics(
                        self.handle, ttfb=ttfb or 0.0, duration=trio.current_time() - started,
                        audio_duration=segment.audio_duration,
                        characters=len(segment.text)))
                    self._flush_metrics()

    def _note_ttfb(self, segment: Segment, started: float) -> float:
        """The segment's first audio: its time to first byte (from the end of its text, or
        from the synthesis start while the text streams), the step's if it is the first."""
        ttfb = max(trio.current_time() - (segment.text_ended_at or started), 0.0)
        if self.step.tts_ttfb is None:
            self.step.tts_ttfb = ttfb
        return ttfb

    # -- playout -----------------------------------------------------------------------------
    async def _play_audio(self, played: Pipe[Segment], paced: Pipe[Segment] | None,
                          nursery: trio.Nursery) -> None:
        """Play the segments; their transcription nodes (if overridden) run in ``nursery``.

        Cancellation: what was played is recorded and the output is cleared (see
        ``_play_segment``); then the cancellation propagates.
        """
        output = self.activity.session.output.active_audio
        assert output is not None  # played only with an audio output
        output.on("playback_started", self._on_playback_started)
        try:
            await self._play_segments(output, played, paced, nursery)
        finally:
            output.off("playback_started", self._on_playback_started)

    def _on_playback_started(self, ev: PlaybackStartedEvent) -> None:
        # the output started playing this step's audio: the agent started speaking then
        if self.step.started_speaking_at is None:
            self.step.started_speaking_at = ev.created_at

    async def _play_segments(self, output: AudioOutput,
                             played: Pipe[Segment],
                             paced: Pipe[Segment] | None,
                             nursery: trio.Nursery) -> None:
        """Play each segment in turn; its transcription node (if overridden) runs in
        ``nursery`` from the start of its playout until its end (cut: until the cut).

        Cancellation: as ``_play_segment``.
        """
        timeout = self.activity.session.audio_write_timeout
        async with paced if paced is not None else nullcontext():
            async for segment in played:
                assert segment.frames is not None
                self.step.current_message_id = segment.message_id
                node = segment.node
                if node is not None:
                    nursery.start_soon(self._transcribe, node, None)
                output.on("playback_started", segment.on_playback_started)
                if paced is not None:
                    paced.send_nowait(segment)  # its words are released as it plays
                try:
                    await self._play_segment(output, segment, timeout)
                finally:
                    output.off("playback_started", segment.on_playback_started)
                    segment.pacing.cancel()
                if segment.cut:
                    if node is not None:
                        node.scope.cancel()  # what it made by the cut was recorded
                    return

    async def _play_segment(self, output: AudioOutput, segment: Segment,
                            timeout: float | None) -> None:
        """Play ``segment``'s audio, then wait for the rest of its transcript.

        Two phases, each recording what was played if it is cut: while the audio plays, a
        cut clears the output and keeps the transcript up to the played position; once all
        of it played (the user heard it all), the speech waits for the rest of the
        transcript (a realtime message's text may lag its audio; the transcription node may
        lag the text), as LiveKit waits for its text forwarding, and a cut then keeps all the
        transcript so far (the output has nothing left to clear).

        Cancellation: what was played is recorded (the output cleared while the audio
        plays); then the cancellation propagates.
        """
        if not await self._play_out(output, segment, timeout):
            return
        self.step.heard_seconds = segment.audio_duration  # all of it (for truncation)
        try:
            await segment.wait_transcript_complete()
        finally:
            self._record_played(segment, math.inf)

    async def _play_out(self, output: AudioOutput, segment: Segment,
                        timeout: float | None) -> bool:
        """Play ``segment``'s audio: True once all of it played, False when its playout was
        cut (interrupted by the output, or stalled: the speech is interrupted), what was
        heard recorded.

        Cancellation: the output is cleared and what was heard is recorded.
        """
        frames = segment.frames
        assert frames is not None
        try:
            pushed = False
            # the write deadline: one scope for the segment, lifted between bursts (see
            # write_frames); waiting for frames or for wait_ready is not bounded
            with trio.CancelScope() as deadline:
                # one schedule point per burst of frames, not one per frame
                while (burst := await frames.take(_BURST)) is not None:
                    await output.wait_ready()
                    await write_frames(output, burst, deadline=deadline, timeout=timeout)
                    pushed = True
                    segment.playback_started.set()  # an output that does not tell
            if deadline.cancelled_caught:
                assert timeout is not None  # no deadline was set otherwise
                raise AudioOutputStalled(timeout)
            if pushed:
                output.flush()
                ev = await output.wait_for_playout()
                if ev.interrupted:
                    segment.cut = True
                    self._record_played(segment, ev.playback_position)
                    return False
            return True
        except trio.Cancelled:
            self._clear_output(output, segment)
            raise
        except AudioOutputStalled as e:
            # the speech ends as interrupted, keeping what was heard (§4.5); the session
            # counts the stall and closes if the next speech stalls too
            segment.cut = True
            self._clear_output(output, segment)
            self.handle.interrupt(force=True)
            self.activity.report_model_error(self.handle, e, source=output)
            return False

    def _clear_output(self, output: AudioOutput, segment: Segment) -> None:
        ev = output.clear_buffer()
        self.step.heard_seconds = ev.playback_position if ev else 0.0
        self._record_played(segment, self.step.heard_seconds)

    async def _play_text(self, segments: Pipe[Segment]) -> None:
        # Text-only output: the agent is speaking from its first forwarded text (the
        # transcription node's first output, when the agent overrides the node).
        async for segment in segments:
            await self._show_segment(segment, segment.text_chunks)

    async def _show_segment(self, segment: Segment, text: AsyncIterable[str]) -> None:
        """Text-only output: show ``segment`` as its transcript is made (the node's output,
        else ``text``). Each piece is said at once, both kept for the history and sent to the
        transcription output, as LiveKit's text forwarding sends each piece; the segment
        ends on the output with its transcript.

        Cancellation: what was shown is what was said; the segment ends on the output there
        (one that showed nothing is not sent at all).
        """
        try:
            if segment.node is None:
                async for piece in text:
                    self._say_text(segment, piece)
            else:
                await self._transcribe(segment.node,
                                       lambda piece: self._say_text(segment, piece))
        except BaseException:
            if segment.forwarded:
                segment.release_transcript("", final=True,
                                           forward=self.activity.forward_transcription_nowait)
            raise
        segment.release_transcript("", final=True,
                                   forward=self.activity.forward_transcription_nowait)

    def _say_text(self, segment: Segment, text: str) -> None:
        if self.step.started_speaking_at is None:
            self.step.started_speaking_at = trio.current_time()
            self.activity.on_text_playback_started(self.handle)
        self.step.played_text += text
        segment.release_transcript(text, final=False,
                                   forward=self.activity.forward_transcription_nowait)

    async def _transcribe(self, node: NodeTranscript,
                          on_text: Callable[[str], None] | None) -> None:
        """Run the agent's transcription node over a segment's text as it is generated:
        what it yields is the segment's transcript (and goes to ``on_text``). A failing node
        is an ``error`` event; the transcript is then what it yielded before failing.

        Cancellation: the node is closed; the transcript is what it yielded so far.
        """
        transform = self.transcription_node
        assert transform is not None
        try:
            with node.scope:
                async with aclosing(await node_items(
                        transform(_WaitingText(node.input), self.settings))) as chunks:
                    async for chunk in chunks:
                        node.text += chunk
                        if on_text is not None:
                            on_text(chunk)
        except Exception as e:
            self.activity.session.conversation.report_transcription_error(
                e, self.activity.agent)
        finally:
            node.ended.set()

    def _record_played(self, segment: Segment, position: float) -> None:
        """Record what ``position`` seconds of ``segment``'s playout said, and end its
        transcription: all of its transcript once the audio played to its end; cut before,
        the words started by then at the synchronizer's pace (``Segment.word_starts``), and
        never less than the transcription output already showed (the synchronizer's pace
        may have changed since it released them: the text or the audio completed), so the
        history keeps what the output shows, as LiveKit keeps the synchronizer's
        ``synchronized_transcript`` (an unsynchronized output's text is all the node made,
        which LiveKit keeps too). Nothing played, nothing is kept."""
        transcript = segment.transcript
        if position <= 0.0:
            text = ""
        elif position >= segment.audio_duration:
            text = transcript
        else:
            heard = heard_text(segment.word_starts(), position,
                               audio_duration=segment.audio_duration).rstrip()
            # both are prefixes of the transcript (it only grows): the longer one
            text = max(heard, segment.forwarded, key=len)
        self.step.played_text += text
        # the synchronizer released part of it already: the rest, and the segment's end
        rest = text[len(segment.forwarded):] if text.startswith(segment.forwarded) else ""
        if segment.forwarded or text:
            segment.release_transcript(rest, final=True,
                                       forward=self.activity.forward_transcription_nowait)

    async def _pace_transcripts(self, segments: Pipe[Segment]) -> None:
        """The transcript synchronizer: each segment's words are released as its audio plays
        (see ``io.transcript_sync``), until its playout ends (``segment.pacing``); with an
        unsynchronized transcription output, as its text is generated instead."""
        output = self.activity.session.output.transcription
        synchronized = getattr(output, "synchronized", True)
        async for segment in segments:
            with segment.pacing:
                if synchronized:
                    await self._pace_transcript(segment)
                else:
                    await self._forward_as_generated(segment)

    async def _forward_as_generated(self, segment: Segment) -> None:
        while True:
            transcript = segment.transcript
            if len(transcript) > len(segment.forwarded):
                segment.release_transcript(transcript[len(segment.forwarded):], final=False,
                                           forward=self.activity.forward_transcription_nowait)
            if segment.transcript_complete and segment.forwarded == transcript:
                await trio.sleep_forever()  # all sent; the playout's end cancels this
            await trio.sleep(_PACE_POLL)

    async def _pace_transcript(self, segment: Segment) -> None:
        await segment.playback_started.wait()
        start = trio.current_time()
        # the word starts depend only on these (the text and timestamps only grow; the audio
        # so far counts once both are complete): computed again only when one changed
        inputs: tuple[object, ...] = ()
        starts: list[tuple[str, float]] = []
        while True:
            position = trio.current_time() - start
            text_complete = segment.transcript_complete
            complete = segment.audio_complete and text_complete
            now_inputs = (len(segment.transcript), len(segment.timestamps), text_complete,
                          complete, segment.audio_duration if complete else None)
            if now_inputs != inputs:
                inputs = now_inputs
                starts = segment.word_starts()
            # up to the end of the last word begun: its trailing space comes with the next
            heard = heard_text(starts, position, audio_duration=segment.audio_duration).rstrip()
            if len(heard) > len(segment.forwarded) and heard.startswith(segment.forwarded):
                segment.release_transcript(heard[len(segment.forwarded):], final=False,
                                           forward=self.activity.forward_transcription_nowait)
            wake = next_start(starts, position)
            if wake <= segment.audio_duration:
                await trio.sleep_until(start + wake)
            elif complete and wake == math.inf:
                await trio.sleep_forever()  # all released; the playout's end cancels this
            else:  # the next word waits for more text or audio
                await trio.sleep(_PACE_POLL)

    # -- tools -------------------------------------------------------------------------------
    async def _dispatch_tools(self, calls: Pipe[FunctionToolCall],
                              tool_nursery: trio.Nursery) -> None:
        async for tool_call in calls:
            if self.request.tool_choice == "none":
                continue
            # the provider's data goes with the call (and back to the provider with it)
            call = FunctionCall(call_id=tool_call.call_id or short_id("call"),
                                name=tool_call.name, arguments=tool_call.arguments,
                                extra=dict(tool_call.extra) if tool_call.extra else {})
            self.activity.dispatch_tool(self.handle, call, self.step, self.tools,
                                        tool_nursery)


def _overridden_transcription_node(agent: Agent) -> Callable[..., object] | None:
    """``agent``'s ``transcription_node`` if it overrides the default (which passes the text
    through unchanged), else None."""
    if type(agent).transcription_node is Agent.transcription_node:
        return None
    return agent.transcription_node
