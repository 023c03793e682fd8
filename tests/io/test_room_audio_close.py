"""The agent's room audio output closing while it is used: a frame being captured, a playout
being waited for, a ``clear_buffer`` after. The output closes when the room I/O's block is
left; a session still speaking into it (its own close running late, its shielded clean-up
clearing the audio) must see the speech end, not an error.

Real SDK audio (an ``AudioSource``), so on the wall clock: each test a fraction of a second.
"""

from __future__ import annotations

import numpy as np
import trio
from livekit import rtc

from agents_trio import open_bridge
from agents_trio.events import PlaybackFinishedEvent
from agents_trio.io.room_audio import RoomAudioOutput, open_room_audio_output

RATE = 24000
FRAME = RATE // 100  # 10 ms


def tone(samples: int = FRAME) -> rtc.AudioFrame:
    return rtc.AudioFrame(np.full(samples, 7, dtype=np.int16).tobytes(), RATE, 1, samples)


async def test_a_playout_wait_in_flight_ends_interrupted_when_the_output_closes() -> None:
    """It used to fail with an AttributeError (the wait read the pump the close had
    removed)."""
    waits: list[PlaybackFinishedEvent | BaseException] = []
    failures: list[BaseException] = []
    with trio.fail_after(5):
        async with open_bridge() as bridge, trio.open_nursery() as nursery:
            async with open_room_audio_output(bridge, sample_rate=RATE,
                                              queue_size_ms=100) as output:
                output.on_failure = failures.append
                for _ in range(30):   # 0.3 s, all of it accepted (the pump's buffer and queue)
                    await output.capture_frame(tone())
                output.flush()
                waiting = trio.Event()

                async def wait_for_playout() -> None:
                    waiting.set()
                    try:
                        waits.append(await output.wait_for_playout())
                    except Exception as e:
                        waits.append(e)

                nursery.start_soon(wait_for_playout)
                await waiting.wait()
                await trio.sleep(0.05)   # the playout is under way
            with trio.fail_after(1):
                while not waits:
                    await trio.sleep(0.01)
    [ev] = waits
    assert isinstance(ev, PlaybackFinishedEvent), ev
    assert ev.interrupted and ev.playback_position < 0.3
    assert output.playback_finished_events == [ev]
    assert failures == []


async def test_a_capture_in_flight_when_the_output_closes_is_no_failure() -> None:
    """A frame waiting for room in the pump when the output closes is dropped, and so are the
    frames after: the close is no SDK failure (it used to be reported as one, and RoomIO
    closed the session with reason ``error``; the next frame failed an assertion)."""
    failures: list[BaseException] = []
    errors: list[BaseException] = []
    captured = 0
    with trio.fail_after(5):
        async with open_bridge() as bridge, trio.open_nursery() as nursery:
            async with open_room_audio_output(bridge, sample_rate=RATE,
                                              queue_size_ms=100) as output:
                output.on_failure = failures.append
                blocked = trio.Event()

                async def speak() -> None:
                    nonlocal captured
                    try:
                        for _ in range(100):   # 1 s: the pump's buffer fills, sends wait
                            await output.capture_frame(tone())
                            captured += 1
                            if captured == 40:
                                blocked.set()
                    except Exception as e:
                        errors.append(e)

                nursery.start_soon(speak)
                await blocked.wait()
            # the close happened with speak() blocked on a full pump; it goes on after it
    assert captured == 100
    assert errors == [] and failures == [] and output.failure is None


async def test_clear_buffer_after_the_output_closed_reports_the_cut_speech_once() -> None:
    """The session's close clears the audio after the output closed (its shielded clean-up
    running late): nothing to clear, the speech was ended by the close (it used to fail an
    assertion)."""
    output: RoomAudioOutput | None = None
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            async with open_room_audio_output(bridge, sample_rate=RATE,
                                              queue_size_ms=100) as output:
                for _ in range(10):
                    await output.capture_frame(tone())
            assert output.clear_buffer() is None
            [ev] = output.playback_finished_events   # the close ended the speech, once
            assert ev.interrupted
            assert (await output.wait_for_playout()) is ev
