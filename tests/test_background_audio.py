"""BackgroundAudioPlayer on virtual time: the ambient loop, the thinking sound following the
agent state, play handles, fades, streamed sources, and a room track through the bridge."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import pytest
import trio
from livekit import rtc

from agents_trio import (AgentStateChangedEvent, AudioConfig, BackgroundAudioPlayer,
                         BuiltinAudioClip)
from agents_trio.nurseries import EventFanout


class Sink:
    def __init__(self) -> None:
        self.frames: list[tuple[float, float]] = []  # (time, peak)

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        pcm = np.frombuffer(bytes(frame.data), dtype=np.int16)
        self.frames.append((trio.current_time(), float(np.abs(pcm).max()) / 32767))


class FakeSession:
    def __init__(self) -> None:
        self.events = EventFanout()

    def on(self, name: str, cb: object) -> None:
        self.events.on(name, cb)  # type: ignore[arg-type]

    def off(self, name: str, cb: object) -> None:
        self.events.off(name, cb)  # type: ignore[arg-type]

    def state(self, old: str, new: str) -> None:
        self.events.emit("agent_state_changed",
                         AgentStateChangedEvent(old_state=old, new_state=new))


async def _beep(seconds: float, level: float = 0.5) -> AsyncIterator[rtc.AudioFrame]:
    n = 480
    for _ in range(int(seconds * 100)):
        pcm = (np.full(n, level) * 32767).astype(np.int16)
        yield rtc.AudioFrame(pcm.tobytes(), 48000, 1, n)


async def test_thinking_sound_plays_only_while_thinking(autojump_clock: object) -> None:
    sink, session = Sink(), FakeSession()
    async with BackgroundAudioPlayer(thinking_sound=AudioConfig(
            BuiltinAudioClip.KEYBOARD_TYPING, volume=0.8)) as player:
        await player.start(output=sink, agent_session=session)
        await trio.sleep(1)
        assert sink.frames == []  # nothing plays: no ambient sound
        start = trio.current_time()
        session.state("listening", "thinking")
        await trio.sleep(2)
        session.state("thinking", "speaking")
        stop = trio.current_time()
        await trio.sleep(1)
    times = [t for t, _ in sink.frames]
    assert times and min(times) >= start and max(times) <= stop + 0.05
    assert len(times) > 50  # 20 ms frames through the thinking time
    assert max(p for _, p in sink.frames) > 0


async def test_ambient_loops_and_play_handles_end(autojump_clock: object) -> None:
    sink = Sink()
    async with BackgroundAudioPlayer(ambient_sound=AudioConfig(
            BuiltinAudioClip.OFFICE_AMBIENCE, volume=0.3)) as player:
        await player.start(output=sink)
        handle = player.play(_beep(0.5))
        with trio.fail_after(5):
            await handle
        await trio.sleep(5)
    # the ambient sound keeps a frame every 20 ms going the whole time
    assert len(sink.frames) > 250


async def test_fade_out_after_stop(autojump_clock: object) -> None:
    sink = Sink()
    async with BackgroundAudioPlayer() as player:
        await player.start(output=sink)
        handle = player.play(AudioConfig(_beep(10), fade_out=0.5))
        await trio.sleep(1)
        handle.stop()
        assert not handle.done()  # fading
        await trio.sleep(0.25)
        mid = sink.frames[-1][1]
        with trio.fail_after(2):
            await handle
    assert 0 < mid < 0.49  # quieter halfway through the fade than at full volume (0.5)


async def test_probability_and_errors(autojump_clock: object) -> None:
    player = BackgroundAudioPlayer()
    with pytest.raises(RuntimeError, match="open the BackgroundAudioPlayer"):
        await player.start(output=Sink())
    async with BackgroundAudioPlayer() as player:
        with pytest.raises(RuntimeError, match="not started"):
            player.play(BuiltinAudioClip.HOLD_MUSIC)
        await player.start(output=Sink())
        silent = player.play([AudioConfig(BuiltinAudioClip.HOLD_MUSIC, probability=0.0)])
        assert silent.done()
        with pytest.raises(ValueError):
            player.play(_beep(1), loop=True)
    with pytest.raises(ValueError):
        BackgroundAudioPlayer(stream_timeout_ms=-1)
