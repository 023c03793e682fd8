"""Silero VAD through adapt() on real speech (issue 11, item 8): espeak-ng synthesizes a
sentence, padded with known silence; the speech bounds the VAD reports are within 0.3 s of
the true ones. Real model inference in worker threads: real clock, bounded."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import trio

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")
silero = pytest.importorskip("livekit.plugins.silero", reason="needs livekit-plugins-silero")

from livekit import rtc  # noqa: E402

from agents_trio import VADEventType, open_bridge  # noqa: E402
from agents_trio.plugins import VADAdapter, adapt  # noqa: E402

ESPEAK = shutil.which("espeak-ng")
pytestmark = pytest.mark.skipif(ESPEAK is None, reason="needs espeak-ng (apt install espeak-ng)")

LEAD, TAIL = 1.0, 1.5  # seconds of silence around the sentence


def espeak(text: str) -> tuple[np.ndarray, int]:
    """espeak-ng's WAV (16-bit mono) as samples and rate. Its streamed header carries no
    length, so the data chunk is read by hand."""
    wav = subprocess.run([ESPEAK, "--stdout", text], check=True, capture_output=True,  # type: ignore[list-item]
                         timeout=30).stdout
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
    rate = int.from_bytes(wav[24:28], "little")
    pos = 12
    while wav[pos:pos + 4] != b"data":
        pos += 8 + int.from_bytes(wav[pos + 4:pos + 8], "little")
    data = wav[pos + 8:]
    return np.frombuffer(data[:len(data) // 2 * 2], dtype=np.int16), rate


def voiced_bounds(pcm: np.ndarray, rate: int) -> tuple[float, float]:
    """First and last 10 ms window louder than 2% of the peak: espeak's non-silent region."""
    win = rate // 100
    n = len(pcm) // win
    rms = np.sqrt(np.mean(pcm[:n * win].astype(np.float64).reshape(n, win) ** 2, axis=1))
    loud = np.flatnonzero(rms > 0.02 * np.abs(pcm).max())
    return loud[0] * win / rate, (loud[-1] + 1) * win / rate


async def test_silero_through_adapt_finds_the_speech_bounds_in_espeak_audio() -> None:
    speech, rate = espeak("The quick brown fox jumps over the lazy dog.")
    start_in_speech, end_in_speech = voiced_bounds(speech, rate)
    true_start, true_end = LEAD + start_in_speech, LEAD + end_in_speech
    pcm = np.concatenate([np.zeros(int(LEAD * rate), np.int16), speech,
                          np.zeros(int(TAIL * rate), np.int16)])

    vad = adapt(silero.VAD.load())
    assert isinstance(vad, VADAdapter)
    events = []
    step = rate // 50  # 20 ms frames, as a room delivers them
    with trio.fail_after(60):
        async with open_bridge() as bridge:
            async with vad.stream() as stream:
                for i in range(0, len(pcm), step):
                    chunk = pcm[i:i + step]
                    stream.push_frame(rtc.AudioFrame(chunk.tobytes(), rate, 1, len(chunk)))
                stream.end_input()
                async for ev in stream:
                    if ev.type is not VADEventType.INFERENCE_DONE:
                        events.append(ev)
            assert bridge.statistics().asyncio_tasks == 0

    starts = [e for e in events if e.type is VADEventType.START_OF_SPEECH]
    ends = [e for e in events if e.type is VADEventType.END_OF_SPEECH]
    assert starts and ends, events
    # LiveKit's events: the start is reported min_speech_duration into the speech, the end
    # min_silence_duration after it; their timestamps are the audio position.
    found_start = starts[0].timestamp - starts[0].speech_duration
    found_end = ends[-1].timestamp - ends[-1].silence_duration
    assert found_start == pytest.approx(true_start, abs=0.3), (found_start, true_start)
    assert found_end == pytest.approx(true_end, abs=0.3), (found_end, true_end)
    # And nothing in the padding.
    assert found_start > 0.5 and found_end < LEAD + len(speech) / rate + 0.5
