"""LiveKit's descriptions of speech models (``STTCapabilities``, ``TTSCapabilities``) and the
unit a LiveKit TTS stream yields (``SynthesizedAudio``).

The capabilities describe a model: an object implementing this runtime's ``STT``/``TTS``
protocol may carry them as ``capabilities`` (adapters such as ``tts.StreamAdapter`` do).
A ``tts_node`` may yield :class:`SynthesizedAudio` as well as bare frames: its frame is
played (:func:`tts_audio_frames`).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal, cast

from livekit import rtc

__all__ = ["STTCapabilities", "SynthesizedAudio", "TTSCapabilities", "audio_frame_of",
           "tts_audio_frames"]


@dataclass
class STTCapabilities:
    """What a speech-to-text model does: ``streaming`` recognition, ``interim_results``,
    ``diarization``, ``aligned_transcript`` (``"word"``, ``"chunk"`` or False),
    ``offline_recognize`` (whole buffers), ``keyterms`` prompting, ``chat_context``, and
    ``manual_flush`` (a segment finalized on request)."""

    streaming: bool
    interim_results: bool
    diarization: bool = False
    aligned_transcript: Literal["word", "chunk", False] = False
    offline_recognize: bool = True
    keyterms: bool = False
    chat_context: bool = False
    manual_flush: bool = False

    def __post_init__(self) -> None:
        if self.aligned_transcript not in ("word", "chunk", False):
            raise ValueError(f"aligned_transcript must be 'word', 'chunk' or False, got "
                             f"{self.aligned_transcript!r}")


@dataclass
class TTSCapabilities:
    """What a text-to-speech model does: ``streaming`` (text in as it comes) and
    ``aligned_transcript`` (word timings)."""

    streaming: bool
    aligned_transcript: bool = False


@dataclass
class SynthesizedAudio:
    """One frame of synthesized speech, with the request and segment it belongs to, whether
    it ends the segment, and the text it speaks (streaming TTS)."""

    frame: rtc.AudioFrame
    request_id: str
    is_final: bool = False
    segment_id: str = ""
    delta_text: str = ""


async def tts_audio_frames(items: AsyncIterable[Any]) -> AsyncIterator[Any]:
    """``items`` with each :class:`SynthesizedAudio` replaced by its frame (what a
    ``tts_node`` written the LiveKit way may yield).

    Cancellation: cancels the iteration of ``items``.
    """
    async for item in items:
        yield audio_frame_of(item)


def audio_frame_of(item: object) -> rtc.AudioFrame:
    """The frame a ``tts_node`` item carries: a :class:`SynthesizedAudio`'s frame, else the
    item itself (taken to be a frame: anything else fails where it is played)."""
    return item.frame if isinstance(item, SynthesizedAudio) else cast(rtc.AudioFrame, item)
