"""Silero VAD through adapt() on real speech (issue 11, item 8): espeak-ng synthesizes a
sentence, padded with known silence; the speech bounds the VAD reports are within 0.3 s of
the true ones. Real model inference in worker threads: real clock, bounded."""

from __future__ import annotations

import pytest
import trio

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")
silero = pytest.importorskip("livekit.plugins.silero", reason="needs livekit-plugins-silero")

from livekit import rtc  # noqa: E402
from speech_audio import ESPEAK, LEAD, padded_sentence, speech_bounds  # noqa: E402

from agents_trio import VADEventType, open_bridge  # noqa: E402
from agents_trio.plugins import VADAdapter, adapt  # noqa: E402

pytestmark = pytest.mark.skipif(ESPEAK is None, reason="needs espeak-ng (apt install espeak-ng)")


async def test_silero_through_adapt_finds_the_speech_bounds_in_espeak_audio() -> None:
    pcm, rate, true_start, true_end = padded_sentence()
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

    found_start, found_end = speech_bounds(events)
    assert found_start == pytest.approx(true_start, abs=0.3), (found_start, true_start)
    assert found_end == pytest.approx(true_end, abs=0.3), (found_end, true_end)
    # One utterance, nothing in the padding.
    assert [e.type for e in events] == [VADEventType.START_OF_SPEECH,
                                        VADEventType.END_OF_SPEECH]
    assert found_start > LEAD / 2
