"""Transcript synchronization: when each word of a segment is heard, so that the agent's
transcription is released in step with its voice (LiveKit's transcript synchronizer).

A segment's words are paced by syllables. While its text or its audio is still arriving, the
pace is LiveKit's standard speaking rate (3.83 syllables a second, times ``speed``); once
both are complete, the words are spread evenly (by syllables) over the audio, the same rule
``played_prefix`` uses for an interrupted segment. When the TTS gives word timestamps
(TTS-aligned transcripts: ``TimedWord`` lists in its frames' ``userdata`` under
``TIMED_TRANSCRIPT_KEY``, LiveKit's key), the n-th word starts at the n-th timestamp instead;
words beyond the last timestamp follow it at the estimated pace.

A word counts as heard once its start is reached. The released text never runs ahead of the
audio synthesized so far.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec
from livekit import rtc

from ..text_transforms import TOKENS, syllables

#: LiveKit's standard speaking rate, in syllables a second
STANDARD_SPEECH_RATE = 3.83

#: times this close count as equal (a deadline computed as ``start + t`` gives back
#: ``t - ε`` once ``start`` is subtracted again)
EPSILON = 1e-6

#: where a TTS puts the word timestamps of a frame (``frame.userdata[...]``, a list of
#: :class:`TimedWord` or of objects with ``text`` and ``start_time``), as in LiveKit
TIMED_TRANSCRIPT_KEY = "lk.timed_transcripts"


class TimedWord(msgspec.Struct, frozen=True):
    """A word of the TTS's output and when it starts (seconds from the segment's start)."""

    text: str
    start_time: float
    end_time: float | None = None


def timed_words(frame: rtc.AudioFrame) -> list[TimedWord]:
    """The word timestamps ``frame`` carries (none for most TTSs). Objects shaped like
    LiveKit's ``TimedString`` are accepted; entries without a start time are skipped."""
    userdata = getattr(frame, "userdata", None)
    raw = userdata.get(TIMED_TRANSCRIPT_KEY) if isinstance(userdata, dict) else None
    words: list[TimedWord] = []
    for item in raw or ():
        start = getattr(item, "start_time", None)
        if isinstance(start, (int, float)):
            end = getattr(item, "end_time", None)
            words.append(TimedWord(text=str(getattr(item, "text", "")), start_time=float(start),
                                   end_time=float(end) if isinstance(end, (int, float))
                                   else None))
    return words


def word_starts(text: str, *, audio_duration: float, complete: bool,
                timestamps: Sequence[TimedWord] = (), speed: float = 1.0,
                text_complete: bool = True) -> list[tuple[str, float]]:
    """The words of ``text`` (each with its trailing space, the first with any leading
    space too: together they are ``text``) and when each starts.

    Args:
        text: The segment's text so far.
        audio_duration: The seconds of audio synthesized for it so far.
        complete: Both the text and the audio are complete (the pace is then fitted to the
            audio).
        timestamps: Word timestamps from the TTS, in word order.
        speed: Multiplies the standard speaking rate used before the segment is complete.
        text_complete: No more text comes. While more may, a last word with no space after
            it may not be whole yet: it is left out until it is.
    """
    tokens = TOKENS.findall(text)
    if not text_complete and tokens and not tokens[-1][-1].isspace():
        tokens.pop()
    counts = [syllables(t) for t in tokens]
    total = sum(counts)
    if complete and audio_duration > 0 and total > 0:
        per_syllable = audio_duration / total
    else:
        per_syllable = 1.0 / (STANDARD_SPEECH_RATE * speed)
    starts: list[tuple[str, float]] = []
    elapsed = 0.0
    for index, (token, count) in enumerate(zip(tokens, counts)):
        if index < len(timestamps):
            elapsed = timestamps[index].start_time
        starts.append((token, elapsed))
        elapsed += count * per_syllable
    return starts


def heard_text(starts: Sequence[tuple[str, float]], position: float, *,
               audio_duration: float) -> str:
    """The words started by ``position`` seconds of playback (never past the audio
    synthesized so far)."""
    position = min(position, audio_duration)
    if position <= 0:
        return ""
    return "".join(token for token, start in starts if start <= position + EPSILON)


def next_start(starts: Sequence[tuple[str, float]], position: float) -> float:
    """When the next word after ``position`` starts (``inf`` when none is known yet)."""
    return min((start for _, start in starts if start > position + EPSILON), default=math.inf)
