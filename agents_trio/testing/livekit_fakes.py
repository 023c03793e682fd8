"""Fake provider plugins written on LiveKit Agents' own base classes (asyncio code).

They are real subclasses of ``livekit.agents.llm.LLM``/``LLMStream``, ``stt.STT``/
``RecognizeStream``, ``tts.TTS``/``ChunkedStream``/``SynthesizeStream``, ``vad.VAD``/
``VADStream`` and ``llm.RealtimeModel``/``RealtimeSession``, so the same object works:

- on LiveKit Agents' ``AgentSession`` (asyncio), as any provider plugin does;
- on ``agents_trio.AgentSession``, passed as it is: the session adapts it when constructed
  (``agents_trio.model_resolution``) and runs it on its asyncio bridge, whose clock is
  Trio's, so ``asyncio.sleep`` inside a fake follows ``trio.testing.MockClock``.

Use them to test a port of your own plugin or an example meant for both runtimes::

    from agents_trio.testing.livekit_fakes import FakePluginLLM, FakePluginTTS, tool_call

    llm = FakePluginLLM({
        "What's the weather in Paris?": tool_call("lookup_weather", city="Paris"),
        "sunny in Paris": "It is sunny in Paris.",      # answers the tool's output
    })
    session = AgentSession(llm=llm, tts=FakePluginTTS())   # either runtime's AgentSession

Scripting the LLM: a reply is a string (streamed word by word), a LiveKit
``llm.FunctionToolCall`` (:func:`tool_call` makes one), or a list of those (several tool
calls, text and calls). ``replies`` is either a dict keyed by the text of the last item of
the chat context (the user's message, or a tool's output when the model is asked again after
its tools ran) or a list consumed one reply per request. Each fake records what it was asked
(``requests``, ``texts``, ``frames``) and can fail (``fail_with``: a LiveKit ``APIError``, as
a provider's failure) or hang (``hang``: for cancellation tests).

Needs ``livekit-agents``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Literal, Union

import numpy as np
from livekit import rtc
from livekit.agents import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    APIError,
    LanguageCode,
    NotGivenOr,
    llm,
    stt,
    tts,
    utils,
    vad,
)
from livekit.agents.inference_runner import _InferenceRunner

__all__ = [
    "FakePluginLLM", "FakePluginRealtimeModel", "FakePluginRealtimeSession", "FakePluginSTT",
    "FakePluginTTS", "FakePluginVAD", "FakeEnglishTurnDetectorRunner", "FakeTurnDetectorRunner",
    "LLMReply", "NO_RETRY", "TURN_DETECTOR_METHODS", "is_loud", "tool_call",
    "use_fake_turn_detector_runners", "write_fake_turn_detector_files",
]

#: connection options without retries: a scripted failure surfaces at once
NO_RETRY = APIConnectOptions(max_retry=0)

#: what a scripted LLM request answers: text, a tool call, or several of them in order
LLMReply = Union[str, llm.FunctionToolCall, tuple[str, str, str],
                 Sequence[Union[str, llm.FunctionToolCall]]]


def tool_call(name: str, arguments: dict[str, object] | str | None = None, /, *,
              call_id: str = "", **kwargs: object) -> llm.FunctionToolCall:
    """A scripted tool call: ``tool_call("lookup_weather", city="Paris")`` or
    ``tool_call("lookup_weather", {"city": "Paris"})``; ``call_id`` defaults to a fresh one
    per request."""
    if isinstance(arguments, str):
        raw = arguments
    else:
        raw = json.dumps({**(arguments or {}), **kwargs})
    return llm.FunctionToolCall(name=name, arguments=raw, call_id=call_id)


def is_loud(frame: rtc.AudioFrame, threshold: int = 100) -> bool:
    """Whether a 16-bit frame holds a sample louder than ``threshold`` (the fakes' "speech")."""
    samples = np.frombuffer(frame.data, dtype=np.int16)
    return bool(samples.size and int(np.abs(samples).max()) > threshold)


# -- LLM ------------------------------------------------------------------------------------
class FakePluginLLM(llm.LLM[Any]):
    """A scripted chat model (see the module docstring for ``replies``).

    Args:
        replies: A dict from the last chat item's text to a reply, or a list of replies
            answered in order (one per ``chat()``).
        default: The reply when the dict has no key for a request, or the list is used up.
        ttft: Seconds before the first chunk (``asyncio.sleep``: the runtime's clock).
        word_delay: Seconds after each word of a text reply.
        fail_with: Raised by every stream after ``ttft`` (e.g. ``APIError("down")``).
        hang: Streams never finish after ``ttft`` (cancellation tests).

    Attributes:
        requests: One dict per ``chat()`` (``chat_ctx``, ``tools``, ``tool_choice``).
        cancelled: Streams cancelled while running.
    """

    def __init__(self, replies: dict[str, LLMReply] | Sequence[LLMReply] | None = None, *,
                 default: LLMReply = "", ttft: float = 0.2, word_delay: float = 0.01,
                 fail_with: Exception | None = None, hang: bool = False) -> None:
        super().__init__()
        self.replies: dict[str, LLMReply] | list[LLMReply] = (
            dict(replies) if isinstance(replies, dict) else list(replies or []))
        self.default = default
        self.ttft = ttft
        self.word_delay = word_delay
        self.fail_with = fail_with
        self.hang = hang
        self.requests: list[dict[str, Any]] = []
        self.cancelled = 0
        self._call_ids = itertools.count(1)

    @property
    def model(self) -> str:
        return "fake-llm"

    @property
    def provider(self) -> str:
        return "fake"

    def reply_for(self, chat_ctx: llm.ChatContext) -> list[str | llm.FunctionToolCall]:
        """The scripted reply to a request, as a list of text and tool calls."""
        if isinstance(self.replies, dict):
            reply = self.replies.get(_last_text(chat_ctx), self.default)
        else:
            reply = self.replies.pop(0) if self.replies else self.default
        if isinstance(reply, tuple) and len(reply) == 3 and reply[0] == "tool":
            # the older ("tool", name, arguments_json) form
            reply = tool_call(str(reply[1]), str(reply[2]))
        parts: list[str | llm.FunctionToolCall] = (
            [reply] if isinstance(reply, (str, llm.FunctionToolCall)) else list(reply))
        return [p if isinstance(p, str) or p.call_id else
                p.model_copy(update={"call_id": f"call_{next(self._call_ids)}"})
                for p in parts]

    def chat(self, *, chat_ctx: llm.ChatContext, tools: list[llm.Tool] | None = None,
             conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
             parallel_tool_calls: NotGivenOr[bool] = NOT_GIVEN,
             tool_choice: NotGivenOr[llm.ToolChoice] = NOT_GIVEN,
             extra_kwargs: NotGivenOr[dict[str, Any]] = NOT_GIVEN) -> llm.LLMStream:
        self.requests.append({"chat_ctx": chat_ctx, "tools": list(tools or []),
                              "tool_choice": tool_choice})
        return _FakeLLMStream(self, chat_ctx=chat_ctx, tools=tools or [],
                              conn_options=conn_options)


def _last_text(chat_ctx: llm.ChatContext) -> str:
    if not chat_ctx.items:
        return ""
    last = chat_ctx.items[-1]
    if last.type == "message":
        return last.text_content or ""
    if last.type == "function_call_output":
        return last.output
    return ""


class _FakeLLMStream(llm.LLMStream):
    async def _run(self) -> None:
        fake = self._llm
        assert isinstance(fake, FakePluginLLM)
        try:
            await asyncio.sleep(fake.ttft)
            if fake.fail_with is not None:
                raise fake.fail_with
            if fake.hang:
                await asyncio.Event().wait()
            reply = fake.reply_for(self._chat_ctx)
            words = 0
            for part in reply:
                if isinstance(part, llm.FunctionToolCall):
                    self._event_ch.send_nowait(llm.ChatChunk(id="fake", delta=llm.ChoiceDelta(
                        role="assistant", tool_calls=[part])))
                    continue
                for i, word in enumerate(part.split(" ")):
                    words += 1
                    self._event_ch.send_nowait(llm.ChatChunk(id="fake", delta=llm.ChoiceDelta(
                        role="assistant", content=word if i == 0 else " " + word)))
                    await asyncio.sleep(fake.word_delay)
            self._event_ch.send_nowait(llm.ChatChunk(id="fake", usage=llm.CompletionUsage(
                completion_tokens=max(words, 1), prompt_tokens=len(self._chat_ctx.items),
                total_tokens=max(words, 1) + len(self._chat_ctx.items))))
        except asyncio.CancelledError:
            fake.cancelled += 1
            raise


# -- STT ------------------------------------------------------------------------------------
class FakePluginSTT(stt.STT[Any]):
    """Hears speech as loud frames (:func:`is_loud`). At the first loud frame of an utterance
    it reports start of speech and an interim transcript (the first word); at the first quiet
    frame after it, the final transcript, a usage event and end of speech.

    Args:
        transcripts: The final transcript of each utterance in turn (a single string: every
            utterance's); the last one repeats once the list is used up.
        streaming: False makes it a batch STT (``recognize`` only): LiveKit's
            ``stt.StreamAdapter`` segments the audio with a VAD.
        fail_after_frames: Raise LiveKit's ``APIError`` at that frame (a dropped socket).
        language: The language reported with each transcript.

    Attributes:
        frames: Frames received. utterances: Final transcripts reported.
    """

    def __init__(self, transcripts: str | Sequence[str] = "hello", *, streaming: bool = True,
                 fail_after_frames: int | None = None, language: str = "en") -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=streaming,
                                                          interim_results=True))
        self.transcripts = [transcripts] if isinstance(transcripts, str) else list(transcripts)
        if not self.transcripts:
            raise ValueError("FakePluginSTT needs at least one transcript")
        self.fail_after_frames = fail_after_frames
        self.language = language
        self.frames = 0
        self.utterances: list[str] = []

    @property
    def model(self) -> str:
        return "fake-stt"

    @property
    def provider(self) -> str:
        return "fake"

    def next_transcript(self) -> str:
        """The transcript of the next utterance (recorded in ``utterances``)."""
        index = min(len(self.utterances), len(self.transcripts) - 1)
        self.utterances.append(self.transcripts[index])
        return self.transcripts[index]

    def final_event(self, text: str) -> stt.SpeechEvent:
        return stt.SpeechEvent(type=stt.SpeechEventType.FINAL_TRANSCRIPT, alternatives=[
            stt.SpeechData(language=LanguageCode(self.language), text=text, confidence=0.9)])

    async def _recognize_impl(self, buffer: utils.AudioBuffer, *,
                              language: NotGivenOr[str] = NOT_GIVEN,
                              conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
                              ) -> stt.SpeechEvent:
        return self.final_event(self.next_transcript())

    def stream(self, *, language: NotGivenOr[str] = NOT_GIVEN,
               conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
               ) -> stt.RecognizeStream:
        if not self.capabilities.streaming:
            return super().stream(language=language, conn_options=conn_options)
        return _FakeSTTStream(stt=self, conn_options=conn_options)


class _FakeSTTStream(stt.RecognizeStream):
    async def _run(self) -> None:
        fake = self._stt
        assert isinstance(fake, FakePluginSTT)
        speaking = False
        async for item in self._input_ch:
            if isinstance(item, self._FlushSentinel):
                continue
            fake.frames += 1
            if fake.fail_after_frames is not None and fake.frames >= fake.fail_after_frames:
                raise APIError("stt socket closed by provider", retryable=False)
            loud = is_loud(item)
            if loud and not speaking:
                speaking = True
                text = fake.next_transcript()
                self._event_ch.send_nowait(stt.SpeechEvent(
                    type=stt.SpeechEventType.START_OF_SPEECH))
                self._event_ch.send_nowait(stt.SpeechEvent(
                    type=stt.SpeechEventType.INTERIM_TRANSCRIPT, alternatives=[
                        stt.SpeechData(language=LanguageCode(fake.language),
                                       text=text.split(" ")[0])]))
            elif not loud and speaking:
                speaking = False
                self._event_ch.send_nowait(fake.final_event(fake.utterances[-1]))
                self._event_ch.send_nowait(stt.SpeechEvent(
                    type=stt.SpeechEventType.RECOGNITION_USAGE,
                    recognition_usage=stt.RecognitionUsage(audio_duration=1.0)))
                self._event_ch.send_nowait(stt.SpeechEvent(
                    type=stt.SpeechEventType.END_OF_SPEECH))


# -- VAD ------------------------------------------------------------------------------------
class FakePluginVAD(vad.VAD):
    """An energy VAD: speech starts at the first loud frame (:func:`is_loud`) and ends after
    ``min_silence`` seconds of quiet ones; every frame gives an ``INFERENCE_DONE`` event.

    Attributes:
        frames: Frames received.
    """

    def __init__(self, *, min_silence: float = 0.3, update_interval: float = 0.02) -> None:
        super().__init__(capabilities=vad.VADCapabilities(update_interval=update_interval))
        self.min_silence = min_silence
        self.frames = 0

    @property
    def model(self) -> str:
        return "fake-vad"

    @property
    def provider(self) -> str:
        return "fake"

    def stream(self) -> vad.VADStream:
        return _FakeVADStream(self)


class _FakeVADStream(vad.VADStream):
    async def _main_task(self) -> None:
        fake = self._vad
        assert isinstance(fake, FakePluginVAD)
        speaking, speech, silence, index = False, 0.0, 0.0, 0
        async for frame in self._input_ch:
            if isinstance(frame, self._FlushSentinel):
                continue
            fake.frames += 1
            index += frame.samples_per_channel
            if is_loud(frame):
                speech += frame.duration
                silence = 0.0
                if not speaking:
                    speaking = True
                    self._event_ch.send_nowait(vad.VADEvent(
                        type=vad.VADEventType.START_OF_SPEECH, samples_index=index,
                        timestamp=0.0, speech_duration=speech, silence_duration=0.0,
                        speaking=True, frames=[frame]))
            else:
                silence += frame.duration
                if speaking and silence >= fake.min_silence:
                    speaking = False
                    self._event_ch.send_nowait(vad.VADEvent(
                        type=vad.VADEventType.END_OF_SPEECH, samples_index=index, timestamp=0.0,
                        speech_duration=speech, silence_duration=silence, frames=[frame]))
                    speech = 0.0
            self._event_ch.send_nowait(vad.VADEvent(
                type=vad.VADEventType.INFERENCE_DONE, samples_index=index, timestamp=0.0,
                speech_duration=speech, silence_duration=silence, speaking=speaking,
                probability=1.0 if speaking else 0.0, frames=[frame]))


# -- TTS ------------------------------------------------------------------------------------
class FakePluginTTS(tts.TTS[Any]):
    """Synthesizes a tone (or silence) lasting ``seconds_per_char`` per character of text,
    ``ttfb`` seconds after the text is complete, in 100 ms chunks.

    Args:
        streaming: False makes it a chunked TTS (``synthesize`` only), used through LiveKit's
            ``tts.StreamAdapter`` sentence by sentence.
        ttfb: Seconds before the first audio.
        seconds_per_char: Audio per character (0.06 s is about natural speech).
        tone_hz: The tone's frequency; None synthesizes silence.
        sample_rate: Output rate (mono 16-bit).
        fail_with: Raised by every synthesis after ``ttfb``.
        hang: Syntheses stop after their first chunk and never finish.

    Attributes:
        texts: The text of each synthesis. cancelled: Syntheses cancelled while running.
    """

    def __init__(self, *, streaming: bool = True, ttfb: float = 0.2,
                 seconds_per_char: float = 0.06, tone_hz: float | None = 440.0,
                 sample_rate: int = 24000, fail_with: Exception | None = None,
                 hang: bool = False) -> None:
        super().__init__(capabilities=tts.TTSCapabilities(streaming=streaming),
                         sample_rate=sample_rate, num_channels=1)
        self.ttfb = ttfb
        self.seconds_per_char = seconds_per_char
        self.tone_hz = tone_hz
        self.fail_with = fail_with
        self.hang = hang
        self.texts: list[str] = []
        self.cancelled = 0

    @property
    def model(self) -> str:
        return "fake-tts"

    @property
    def provider(self) -> str:
        return "fake"

    def duration_of(self, text: str) -> float:
        """Seconds of audio synthesized for ``text``."""
        return len(text) * self.seconds_per_char

    def pcm(self, text: str) -> bytes:
        """The 16-bit mono audio for ``text``."""
        samples = int(round(self.duration_of(text) * self.sample_rate))
        if self.tone_hz is None:
            return bytes(2 * samples)
        t = np.arange(samples) / self.sample_rate
        return (np.sin(2 * math.pi * self.tone_hz * t) * 3000).astype(np.int16).tobytes()

    def synthesize(self, text: str, *,
                   conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
                   ) -> tts.ChunkedStream:
        return _FakeChunkedStream(tts=self, input_text=text, conn_options=conn_options)

    def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
               ) -> tts.SynthesizeStream:
        if not self.capabilities.streaming:
            return super().stream(conn_options=conn_options)
        return _FakeSynthesizeStream(tts=self, conn_options=conn_options)


async def _emit_audio(fake: FakePluginTTS, text: str, emitter: tts.AudioEmitter) -> None:
    fake.texts.append(text)
    try:
        await asyncio.sleep(fake.ttfb)
        if fake.fail_with is not None:
            raise fake.fail_with
        pcm = fake.pcm(text)
        step = fake.sample_rate // 10 * 2  # 100 ms of 16-bit mono
        for i in range(0, len(pcm), step):
            emitter.push(pcm[i:i + step])
            if fake.hang:
                await asyncio.Event().wait()
    except asyncio.CancelledError:
        fake.cancelled += 1
        raise


class _FakeChunkedStream(tts.ChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        fake = self._tts
        assert isinstance(fake, FakePluginTTS)
        output_emitter.initialize(request_id=utils.shortuuid(), sample_rate=fake.sample_rate,
                                  num_channels=1, mime_type="audio/pcm")
        await _emit_audio(fake, self.input_text, output_emitter)
        output_emitter.flush()


class _FakeSynthesizeStream(tts.SynthesizeStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        fake = self._tts
        assert isinstance(fake, FakePluginTTS)
        output_emitter.initialize(request_id=utils.shortuuid(), sample_rate=fake.sample_rate,
                                  num_channels=1, mime_type="audio/pcm", stream=True)
        output_emitter.start_segment(segment_id=utils.shortuuid())
        text = ""
        async for data in self._input_ch:
            if isinstance(data, self._FlushSentinel):
                continue
            text += data
        self._mark_started()
        await _emit_audio(fake, text, output_emitter)
        output_emitter.end_segment()


# -- realtime ---------------------------------------------------------------------------------
class FakePluginRealtimeModel(llm.RealtimeModel):
    """A realtime (speech-to-speech) model whose sessions are :class:`FakePluginRealtimeSession`
    (kept in ``sessions``)."""

    def __init__(self, *, supports_say: bool = False) -> None:
        super().__init__(capabilities=llm.RealtimeCapabilities(
            message_truncation=True, turn_detection=True, user_transcription=True,
            auto_tool_reply_generation=False, audio_output=True, manual_function_calls=True,
            supports_say=supports_say))
        self.sessions: list[FakePluginRealtimeSession] = []

    def session(self, *, turn_detection_disabled: bool = False
                ) -> FakePluginRealtimeSession:
        session = FakePluginRealtimeSession(self)
        self.sessions.append(session)
        return session


async def _aiter(items: list[Any], delay: float = 0.0, *, stall: bool = False
                 ) -> AsyncIterator[Any]:
    for item in items:
        await asyncio.sleep(delay)
        yield item
    if stall:  # the provider's end of the stream never comes
        await asyncio.Event().wait()


class FakePluginRealtimeSession(llm.RealtimeSession[Any]):
    """A scripted realtime session: records every call in ``calls``; ``generate_reply()`` and
    ``say()`` create a response ``reply_delay`` seconds later (streaming its text ahead of two
    audio frames); :meth:`server_turn` plays a turn the server detected (speech started and
    stopped, a transcript, a reply with a tool call). ``stall = True`` makes later responses'
    streams never end."""

    def __init__(self, model: FakePluginRealtimeModel) -> None:
        super().__init__(model)
        self.calls: list[tuple[str, Any]] = []
        self.audio_frames = 0
        self.closed = False
        self.stall = False  # generations whose streams never end
        self.reply_delay = 0.2  # seconds from generate_reply()/say() to response.created
        self.created: list[tuple[str, bool]] = []  # (text, created after its future was done)
        self._chat_ctx = llm.ChatContext.empty()
        # the responses still to be created (generate_reply/say): timers the session owns
        self._responses: set[asyncio.TimerHandle] = set()

    @property
    def chat_ctx(self) -> llm.ChatContext:
        return self._chat_ctx

    @property
    def tools(self) -> llm.ToolContext:
        return llm.ToolContext.empty()

    async def update_instructions(self, instructions: str) -> None:
        """asyncio: record the call.

        Cancellation: nothing to cancel (it returns at once).
        """
        self.calls.append(("update_instructions", instructions))

    async def update_chat_ctx(self, chat_ctx: llm.ChatContext) -> None:
        """asyncio: record the call and keep ``chat_ctx``.

        Cancellation: nothing to cancel (it returns at once).
        """
        self.calls.append(("update_chat_ctx", [i.type for i in chat_ctx.items]))
        self._chat_ctx = chat_ctx

    async def update_tools(self, tools: list[llm.Tool]) -> None:
        """asyncio: record the call.

        Cancellation: nothing to cancel (it returns at once).
        """
        self.calls.append(("update_tools", len(tools)))

    def update_options(self, *, tool_choice: Any = NOT_GIVEN) -> None:
        self.calls.append(("update_options", tool_choice))

    def push_audio(self, frame: rtc.AudioFrame) -> None:
        self.audio_frames += 1

    def push_video(self, frame: Any) -> None:
        pass

    def _generation(self, text: str, *, user_initiated: bool,
                    calls: list[llm.FunctionCall] | None = None) -> llm.GenerationCreatedEvent:
        loop = asyncio.get_running_loop()
        modalities: asyncio.Future[list[Literal["text", "audio"]]] = loop.create_future()
        modalities.set_result(["audio", "text"])
        frame = rtc.AudioFrame(bytes(480), 24000, 1, 240)
        words = [w if i == 0 else " " + w for i, w in enumerate(text.split(" "))]
        # the transcript streams ahead of the audio, as providers send it
        stall = self.stall
        message = llm.MessageGeneration(message_id="msg_1",
                                        text_stream=_aiter(words, 0.05, stall=stall),
                                        audio_stream=_aiter([frame, frame], 0.1, stall=stall),
                                        modalities=modalities)
        return llm.GenerationCreatedEvent(message_stream=_aiter([message], stall=stall),
                                          function_stream=_aiter(calls or [], stall=stall),
                                          user_initiated=user_initiated, response_id="resp_1")

    def generate_reply(self, *, instructions: Any = NOT_GIVEN, tool_choice: Any = NOT_GIVEN,
                       tools: Any = NOT_GIVEN) -> asyncio.Future[llm.GenerationCreatedEvent]:
        self.calls.append(("generate_reply", instructions))
        return self._request("hello from realtime")

    def say(self, text: Any) -> asyncio.Future[llm.GenerationCreatedEvent]:
        self.calls.append(("say", text))
        return self._request(text)

    def _request(self, text: str) -> asyncio.Future[llm.GenerationCreatedEvent]:
        """The server creates the response ``reply_delay`` s after the request, whatever
        happened to the request's future meanwhile; as LiveKit's OpenAI plugin, a response
        whose future is already done (cancelled, timed out) is emitted as not user-initiated.
        A ``response.cancel`` (``interrupt()``) sent before it was created does not stop it
        (the worst case: a provider that creates responses late, or cannot cancel)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[llm.GenerationCreatedEvent] = loop.create_future()

        def respond() -> None:
            self._responses.discard(timer)
            late = future.done()
            ev = self._generation(text, user_initiated=not late)
            self.created.append((text, late))
            self.emit("generation_created", ev)
            if not late:
                future.set_result(ev)

        # a timer, no task: the session keeps it, and aclose() cancels what is still pending
        timer = loop.call_later(self.reply_delay, respond)
        self._responses.add(timer)
        return future

    def commit_audio(self) -> None:
        self.calls.append(("commit_audio", self.audio_frames))

    def clear_audio(self) -> None:
        self.calls.append(("clear_audio", None))

    def interrupt(self) -> None:
        self.calls.append(("interrupt", None))

    def truncate(self, *, message_id: str, modalities: Any, audio_end_ms: int,
                 audio_transcript: Any = NOT_GIVEN) -> None:
        self.calls.append(("truncate", (message_id, audio_end_ms)))

    async def aclose(self) -> None:
        """asyncio: mark the session closed.

        Cancellation: not a checkpoint; the responses still pending are cancelled (their
        timers never fire).
        """
        self.closed = True
        for timer in self._responses:
            timer.cancel()
        self._responses.clear()

    # server side, driven by the test (asyncio side) ------------------------------------------
    def server_turn(self) -> None:
        self.emit("input_speech_started", llm.InputSpeechStartedEvent())
        self.emit("input_speech_stopped", llm.InputSpeechStoppedEvent(
            user_transcription_enabled=True))
        self.emit("input_audio_transcription_completed", llm.InputTranscriptionCompleted(
            item_id="item_u1", transcript="hi there", is_final=True))
        self.emit("generation_created", self._generation(
            "server reply", user_initiated=False,
            calls=[llm.FunctionCall(call_id="c1", name="lookup", arguments='{"q": 1}')]))


# -- the turn detector's model, faked ------------------------------------------------------------
#: the inference methods of ``livekit-plugins-turn-detector`` (multilingual, English)
TURN_DETECTOR_METHODS = ("lk_end_of_utterance_multilingual", "lk_end_of_utterance_en")


class FakeTurnDetectorRunner(_InferenceRunner):
    """A LiveKit inference runner standing in for the turn detector's model, under its
    inference method: it answers a scripted end-of-utterance probability instead of running
    the model (whose files cannot be downloaded in tests).

    The script is the user's last message: one that trails off (ends with ``...`` or
    ``…``) gets :attr:`UNLIKELY` (the user has not finished: the turn waits), any other
    :attr:`LIKELY`. Scripted by the input, so it needs no state: LiveKit runs runners in a
    child process, which imports this class by name. Subclass it (at module level) and
    override :meth:`probability` for another script.
    """

    INFERENCE_METHOD = "lk_end_of_utterance_multilingual"
    UNLIKELY = 0.01
    LIKELY = 0.99

    def initialize(self) -> None:
        """Nothing to load."""

    def probability(self, text: str) -> float:
        """The end-of-utterance probability for the user's last message ``text``."""
        return self.UNLIKELY if text.rstrip().endswith(("...", "…")) else self.LIKELY

    def run(self, data: bytes) -> bytes | None:
        """LiveKit's runner protocol: ``{"chat_ctx": [{"role", "content"}, ...]}`` in,
        ``{"eou_probability", "duration", "input"}`` out (as the real runner answers)."""
        messages = json.loads(data).get("chat_ctx") or []
        text = next((str(m.get("content", "")) for m in reversed(messages)
                     if m.get("role") == "user"), "")
        return json.dumps({"eou_probability": self.probability(text), "duration": 0.0,
                           "input": text}).encode()


class FakeEnglishTurnDetectorRunner(FakeTurnDetectorRunner):
    """:class:`FakeTurnDetectorRunner` under the English model's inference method."""

    INFERENCE_METHOD = "lk_end_of_utterance_en"


def use_fake_turn_detector_runners() -> None:
    """Register the fake runners in place of the turn detector plugin's (both models):
    the plugin is imported first (importing it registers its own runners), then its
    entries are replaced. Call it on the main thread, before the job starts (LiveKit's
    worker, or this runtime's job, reads the registered runners when it starts its inference
    process)."""
    import livekit.plugins.turn_detector.english  # noqa: F401 - registers its runner
    import livekit.plugins.turn_detector.multilingual  # noqa: F401 - registers its runner

    registered = _InferenceRunner.registered_runners
    registered[FakeTurnDetectorRunner.INFERENCE_METHOD] = FakeTurnDetectorRunner
    registered[FakeEnglishTurnDetectorRunner.INFERENCE_METHOD] = FakeEnglishTurnDetectorRunner


def write_fake_turn_detector_files(cache_dir: str | os.PathLike[str],
                                   thresholds: dict[str, float] | None = None) -> Path:
    """Write the one file the turn detector's models read when constructed
    (``languages.json``: the unlikely-threshold per language) into a Hugging Face cache
    at ``cache_dir``, for both models' revisions. Point ``HF_HUB_CACHE`` at it (before
    ``huggingface_hub`` is imported, or patch ``huggingface_hub.constants.HF_HUB_CACHE``).

    Args:
        thresholds: Threshold per language code (default: English, 0.5).

    Returns:
        ``cache_dir`` as a path.
    """
    from livekit.plugins.turn_detector.models import HG_MODEL, MODEL_REVISIONS

    root = Path(cache_dir)
    repo = root / f"models--{HG_MODEL.replace('/', '--')}"
    languages = {code: {"threshold": value}
                 for code, value in (thresholds or {"en": 0.5}).items()}
    for index, revision in enumerate(sorted(set(MODEL_REVISIONS.values()))):
        commit = f"{index:040x}"
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / revision).write_text(commit)
        snapshot = repo / "snapshots" / commit
        snapshot.mkdir(parents=True, exist_ok=True)
        (snapshot / "languages.json").write_text(json.dumps(languages))
    return root
