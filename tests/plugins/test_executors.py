"""Plugins that bring their own executor work through adapt() (issue 11, item 1).

trio-asyncio's loop accepts only its own executor in ``run_in_executor``; the bridge makes any
``concurrent.futures.Executor`` work. Real encoded audio: mp3 and ogg/opus are encoded here
with PyAV and decoded by LiveKit's ``AudioStreamDecoder`` (which runs its decoding loop on its
own ``ThreadPoolExecutor``) inside a TTS plugin built on LiveKit's base classes.

Real threads run here, so the tests that wait on them use the real clock, bounded by
``trio.fail_after``.
"""

from __future__ import annotations

import asyncio
import io
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
import trio

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")
av = pytest.importorskip("av", reason="encoding test audio needs PyAV")

from livekit import rtc  # noqa: E402
from speech_audio import ESPEAK, padded_sentence, speech_bounds  # noqa: E402
from livekit.agents import DEFAULT_API_CONNECT_OPTIONS, APIConnectOptions, stt, tts, vad  # noqa: E402

from agents_trio import APIError, SpeechEventType, VADEventType  # noqa: E402
from agents_trio.io.bridge import open_bridge  # noqa: E402
from agents_trio.plugins import TTSAdapter, adapt  # noqa: E402

SECONDS = 1.2
TONE_HZ = 440.0


def encode(container: str, codec: str, rate: int, seconds: float = SECONDS) -> bytes:
    """A mono 440 Hz tone of ``seconds``, encoded with PyAV."""
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate)
        stream.layout = "mono"
        n = int(rate * seconds)
        pcm = (np.sin(2 * np.pi * TONE_HZ * np.arange(n) / rate) * 8000).astype(np.int16)
        for i in range(0, n, 960):
            chunk = pcm[i:i + 960]
            frame = av.AudioFrame.from_ndarray(chunk.reshape(1, -1), format="s16", layout="mono")
            frame.sample_rate = rate
            frame.pts = i
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


ENCODINGS = {
    "mp3": ("audio/mpeg", lambda: encode("mp3", "mp3", 24000), 24000),
    "ogg-opus": ("audio/ogg", lambda: encode("ogg", "libopus", 48000), 48000),
}


class EncodedTTS(tts.TTS):
    """A hosted-style TTS: the provider answers with compressed audio (``mime_type``), pushed
    in network-sized chunks into LiveKit's ``AudioEmitter``, which decodes it."""

    def __init__(self, mime_type: str, payload: bytes, sample_rate: int, *,
                 streaming: bool, fail: bool = False) -> None:
        super().__init__(capabilities=tts.TTSCapabilities(streaming=streaming),
                         sample_rate=sample_rate, num_channels=1)
        self.mime_type = mime_type
        self.payload = payload
        self.fail = fail
        self.texts: list[str] = []

    def synthesize(self, text: str, *,
                   conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> Any:
        return _Chunked(tts=self, input_text=text, conn_options=conn_options)

    def stream(self, *, conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS) -> Any:
        return _Streamed(tts=self, conn_options=conn_options)

    async def send_payload(self, emitter: tts.AudioEmitter) -> None:
        data = self.payload if not self.fail else b"this is not an mp3 stream" * 200
        for i in range(0, len(data), 1024):
            emitter.push(data[i:i + 1024])
            await asyncio.sleep(0)


class _Chunked(tts.ChunkedStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        plugin: EncodedTTS = self._tts  # type: ignore[assignment]
        plugin.texts.append(self.input_text)
        output_emitter.initialize(request_id="req", sample_rate=plugin.sample_rate,
                                  num_channels=1, mime_type=plugin.mime_type)
        await plugin.send_payload(output_emitter)
        output_emitter.flush()


class _Streamed(tts.SynthesizeStream):
    async def _run(self, output_emitter: tts.AudioEmitter) -> None:
        plugin: EncodedTTS = self._tts  # type: ignore[assignment]
        output_emitter.initialize(request_id="req", sample_rate=plugin.sample_rate,
                                  num_channels=1, mime_type=plugin.mime_type, stream=True)
        output_emitter.start_segment(segment_id="seg")
        text = ""
        async for data in self._input_ch:
            if not isinstance(data, self._FlushSentinel):
                text += data
        plugin.texts.append(text)
        self._mark_started()
        await plugin.send_payload(output_emitter)
        output_emitter.end_segment()


async def _text(*parts: str):  # type: ignore[no-untyped-def]
    for part in parts:
        await trio.sleep(0)
        yield part


async def _synthesize(plugin: EncodedTTS, **options: Any) -> tuple[float, list[rtc.AudioFrame]]:
    frames = []
    async with TTSAdapter(plugin, **options).stream(_text("Hello ", "there.")) as audio:
        async for frame in audio:
            frames.append(frame)
    return sum(f.duration for f in frames), frames


@pytest.mark.parametrize("streaming", [True, False], ids=["SynthesizeStream", "ChunkedStream"])
@pytest.mark.parametrize("encoding", list(ENCODINGS))
async def test_tts_with_compressed_audio_decodes_through_adapt(encoding: str,
                                                               streaming: bool) -> None:
    mime, make, rate = ENCODINGS[encoding]
    plugin = EncodedTTS(mime, make(), rate, streaming=streaming)
    assert isinstance(adapt(plugin), TTSAdapter)
    with trio.fail_after(20):
        async with open_bridge() as bridge:
            seconds, frames = await _synthesize(plugin)
            assert bridge.statistics().asyncio_tasks == 0
    assert "".join(plugin.texts).strip() == "Hello there."
    # The decoded tone, at the plugin's rate; codecs add a few ms of priming/padding.
    assert seconds == pytest.approx(SECONDS, abs=0.08), seconds
    assert {f.sample_rate for f in frames} == {rate}
    pcm = np.concatenate([np.frombuffer(f.data, dtype=np.int16) for f in frames])
    middle = pcm[len(pcm) // 4: 3 * len(pcm) // 4].astype(np.float64)
    assert np.sqrt(np.mean(middle ** 2)) > 3000  # the tone, not silence
    spectrum = np.abs(np.fft.rfft(middle))
    peak_hz = np.argmax(spectrum) * rate / len(middle)
    assert peak_hz == pytest.approx(TONE_HZ, abs=5)


async def test_a_corrupt_compressed_stream_surfaces_as_an_error_not_a_hang() -> None:
    """The decoder fails in its own thread: LiveKit's emitter sees no audio and the plugin
    fails, which the adapter raises as APIError (before the fix: a silent hang)."""
    plugin = EncodedTTS("audio/mpeg", b"", 24000, streaming=True, fail=True)
    with trio.fail_after(20):
        async with open_bridge():
            with pytest.raises(APIError, match="no audio frames"):
                await _synthesize(plugin, conn_options=APIConnectOptions(max_retry=0))


# -- the loop accepts any executor ----------------------------------------------------------
async def test_run_in_executor_with_a_foreign_executor_runs_in_its_threads() -> None:
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="plugin-pool")

    async def job() -> str:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, lambda: threading.current_thread().name)

    with trio.fail_after(10):
        async with open_bridge() as bridge:
            name = await bridge.run(job)
    executor.shutdown()
    assert name.startswith("plugin-pool")


async def test_a_failing_executor_job_raises_its_error_across_the_bridge() -> None:
    executor = ThreadPoolExecutor(max_workers=1)

    def boom() -> None:
        raise ZeroDivisionError("in the plugin's thread")

    async def job() -> None:
        await asyncio.get_running_loop().run_in_executor(executor, boom)

    with trio.fail_after(10):
        async with open_bridge() as bridge:
            with pytest.raises(ZeroDivisionError, match="plugin's thread"):
                await bridge.run(job)
    executor.shutdown()


async def test_cancellation_crosses_to_an_executor_job() -> None:
    """Trio cancels the asyncio task awaiting the job: a queued job is cancelled, the running
    one finishes in its thread (threads cannot be interrupted) and its result is dropped."""
    executor = ThreadPoolExecutor(max_workers=1)
    release = threading.Event()
    ran: list[str] = []
    awaiting = trio.Event()

    def blocker(tag: str) -> str:
        ran.append(tag)
        release.wait(10)
        return tag

    async def job() -> list[str]:
        loop = asyncio.get_running_loop()
        first = loop.run_in_executor(executor, blocker, "first")
        second = loop.run_in_executor(executor, blocker, "second")
        awaiting.set()
        return list(await asyncio.gather(first, second))

    with trio.fail_after(10):
        async with open_bridge() as bridge:
            async with trio.open_nursery() as nursery:
                scope = trio.CancelScope()

                async def call() -> None:
                    with scope:
                        await bridge.run(job)

                nursery.start_soon(call)
                await awaiting.wait()
                scope.cancel()
            assert scope.cancelled_caught
            release.set()
            await trio.to_thread.run_sync(executor.shutdown)
            assert bridge.statistics().asyncio_tasks == 0
    assert ran == ["first"]  # the queued job never started


async def test_a_job_finishing_after_the_bridge_closed_is_ignored(
        caplog: pytest.LogCaptureFixture) -> None:
    executor = ThreadPoolExecutor(max_workers=1)
    release = threading.Event()
    started = threading.Event()

    def slow() -> str:
        started.set()
        release.wait(10)
        return "late"

    async def job() -> str:
        return await asyncio.get_running_loop().run_in_executor(executor, slow)

    with trio.fail_after(10):
        async with open_bridge(cancel_grace=1.0) as bridge:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(bridge.run, job)
                await trio.to_thread.run_sync(started.wait)
                nursery.cancel_scope.cancel()
        release.set()
        await trio.to_thread.run_sync(executor.shutdown)  # the job's callbacks ran
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


async def test_set_default_executor_accepts_a_foreign_executor() -> None:
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="default-pool")

    async def job() -> str:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(executor)
        return await loop.run_in_executor(None, lambda: threading.current_thread().name)

    with trio.fail_after(10):
        async with open_bridge() as bridge:
            name = await bridge.run(job)
    executor.shutdown()
    assert name.startswith("default-pool")


# -- a VAD and an STT that use their own ThreadPoolExecutor -----------------------------------
class _EnergyModel:
    """A blocking 'model' run on the plugin's executor: loud or not, and where it ran."""

    def __init__(self) -> None:
        self.threads: set[str] = set()

    def __call__(self, pcm: np.ndarray) -> float:
        self.threads.add(threading.current_thread().name)
        return float(np.abs(pcm).mean() > 500)


class ExecutorVAD(vad.VAD):
    def __init__(self) -> None:
        super().__init__(capabilities=vad.VADCapabilities(update_interval=0.02))
        self.executor: Executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vad-pool")
        self.energy = _EnergyModel()

    def stream(self) -> Any:
        return _ExecutorVADStream(self)


class _ExecutorVADStream(vad.VADStream):
    async def _main_task(self) -> None:
        plugin: ExecutorVAD = self._vad  # type: ignore[assignment]
        loop = asyncio.get_running_loop()
        speaking = False
        speech: list[rtc.AudioFrame] = []
        async for frame in self._input_ch:
            if not isinstance(frame, rtc.AudioFrame):
                continue
            pcm = np.frombuffer(frame.data, dtype=np.int16)
            p = await loop.run_in_executor(plugin.executor, plugin.energy, pcm)
            if speaking:
                speech.append(frame)
            if (p > 0.5) != speaking:
                speaking = not speaking
                frames, speech = ([], [frame]) if speaking else (speech, [])
                self._event_ch.send_nowait(vad.VADEvent(frames=frames,
                    type=vad.VADEventType.START_OF_SPEECH if speaking
                    else vad.VADEventType.END_OF_SPEECH,
                    samples_index=0, timestamp=0.0, speech_duration=0.0,
                    silence_duration=0.0, speaking=speaking, probability=p))


class ExecutorSTT(stt.STT):
    """A non-streaming STT whose recognizer runs on its own executor."""

    def __init__(self) -> None:
        super().__init__(capabilities=stt.STTCapabilities(streaming=False, interim_results=False))
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stt-pool")
        self.threads: set[str] = set()

    def _transcribe(self, samples: int) -> str:
        self.threads.add(threading.current_thread().name)
        return f"{samples} samples"

    async def _recognize_impl(self, buffer: Any, *, language: Any = None,
                              conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS
                              ) -> stt.SpeechEvent:
        frames = buffer if isinstance(buffer, list) else [buffer]
        samples = sum(f.samples_per_channel for f in frames)
        text = await asyncio.get_running_loop().run_in_executor(
            self.executor, self._transcribe, samples)
        return stt.SpeechEvent(type=stt.SpeechEventType.FINAL_TRANSCRIPT,
                               alternatives=[stt.SpeechData(language="en", text=text)])


def _frame(loud: bool, ms: int = 20, rate: int = 16000) -> rtc.AudioFrame:
    n = rate * ms // 1000
    data = np.full(n, 3000 if loud else 0, dtype=np.int16)
    return rtc.AudioFrame(data.tobytes(), rate, 1, n)


async def test_a_vad_using_its_own_thread_pool_works_through_adapt() -> None:
    plugin = ExecutorVAD()
    events = []
    with trio.fail_after(10):
        async with open_bridge():
            async with adapt(plugin).stream() as stream:
                for loud in [False] * 5 + [True] * 10 + [False] * 5:
                    stream.push_frame(_frame(loud))
                stream.end_input()
                async for ev in stream:
                    events.append(ev.type)
    plugin.executor.shutdown()
    assert events == [VADEventType.START_OF_SPEECH, VADEventType.END_OF_SPEECH]
    assert plugin.energy.threads and all(t.startswith("vad-pool") for t in plugin.energy.threads)


async def test_a_non_streaming_stt_using_its_own_thread_pool_works_through_adapt() -> None:
    plugin = ExecutorSTT()
    vad_plugin = ExecutorVAD()
    transcripts = []
    with trio.fail_after(10):
        async with open_bridge():
            async with adapt(plugin, vad=vad_plugin).stream() as stream:
                for loud in [False] * 5 + [True] * 25 + [False] * 30:
                    stream.push_frame(_frame(loud))
                stream.end_input()
                async for ev in stream:
                    if ev.type == SpeechEventType.FINAL_TRANSCRIPT:
                        transcripts.append(ev.alternatives[0].text)
    plugin.executor.shutdown()
    vad_plugin.executor.shutdown()
    assert len(transcripts) == 1 and transcripts[0].endswith("samples")
    assert plugin.threads == {t for t in plugin.threads if t.startswith("stt-pool")} != set()


# -- LiveKit's own inference VAD (native model, its own executor) -----------------------------
@pytest.mark.skipif(ESPEAK is None, reason="needs espeak-ng (apt install espeak-ng)")
async def test_livekit_inference_vad_runs_through_adapt() -> None:
    """``livekit.agents.inference.VAD()`` builds offline (a native model shipped with
    livekit-local-inference) and runs each window on its own ThreadPoolExecutor: before the
    bridge accepted foreign executors its first window failed. On espeak-ng speech it finds
    the sentence within 0.3 s."""
    inference = pytest.importorskip("livekit.agents.inference")
    plugin = inference.VAD()
    pcm, rate, true_start, true_end = padded_sentence()
    events = []
    with trio.fail_after(30):
        async with open_bridge() as bridge:
            async with adapt(plugin).stream() as stream:
                for i in range(0, len(pcm), rate // 50):
                    chunk = pcm[i:i + rate // 50]
                    stream.push_frame(rtc.AudioFrame(chunk.tobytes(), rate, 1, len(chunk)))
                stream.end_input()
                async for ev in stream:
                    events.append(ev)
            assert bridge.statistics().asyncio_tasks == 0
    inferences = [e for e in events if e.type == VADEventType.INFERENCE_DONE]
    assert len(inferences) >= 100 and all(0.0 <= e.probability <= 1.0 for e in inferences)
    found_start, found_end = speech_bounds(events)
    assert found_start == pytest.approx(true_start, abs=0.3), (found_start, true_start)
    assert found_end == pytest.approx(true_end, abs=0.3), (found_end, true_end)
