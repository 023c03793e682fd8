"""Real speech for the plugin tests: a sentence synthesized with espeak-ng, and where its
voice is."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np

ESPEAK = shutil.which("espeak-ng")

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



def padded_sentence(text: str = "The quick brown fox jumps over the lazy dog."
                    ) -> tuple[np.ndarray, int, float, float]:
    """The sentence between LEAD and TAIL seconds of silence: samples, rate, and the true
    start and end of its voice (seconds)."""
    speech, rate = espeak(text)
    start, end = voiced_bounds(speech, rate)
    pcm = np.concatenate([np.zeros(int(LEAD * rate), np.int16), speech,
                          np.zeros(int(TAIL * rate), np.int16)])
    return pcm, rate, LEAD + start, LEAD + end


def speech_bounds(events: list[object]) -> tuple[float, float]:
    """Start of the first and end of the last speech reported by VAD events (LiveKit's
    timestamps are the audio position; the start is reported min_speech_duration into the
    speech, the end min_silence_duration after it)."""
    from agents_trio import VADEventType
    starts = [e for e in events if e.type is VADEventType.START_OF_SPEECH]  # type: ignore[attr-defined]
    ends = [e for e in events if e.type is VADEventType.END_OF_SPEECH]  # type: ignore[attr-defined]
    assert starts and ends, events
    return (starts[0].timestamp - starts[0].speech_duration,  # type: ignore[attr-defined]
            ends[-1].timestamp - ends[-1].silence_duration)  # type: ignore[attr-defined]
