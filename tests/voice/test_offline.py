"""The offline real-voice models (issue 11 item 6) on real audio: espeak-ng speech decoded by
PocketSphinx in its subprocess; Silero VAD through adapt() on the same audio."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import AsyncIterator

import numpy as np
import pytest
import trio

from agents_trio.demo_voice import missing_dependencies
from agents_trio.io.wav import frame_samples, pcm_frames, rms, speech_bounds
from agents_trio.models import SpeechEventType, VADEventType
from agents_trio.offline import EspeakTTS, MissingDependency, SphinxSTT

# real models: the [voice] extra and espeak-ng (CI installs both, see .ci/run)
MISSING = missing_dependencies()
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"needs {'; '.join(MISSING)}")

LINES = ["What is the weather in Lisbon?", "Tell me a story.", "Wait, stop.",
         "Thank you, goodbye."]


async def text(*parts: str) -> AsyncIterator[str]:
    for p in parts:
        yield p


async def synthesize(tts: EspeakTTS, line: str) -> np.ndarray:
    frame = await tts.synthesize(line)
    return frame_samples(frame)


async def test_espeak_streams_speech_sentence_by_sentence() -> None:
    tts = EspeakTTS()
    async with tts.stream(text("Hello there. ", "How are", " you today?")) as frames:
        got = [f async for f in frames]
    assert {f.sample_rate for f in got} == {22050}
    assert all(f.samples_per_channel <= 441 for f in got)
    pcm = np.concatenate([frame_samples(f) for f in got])
    spans = speech_bounds(pcm, 22050)
    # two sentences, two syntheses: speech, a pause, speech; about two seconds in all
    assert len(spans) >= 2 and 1.0 < len(pcm) / 22050 < 4.0
    assert rms(pcm) > 500


async def test_espeak_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(MissingDependency, match="apt-get install espeak-ng"):
        EspeakTTS()


def test_pocketsphinx_missing_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pocketsphinx" else real(name, *a))
    with pytest.raises(MissingDependency, match=r"pip install -e '\.\[voice\]'"):
        SphinxSTT()


async def recognize(stt: SphinxSTT, clips: list[np.ndarray], rate: int) -> list[tuple[str, str]]:
    gap = np.zeros(rate, np.int16)
    async with stt.stream() as stream:
        for clip in clips:
            for f in pcm_frames(gap, rate) + pcm_frames(clip, rate):
                stream.push_frame(f)
                await trio.lowlevel.checkpoint()
        for f in pcm_frames(gap, rate):
            stream.push_frame(f)
        stream.end_input()
        return [(ev.type.value, ev.alternatives[0].text if ev.alternatives else "")
                async for ev in stream]


async def test_sphinx_recognizes_espeak_phrases_in_its_subprocess() -> None:
    tts = EspeakTTS(voice="en-us+f3")
    clips = [await synthesize(tts, line) for line in LINES]
    events = await recognize(SphinxSTT(phrases=LINES), clips, 22050)
    finals = [t for kind, t in events if kind == SpeechEventType.FINAL_TRANSCRIPT.value]
    assert finals == ["what is the weather in lisbon", "tell me a story", "wait stop",
                      "thank you goodbye"]
    kinds = [kind for kind, _ in events]
    assert kinds.count("start_of_speech") == kinds.count("end_of_speech") == 4


async def test_sphinx_strict_detection_ignores_noise_and_silence() -> None:
    rng = np.random.default_rng(7)
    noise = (rng.standard_normal(16000 * 2) * 40).astype(np.int16)
    events = await recognize(SphinxSTT(phrases=LINES), [noise], 16000)
    assert [k for k, _ in events if k == "final_transcript"] == []


async def test_sphinx_failure_to_start_is_an_error_with_its_stderr() -> None:
    from agents_trio.offline.sphinx import SphinxError

    with pytest.raises(SphinxError, match="Failed to initialize PocketSphinx"):
        async with SphinxSTT(phrases=["zxqvw blorfity"]).stream():
            pass  # pragma: no cover


async def test_sphinx_process_ends_with_the_stream() -> None:
    stt = SphinxSTT(phrases=LINES)
    with trio.CancelScope() as scope:
        async with stt.stream() as stream:
            process = stream._process
            assert process.returncode is None
            scope.cancel()
            await trio.sleep_forever()
    assert process.returncode is not None   # killed and reaped when the block was left


async def test_silero_through_adapt_finds_speech_bounds_in_espeak_audio() -> None:
    silero = pytest.importorskip("livekit.plugins.silero")
    from agents_trio import open_bridge
    from agents_trio.io.wav import resample_pcm
    from agents_trio.plugins import adapt

    tts = EspeakTTS()
    clips = [resample_pcm(await synthesize(tts, line), 22050, 16000) for line in LINES[:2]]
    gap = np.zeros(16000, np.int16)
    audio = np.concatenate([gap, clips[0], gap, gap, clips[1], gap, gap])
    truth = speech_bounds(audio, 16000, threshold=200)
    assert len(truth) == 2
    starts: list[float] = []
    ends: list[float] = []
    async with open_bridge():
        vad = adapt(silero.VAD.load())
        async with vad.stream() as stream:
            async def feed() -> None:
                for f in pcm_frames(audio, 16000):
                    stream.push_frame(f)
                    await trio.sleep(0)
                stream.end_input()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(feed)
                async for ev in stream:
                    if ev.type == VADEventType.START_OF_SPEECH:
                        starts.append(ev.timestamp - ev.speech_duration)
                    elif ev.type == VADEventType.END_OF_SPEECH:
                        ends.append(ev.timestamp - ev.silence_duration)
    assert len(starts) == len(ends) == 2
    for (start, end), s, e in zip(truth, starts, ends):
        assert abs(s - start) < 0.3 and abs(e - end) < 0.3, (truth, starts, ends)


async def test_sphinx_keyphrases_spot_a_word() -> None:
    tts = EspeakTTS(voice="en-us+f3")
    clips = [await synthesize(tts, line) for line in (LINES[0], LINES[3])]
    events = await recognize(SphinxSTT(keyphrases=["weather"]), clips, 22050)
    assert [t for kind, t in events if kind == "final_transcript"] == ["weather"]
