"""The offline real-voice models (issue 11 item 6) on real audio: espeak-ng speech decoded by
PocketSphinx in its subprocess (Silero on espeak-ng audio: tests/plugins/test_silero.py)."""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import AsyncIterator

import numpy as np
import pytest
import trio

from agents_trio.demo_voice import missing_dependencies
from agents_trio.io.wav import frame_samples, pcm_frames, rms, speech_bounds
from agents_trio.models import SpeechEventType
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


async def test_sphinx_decoder_that_cannot_start_raises_sphinx_error() -> None:
    from agents_trio.offline.sphinx import SphinxError

    with pytest.raises(SphinxError, match="Failed to initialize PocketSphinx"):
        async with SphinxSTT(phrases=["zxqvw blorfity"]).stream():
            pass  # pragma: no cover


async def test_sphinx_process_ends_with_the_stream() -> None:
    import multiprocessing

    before = set(multiprocessing.active_children())
    stt = SphinxSTT(phrases=LINES)
    with trio.CancelScope() as scope:
        async with stt.stream():
            children = set(multiprocessing.active_children()) - before
            assert len(children) == 1 and all(p.is_alive() for p in children)
            scope.cancel()
            await trio.sleep_forever()
    assert not any(p.is_alive() for p in children)   # stopped and reaped with the block


async def test_sphinx_keyphrases_spot_a_word() -> None:
    tts = EspeakTTS(voice="en-us+f3")
    clips = [await synthesize(tts, line) for line in (LINES[0], LINES[3])]
    events = await recognize(SphinxSTT(keyphrases=["weather"]), clips, 22050)
    assert [t for kind, t in events if kind == "final_transcript"] == ["weather"]
