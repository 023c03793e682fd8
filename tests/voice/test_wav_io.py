"""WAV-file audio input and output (issue 11 item 5), on Trio's virtual clock."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trio

from agents_trio.io.audio import capture_frames
from agents_trio.io.wav import (WavInput, WavOutput, mix_stereo, parse_wav, pcm_frames,
                                read_wav, rms, speech_bounds, write_wav)


def tone(seconds: float, rate: int = 16000, hz: float = 440.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (8000 * np.sin(2 * np.pi * hz * t)).astype(np.int16)


def test_wav_round_trip_and_streamed_header(tmp_path: Path) -> None:
    samples = tone(0.5)
    write_wav(tmp_path / "a.wav", samples, 16000)
    got, rate, channels = read_wav(tmp_path / "a.wav")
    assert (rate, channels) == (16000, 1) and np.array_equal(got, samples)
    # espeak-ng --stdout writes placeholder sizes (0x7fffffff): the data runs to the end
    raw = bytearray((tmp_path / "a.wav").read_bytes())
    raw[40:44] = (0x7FFFFFFF).to_bytes(4, "little")
    raw[4:8] = (0x7FFFFFFF).to_bytes(4, "little")
    got, _, _ = parse_wav(bytes(raw))
    assert np.array_equal(got, samples)
    with pytest.raises(ValueError):
        parse_wav(b"RIFF\0\0\0\0WAVEjunk")


async def test_wav_input_real_pace(tmp_path: Path, autojump_clock: object) -> None:
    write_wav(tmp_path / "u.wav", tone(1.0, 22050), 22050)
    inp = WavInput.from_file(tmp_path / "u.wav", sample_rate=16000)
    t0 = trio.current_time()
    times, frames = [], []
    async for frame in inp:
        times.append(trio.current_time() - t0)
        frames.append(frame)
    assert len(frames) == 50 and {f.sample_rate for f in frames} == {16000}
    assert times[0] == pytest.approx(0.02) and times[-1] == pytest.approx(1.0)
    assert rms(inp.recording()) > 4000


async def test_wav_input_as_fast_as_taken(tmp_path: Path, autojump_clock: object) -> None:
    write_wav(tmp_path / "u.wav", tone(1.0), 16000)
    inp = WavInput.from_file(tmp_path / "u.wav", realtime=False)
    t0 = trio.current_time()
    n = 0
    async for _ in inp:
        n += 1
    assert n == 50 and trio.current_time() == t0


async def test_wav_input_keep_open_sends_silence_between_clips(autojump_clock: object) -> None:
    inp = WavInput(keep_open=True, origin=trio.current_time())
    start, end = inp.play(tone(0.2))
    assert (start, end) == (0.0, pytest.approx(0.2))
    async with trio.open_nursery() as nursery:
        async def later() -> None:
            await trio.sleep(0.51)   # the frame [0.48, 0.5) was released at 0.5
            assert inp.play(tone(0.2))[0] == pytest.approx(0.5)
            inp.close()
        nursery.start_soon(later)
        async for _ in inp:
            pass
    rec = inp.recording()
    assert len(rec) == int(0.7 * 16000)
    assert speech_bounds(rec, 16000) == [(0.0, pytest.approx(0.2)), (pytest.approx(0.5),
                                                                      pytest.approx(0.7))]


async def test_wav_output_records_what_played_and_silence_after_a_clear(
        tmp_path: Path, autojump_clock: object) -> None:
    out = WavOutput(sample_rate=16000, origin=trio.current_time())
    started: list[float] = []
    out.on("playback_started", lambda ev: started.append(ev.created_at))
    # 1 s played to its end
    await capture_frames(out, pcm_frames(tone(1.0, 24000), 24000), timeout=1.0)
    out.flush()
    ev = await out.wait_for_playout()
    assert not ev.interrupted and ev.playback_position == pytest.approx(1.0)
    assert trio.current_time() == pytest.approx(1.0)
    # 2 s pushed at t = 2, cleared at t = 2.4
    await trio.sleep(1.0)
    await capture_frames(out, pcm_frames(tone(2.0), 16000), timeout=1.0)
    out.flush()
    with trio.move_on_after(0.4):
        await out.wait_for_playout()
    ev = out.clear_buffer()
    assert ev is not None and ev.interrupted and ev.playback_position == pytest.approx(0.4)
    assert out.clear_buffer() is None
    assert len(started) == 2
    seg1, seg2 = out.segments
    assert (seg1.start, seg1.end, seg1.cleared_at) == (0.0, pytest.approx(1.0), None)
    assert seg2.interrupted and seg2.cleared_at == pytest.approx(2.4)
    assert seg2.end == pytest.approx(2.4) and seg2.pushed == pytest.approx(2.0)
    out.save(tmp_path / "agent.wav", until=5.0)
    rec, rate, _ = read_wav(tmp_path / "agent.wav")
    assert rate == 16000 and len(rec) == 5 * 16000
    bounds = speech_bounds(rec, rate)
    assert [(round(a, 2), round(b, 2)) for a, b in bounds] == [(0.0, 1.0), (2.0, 2.4)]
    assert rms(rec[int(2.42 * rate):]) == 0.0    # the unplayed 1.6 s were dropped


async def test_wav_output_underrun_plays_as_a_gap(autojump_clock: object) -> None:
    out = WavOutput(origin=trio.current_time())
    await out.capture_frame(pcm_frames(tone(0.2), 16000)[0])
    await trio.sleep(0.5)
    await out.capture_frame(pcm_frames(tone(0.2), 16000)[0])
    out.flush()
    ev = await out.wait_for_playout()
    assert ev.playback_position == pytest.approx(0.04)
    assert trio.current_time() == pytest.approx(0.52)
    assert [(round(a, 2), round(b, 2)) for a, b in speech_bounds(out.recording(), 16000)] == [
        (0.0, 0.02), (0.5, 0.52)]


def test_mix_stereo() -> None:
    st = mix_stereo(tone(0.1), np.zeros(3200, np.int16))
    assert st.shape == (3200, 2) and rms(st[:1600, 0]) > 5000 and rms(st[1600:, 0]) == 0 and rms(st[:, 1]) == 0


async def test_wav_output_converts_other_rates_and_keeps_what_the_resampler_held(
        autojump_clock: object) -> None:
    out = WavOutput(sample_rate=16000, origin=trio.current_time())
    # one 10 ms frame at 24 kHz: the resampler holds it until the flush
    await out.capture_frame(pcm_frames(tone(0.01, 24000), 24000)[0])
    out.flush()
    ev = await out.wait_for_playout()
    assert ev.playback_position == pytest.approx(0.01, abs=0.001)
    assert len(out.recording()) == pytest.approx(160, abs=2)
