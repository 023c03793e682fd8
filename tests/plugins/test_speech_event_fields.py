"""LiveKit's STT and VAD events keep their fields when they cross into agents_trio's."""

from __future__ import annotations

from livekit import rtc
from livekit.agents import stt as lk_stt
from livekit.agents import vad as lk_vad
from livekit.agents.types import TimedString as LkTimedString

from agents_trio.plugins.stt import from_lk_speech_event
from agents_trio.plugins.vad import from_lk_vad_event
from agents_trio.stt import SpeechEventType, TimedString


def test_speech_event_fields_and_word_timings_carry_over() -> None:
    words = [LkTimedString("hello", start_time=0.1, end_time=0.4, confidence=0.8),
             LkTimedString("there")]  # no timings: NOT_GIVEN becomes None
    ev = lk_stt.SpeechEvent(
        type=lk_stt.SpeechEventType.FINAL_TRANSCRIPT, request_id="req-7",
        speech_start_time=12.5, speech_end_time=13.25,
        alternatives=[lk_stt.SpeechData(
            language="fr", text="bonjour", confidence=0.7, speaker_id="S1",
            is_primary_speaker=True, words=words, source_languages=["fr"],
            source_texts=["bonjour"], target_languages=["en"], target_texts=["hello there"],
            metadata={"voice": "x"})])
    ours = from_lk_speech_event(ev)
    assert ours is not None and ours.type is SpeechEventType.FINAL_TRANSCRIPT
    assert (ours.request_id, ours.speech_start_time, ours.speech_end_time) == (
        "req-7", 12.5, 13.25)
    alt = ours.alternatives[0]
    assert (alt.text, alt.language, alt.speaker_id, alt.is_primary_speaker) == (
        "bonjour", "fr", "S1", True)
    assert (alt.source_languages, alt.source_texts, alt.target_languages, alt.target_texts,
            alt.metadata) == (["fr"], ["bonjour"], ["en"], ["hello there"], {"voice": "x"})
    assert alt.words is not None and all(isinstance(w, TimedString) for w in alt.words)
    assert [str(w) for w in alt.words] == ["hello", "there"]
    assert (alt.words[0].start_time, alt.words[0].end_time, alt.words[0].confidence) == (
        0.1, 0.4, 0.8)
    assert (alt.words[1].start_time, alt.words[1].end_time) == (None, None)


def test_recognition_usage_is_not_speech() -> None:
    ev = lk_stt.SpeechEvent(type=lk_stt.SpeechEventType.RECOGNITION_USAGE,
                            recognition_usage=lk_stt.RecognitionUsage(audio_duration=1.5))
    assert from_lk_speech_event(ev) is None


def test_vad_event_fields_carry_over() -> None:
    frame = rtc.AudioFrame(b"\0\0" * 160, 16000, 1, 160)
    ev = lk_vad.VADEvent(type=lk_vad.VADEventType.END_OF_SPEECH, samples_index=4800,
                         timestamp=0.3, speech_duration=0.2, silence_duration=0.1,
                         frames=[frame], raw_accumulated_silence=0.12,
                         raw_accumulated_speech=0.25)
    ours = from_lk_vad_event(ev)
    assert ours is not None
    assert (ours.samples_index, ours.raw_accumulated_silence, ours.raw_accumulated_speech) == (
        4800, 0.12, 0.25)
    assert ours.frames == [frame]
