"""Audio through the real LiveKit SDK, without a server.

A ``LocalAudioTrack`` made from the output's ``AudioSource`` is read back with
``AudioStream.from_track`` by a ``RoomAudioInput``. The SDK plays audio on its own real-time
threads, so these tests run on the wall clock, each bounded to well under a second of audio
and by ``trio.fail_after``; they wait for what was heard (:meth:`Recorder.wait_for`). Two
sleeps stay, because what they prove is an absence in real time: nothing is heard after
``clear_buffer`` or while paused.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import trio
from livekit import rtc

from agents_trio import open_bridge
from agents_trio.io.room_audio import RoomAudioInput, open_room_audio_output

RATE = 24000
FRAME = RATE // 100  # 10 ms


def tone(value: int, samples: int = FRAME) -> rtc.AudioFrame:
    data = np.full(samples, value, dtype=np.int16)
    return rtc.AudioFrame(data.tobytes(), RATE, 1, samples)


class Recorder:
    """Reads the loopback input; records (time, first sample) of every non-silent frame."""

    def __init__(self, audio_in: RoomAudioInput) -> None:
        self.audio_in = audio_in
        self.heard: list[tuple[float, int]] = []
        self.samples = 0
        self._heard_more = trio.Event()

    async def wait_for(self, predicate: Callable[[], bool]) -> None:
        """Wait until ``predicate()`` holds, re-checked after every non-silent frame."""
        while not predicate():
            await self._heard_more.wait()

    async def run(self) -> None:
        async for frame in self.audio_in:
            data = np.frombuffer(frame.data, dtype=np.int16)
            nonzero = data[data != 0]
            if nonzero.size:
                self.heard.append((trio.current_time(), int(nonzero[0])))
                self.samples += int(nonzero.size)
                self._heard_more.set()
                self._heard_more = trio.Event()

    def values(self) -> list[int]:
        out: list[int] = []
        for _, v in self.heard:
            if not out or out[-1] != v:
                out.append(v)
        return out


async def _loopback(bridge, output):
    track = await output.create_track("loopback")
    audio_in = RoomAudioInput(bridge, sample_rate=RATE, frame_size_ms=10)
    return track, audio_in, Recorder(audio_in)


async def test_frames_come_back_in_order_and_playout_is_reported() -> None:
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            async with open_room_audio_output(bridge, sample_rate=RATE) as output, \
                    trio.open_nursery() as nursery:
                track, audio_in, rec = await _loopback(bridge, output)
                await nursery.start(audio_in.serve_track, track)
                nursery.start_soon(rec.run)
                started = []
                output.on("playback_started", started.append)
                t0 = trio.current_time()
                for i in range(30):  # 0.3 s in 10 ms frames
                    await output.capture_frame(tone(i + 1))
                output.flush()
                ev = await output.wait_for_playout()
                elapsed = trio.current_time() - t0
                await rec.wait_for(lambda: rec.samples >= 30 * FRAME)
                nursery.cancel_scope.cancel()
            assert len(started) == 1
            assert not ev.interrupted and ev.playback_position == pytest.approx(0.3, abs=0.011)
            assert 0.25 <= elapsed < 0.8  # played in real time, not dumped
            assert rec.values() == list(range(1, 31))
            assert rec.samples == 30 * FRAME
            stats = bridge.statistics()
            # frames merged into 50 ms chunks, handed over in bursts
            assert stats.batches_to_asyncio < 30
            assert stats.asyncio_tasks == 0


async def test_clear_buffer_silences_the_output_within_the_sdk_queue() -> None:
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            async with open_room_audio_output(bridge, sample_rate=RATE,
                                              queue_size_ms=100) as output, \
                    trio.open_nursery() as nursery:
                track, audio_in, rec = await _loopback(bridge, output)
                await nursery.start(audio_in.serve_track, track)
                nursery.start_soon(rec.run)

                async def speak() -> None:
                    for _ in range(200):  # 2 s of audio; capture_frame waits on the queue
                        await output.capture_frame(tone(7))
                    output.flush()

                with trio.move_on_after(0.4):
                    await speak()
                ev = output.clear_buffer()
                cleared_at = trio.current_time()
                await trio.sleep(0.3)   # an absence, in real time: nothing after the clear
                nursery.cancel_scope.cancel()
            assert ev is not None and ev.interrupted
            assert 0.2 <= ev.playback_position <= 0.45
            last_heard = rec.heard[-1][0]
            assert last_heard - cleared_at < 0.15, "audio kept playing after clear_buffer"
            assert rec.samples / RATE < ev.playback_position + 0.1
            assert output.playback_finished_events == [ev]
            assert bridge.statistics().asyncio_tasks == 0


async def test_pause_holds_the_audio_and_resume_plays_the_rest() -> None:
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            async with open_room_audio_output(bridge, sample_rate=RATE,
                                              queue_size_ms=50) as output, \
                    trio.open_nursery() as nursery:
                track, audio_in, rec = await _loopback(bridge, output)
                await nursery.start(audio_in.serve_track, track)
                nursery.start_soon(rec.run)
                for i in range(40):  # 0.4 s: values 1..40
                    if i == 10:
                        await trio.sleep(0.05)
                        output.pause()
                        paused_at = trio.current_time()
                    await output.capture_frame(tone(i + 1))
                output.flush()
                await trio.sleep(0.3)   # an absence, in real time: nothing while paused
                heard_while_paused = [t for t, _ in rec.heard if t > paused_at + 0.1]
                output.resume()
                ev = await output.wait_for_playout()
                await rec.wait_for(lambda: bool(rec.heard) and rec.heard[-1][1] == 40)
                nursery.cancel_scope.cancel()
            assert heard_while_paused == []
            assert not ev.interrupted
            values = rec.values()
            assert values[-1] == 40 and values == sorted(values)
            # the SDK queue at the pause (<= 50 ms) was dropped; the rest played after resume
            assert 0.3 <= rec.samples / RATE <= 0.4
            assert bridge.statistics().asyncio_tasks == 0


async def test_resampling_to_the_output_rate() -> None:
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            async with open_room_audio_output(bridge, sample_rate=RATE) as output, \
                    trio.open_nursery() as nursery:
                track, audio_in, rec = await _loopback(bridge, output)
                await nursery.start(audio_in.serve_track, track)
                nursery.start_soon(rec.run)
                data = np.full(1600, 1000, dtype=np.int16)  # 0.1 s at 16 kHz
                await output.capture_frame(rtc.AudioFrame(data.tobytes(), 16000, 1, 1600))
                output.flush()
                ev = await output.wait_for_playout()
                await rec.wait_for(lambda: rec.samples >= 0.08 * RATE)
                nursery.cancel_scope.cancel()
            assert ev.playback_position == pytest.approx(0.1, abs=0.01)
            assert rec.samples / RATE == pytest.approx(0.1, abs=0.02)


async def test_closing_the_input_ends_iteration_and_leaves_no_task() -> None:
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            async with open_room_audio_output(bridge, sample_rate=RATE) as output:
                track, audio_in, rec = await _loopback(bridge, output)
                async with trio.open_nursery() as nursery:
                    await nursery.start(audio_in.serve_track, track)
                    nursery.start_soon(rec.run)
                    await output.capture_frame(tone(3))
                    output.flush()
                    await output.wait_for_playout()
                    nursery.cancel_scope.cancel()
                audio_in.close()
                async for _ in audio_in:  # only frames buffered before the close remain
                    pass
            assert bridge.statistics().asyncio_tasks == 0
