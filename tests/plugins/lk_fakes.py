"""Small fake plugins written against LiveKit Agents' own base classes (asyncio code).

They behave like provider plugins do: their work runs in the plugin base classes' asyncio
tasks, they wait with ``asyncio.sleep`` (which follows Trio's clock through the bridge), and
they fail with LiveKit's ``APIError``. Each records what it was asked, for assertions.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
from livekit import rtc
from livekit.agents import (
    DEFAULT_API_CONNECT_OPTIONS,
    NOT_GIVEN,
    APIConnectOptions,
    APIError,
    llm,
    stt,
    tts,
    vad,
)

NO_RETRY = APIConnectOptions(max_retry=0)


# -- LLM ------------------------------------------------------------------------------------
class FakePluginLLM(llm.LLM):
    """Answers from ``replies`` keyed by the last user message or tool output.

    A reply is text, or ``("tool", name, arguments_json)`` for a tool call. ``ttft`` seconds
    pass (asyncio.sleep) before the first chunk; text is streamed word by word.
    """

    def __init__(self, replies: dict[str, Any], *, ttft: float = 0.5,
                 fail_with: Exception | None = None, hang: bool = False) -> None:
        super().__init__()
        self.replies = replies
        self.ttft = ttft
        self.fail_with = fail_with
        self.hang = hang
        self.requests: list[dict[str, Any]] = []
        self.cancelled = 0

    @property
    def model(self) -> str:
        return "fake-llm"

    def chat(self, *, chat_ctx: llm.ChatContext, tools: list[llm.Tool] | None = None,
             conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
             parallel_tool_calls: Any = NOT_GIVEN, tool_choice: Any = NOT_GIVEN,
             extra_kwargs: Any = NOT_GIVEN) -> llm.LLMStream:
        self.requests.append({"chat_ctx": chat_ctx, "tools": list(tools or []),
                              "tool_choice": tool_choice})
        return _FakeLLMStream(self, chat_ctx=chat_ctx, tools=tools or [],
                              conn_options=conn_options)


class _FakeLLMStream(llm.LLMStream):
    async def _run(self) -> None:
        fake: FakePluginLLM = self._llm  # type: ignore[assignment]
        try:
            await asyncio.sleep(fake.ttft)
            if fake.fail_with is not None:
                raise fake.fail_with
            if fake.hang:
                await asyncio.sleep(3600)
            last = self._chat_ctx.items[-1]
            key = (last.text_content if last.type == "message" else
                   last.output if last.type == "function_call_output" else "")
            reply = fake.replies.get(key or "", "")
            if isinstance(reply, tuple):
                _, name, arguments = reply
                self._event_ch.send_nowait(llm.ChatChunk(id="r1", delta=llm.ChoiceDelta(
                    role="assistant", tool_calls=[llm.FunctionToolCall(
                        name=name, arguments=arguments, call_id="call_1")])))
                return
            for i, word in enumerate(reply.split(" ")):
                self._event_ch.send_nowait(llm.ChatChunk(id="r1", delta=llm.ChoiceDelta(
                    role="assistant", content=word if i == 0 else " " + word)))
                await asyncio.sleep(0.01)
            self._event_ch.send_nowait(llm.ChatChunk(id="r1", usage=llm.CompletionUsage(
                completion_tokens=3, prompt_tokens=10, total_tokens=13)))
        except asyncio.CancelledError:
            fake.cancelled += 1
            raise


# -- STT ------------------------------------------------------------------------------------
class FakePluginSTT(stt.STT):
    """Hears speech as non-silent frames; when silence follows speech, reports ``transcript``
    (interim first, then final and end of speech) and a usage event."""

    def __init__(self, transcript: str = "what's the weather", *,
                 fail_after_frames: int | None = None, streaming: bool = True) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=streaming,
                                                          interim_results=True))
        self.transcript = transcript
        self.fail_after_frames = fail_after_frames
        self.frames = 0

    async def _recognize_impl(self, buffer: Any, *, language: Any = NOT_GIVEN,
                              conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
                              ) -> stt.SpeechEvent:
        return stt.SpeechEvent(type=stt.SpeechEventType.FINAL_TRANSCRIPT, alternatives=[
            stt.SpeechData(language="en", text=self.transcript)])

    def stream(self, *, language: Any = NOT_GIVEN,
               conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> Any:
        return _FakeSTTStream(stt=self, conn_options=conn_options)


def _loud(frame: rtc.AudioFrame) -> bool:
    return bool(np.any(np.frombuffer(frame.data, dtype=np.int16)))


class _FakeSTTStream(stt.RecognizeStream):
    async def _run(self) -> None:
        fake: FakePluginSTT = self._stt  # type: ignore[assignment]
        speaking = False
        async for item in self._input_ch:
            if isinstance(item, self._FlushSentinel):
                continue
            fake.frames += 1
            if fake.fail_after_frames is not None and fake.frames >= fake.fail_after_frames:
                raise APIError("stt socket closed by provider", retryable=False)
            if _loud(item) and not speaking:
                speaking = True
                self._event_ch.send_nowait(stt.SpeechEvent(
                    type=stt.SpeechEventType.START_OF_SPEECH))
                first = fake.transcript.split(" ")[0]
                self._event_ch.send_nowait(stt.SpeechEvent(
                    type=stt.SpeechEventType.INTERIM_TRANSCRIPT,
                    alternatives=[stt.SpeechData(language="en", text=first)]))
            elif not _loud(item) and speaking:
                speaking = False
                self._event_ch.send_nowait(stt.SpeechEvent(
                    type=stt.SpeechEventType.FINAL_TRANSCRIPT, alternatives=[
                        stt.SpeechData(language="en", text=fake.transcript, confidence=0.9)]))
                self._event_ch.send_nowait(stt.SpeechEvent(
                    type=stt.SpeechEventType.RECOGNITION_USAGE,
                    recognition_usage=stt.RecognitionUsage(audio_duration=1.0)))
                self._event_ch.send_nowait(stt.SpeechEvent(
                    type=stt.SpeechEventType.END_OF_SPEECH))


# -- VAD ------------------------------------------------------------------------------------
class FakePluginVAD(vad.VAD):
    """Energy VAD: speech starts at the first loud frame, ends after ``min_silence``."""

    def __init__(self, *, min_silence: float = 0.3) -> None:
        super().__init__(capabilities=vad.VADCapabilities(update_interval=0.1))
        self.min_silence = min_silence

    def stream(self) -> vad.VADStream:
        return _FakeVADStream(self)


class _FakeVADStream(vad.VADStream):
    async def _main_task(self) -> None:
        fake: FakePluginVAD = self._vad  # type: ignore[assignment]
        speaking, speech, silence, index = False, 0.0, 0.0, 0
        async for frame in self._input_ch:
            if isinstance(frame, self._FlushSentinel):
                continue
            index += frame.samples_per_channel
            if _loud(frame):
                speech += frame.duration
                silence = 0.0
                if not speaking:
                    speaking = True
                    self._event_ch.send_nowait(vad.VADEvent(
                        type=vad.VADEventType.START_OF_SPEECH, samples_index=index,
                        timestamp=0.0, speech_duration=speech, silence_duration=0.0,
                        speaking=True))
            else:
                silence += frame.duration
                if speaking and silence >= fake.min_silence:
                    speaking = False
                    self._event_ch.send_nowait(vad.VADEvent(
                        type=vad.VADEventType.END_OF_SPEECH, samples_index=index, timestamp=0.0,
                        speech_duration=speech, silence_duration=silence))
                    speech = 0.0
            self._event_ch.send_nowait(vad.VADEvent(
                type=vad.VADEventType.INFERENCE_DONE, samples_index=index, timestamp=0.0,
                speech_duration=speech, silence_duration=silence, speaking=speaking,
                probability=1.0 if speaking else 0.0))


# -- TTS ------------------------------------------------------------------------------------
RATE = 24000


class FakePluginTTS(tts.TTS):
    """Synthesizes ``seconds_per_char`` of a tone per character, ``ttfb`` after the text ended.

    ``streaming=False`` makes it a chunked (non-streaming) TTS, used through LiveKit's
    ``tts.StreamAdapter``.
    """

    def __init__(self, *, streaming: bool = True, ttfb: float = 0.2,
                 seconds_per_char: float = 0.01, fail_with: Exception | None = None,
                 hang: bool = False) -> None:
        super().__init__(capabilities=tts.TTSCapabilities(streaming=streaming),
                         sample_rate=RATE, num_channels=1)
        self.ttfb = ttfb
        self.seconds_per_char = seconds_per_char
        self.fail_with = fail_with
        self.hang = hang
        self.texts: list[str] = []
        self.cancelled = 0

    def _pcm(self, text: str) -> bytes:
        samples = int(round(len(text) * self.seconds_per_char * RATE))
        return np.full(samples, 1000, dtype=np.int16).tobytes()

    def synthesize(self, text: str, *,
                   conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> Any:
        return _FakeChunkedStream(tts=self, input_text=text, conn_options=conn_options)

    def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> Any:
        return _FakeSynthesizeStream(tts=self, conn_options=conn_options)


class _FakeChunkedStream(tts.ChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        fake: FakePluginTTS = self._tts  # type: ignore[assignment]
        fake.texts.append(self.input_text)
        output_emitter.initialize(request_id="req", sample_rate=RATE, num_channels=1,
                                  mime_type="audio/pcm")
        await asyncio.sleep(fake.ttfb)
        output_emitter.push(fake._pcm(self.input_text))
        output_emitter.flush()


class _FakeSynthesizeStream(tts.SynthesizeStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        fake: FakePluginTTS = self._tts  # type: ignore[assignment]
        output_emitter.initialize(request_id="req", sample_rate=RATE, num_channels=1,
                                  mime_type="audio/pcm", stream=True)
        output_emitter.start_segment(segment_id="seg")
        text = ""
        try:
            async for data in self._input_ch:
                if isinstance(data, self._FlushSentinel):
                    continue
                text += data
            fake.texts.append(text)
            self._mark_started()
            await asyncio.sleep(fake.ttfb)
            if fake.fail_with is not None:
                raise fake.fail_with
            pcm = fake._pcm(text)
            step = RATE // 10 * 2  # 100 ms chunks
            for i in range(0, len(pcm), step):
                output_emitter.push(pcm[i:i + step])
                if fake.hang:
                    await asyncio.sleep(3600)
            output_emitter.end_segment()
        except asyncio.CancelledError:
            fake.cancelled += 1
            raise


# -- realtime ---------------------------------------------------------------------------------
class FakePluginRealtimeModel(llm.RealtimeModel):
    def __init__(self, *, supports_say: bool = False) -> None:
        super().__init__(capabilities=llm.RealtimeCapabilities(
            message_truncation=True, turn_detection=True, user_transcription=True,
            auto_tool_reply_generation=False, audio_output=True, manual_function_calls=True,
            supports_say=supports_say))
        self.sessions: list[FakePluginRealtimeSession] = []

    def session(self) -> FakePluginRealtimeSession:
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


class FakePluginRealtimeSession(llm.RealtimeSession):
    def __init__(self, model: FakePluginRealtimeModel) -> None:
        super().__init__(model)
        self.calls: list[tuple[str, Any]] = []
        self.audio_frames = 0
        self.closed = False
        self.stall = False  # generations whose streams never end
        self.reply_delay = 0.2  # seconds from generate_reply()/say() to response.created
        self.created: list[tuple[str, bool]] = []  # (text, created after its future was done)
        self._chat_ctx = llm.ChatContext.empty()

    @property
    def chat_ctx(self) -> llm.ChatContext:
        return self._chat_ctx

    @property
    def tools(self) -> llm.ToolContext:
        return llm.ToolContext.empty()

    async def update_instructions(self, instructions: str) -> None:
        self.calls.append(("update_instructions", instructions))

    async def update_chat_ctx(self, chat_ctx: llm.ChatContext) -> None:
        self.calls.append(("update_chat_ctx", [i.type for i in chat_ctx.items]))
        self._chat_ctx = chat_ctx

    async def update_tools(self, tools: list[llm.Tool]) -> None:
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
        modalities: asyncio.Future[list[str]] = loop.create_future()
        modalities.set_result(["audio", "text"])
        frame = rtc.AudioFrame(bytes(480), RATE, 1, 240)
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
        future: asyncio.Future[llm.GenerationCreatedEvent] = (
            asyncio.get_running_loop().create_future())

        async def respond() -> None:
            await asyncio.sleep(self.reply_delay)
            late = future.done()
            ev = self._generation(text, user_initiated=not late)
            self.created.append((text, late))
            self.emit("generation_created", ev)
            if not late:
                future.set_result(ev)

        asyncio.ensure_future(respond())
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
        self.closed = True

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
