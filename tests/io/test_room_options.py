"""LiveKit's room I/O option classes (``room_io.RoomOptions`` and its parts, the deprecated
``RoomInputOptions``/``RoomOutputOptions``): resolved as LiveKit resolves them, honoured by the
room I/O, and refused, by name, where this runtime cannot honour them."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import trio
from livekit import rtc

from agents_trio import Agent, AgentSession, RoomInputOptions, RoomOutputOptions, open_bridge
from agents_trio.io.audio import TextOutput
from agents_trio.room_io import (AudioInputOptions, AudioOutputOptions, RoomOptions,
                                 TextInputEvent, TextInputOptions, TextOutputOptions,
                                 UnsupportedRoomOptionError, VideoInputOptions, open_room_io)
from agents_trio.io.room_options import resolve_room_options
from agents_trio.testing import FakeLLM, FakeRemoteParticipant, FakeRoom
from agents_trio.testing.actions import FakeLLMResponse
from room_witnesses import room_events_handled, session_until

lk_room_io = pytest.importorskip("livekit.agents.voice.room_io.types")


def _resolved(options: RoomOptions) -> dict[str, Any]:
    return {"text_input": options.get_text_input_options() is not None,
            "audio_input": options.get_audio_input_options() is not None,
            "video_input": options.get_video_input_options() is not None,
            "audio_output": options.get_audio_output_options() is not None,
            "text_output": options.get_text_output_options() is not None}


@pytest.mark.parametrize("inp, out", [
    ({}, {}),
    ({"text_enabled": False}, {"audio_enabled": False}),
    ({"audio_enabled": False, "audio_sample_rate": 16000}, {"transcription_enabled": False}),
    ({"audio_sample_rate": 48000, "audio_num_channels": 2, "audio_frame_size_ms": 20},
     {"audio_sample_rate": 16000, "audio_track_name": "voice"}),
])
def test_deprecated_options_resolve_as_livekit_resolves_them(inp: dict[str, Any],
                                                              out: dict[str, Any]) -> None:
    lk = lk_room_io.RoomOptions._ensure_options(
        lk_room_io.NOT_GIVEN, room_input_options=lk_room_io.RoomInputOptions(**inp),
        room_output_options=lk_room_io.RoomOutputOptions(**out))
    ours = resolve_room_options(room_input_options=RoomInputOptions(**inp),
                                room_output_options=RoomOutputOptions(**out))
    assert _resolved(ours) == {
        "text_input": lk.get_text_input_options() is not None,
        "audio_input": lk.get_audio_input_options() is not None,
        "video_input": lk.get_video_input_options() is not None,
        "audio_output": lk.get_audio_output_options() is not None,
        "text_output": lk.get_text_output_options() is not None}
    for part in ("audio_input", "audio_output"):
        theirs = getattr(lk, f"get_{part}_options")()
        mine = getattr(ours, f"get_{part}_options")()
        if theirs is None:
            assert mine is None
            continue
        for field in ("sample_rate", "num_channels", "frame_size_ms", "track_name"):
            if hasattr(theirs, field):
                value = getattr(theirs, field)
                assert getattr(mine, field) == (None if value is lk_room_io.NOT_GIVEN else value)
    assert ours.close_on_disconnect == lk.close_on_disconnect


def test_room_options_given_win_over_the_deprecated_ones() -> None:
    options = RoomOptions(audio_input=False)
    assert resolve_room_options(options, room_input_options=RoomInputOptions(
        audio_enabled=True)) is options


def test_defaults_are_livekit_defaults() -> None:
    lk = lk_room_io.RoomOptions()
    assert _resolved(RoomOptions()) == {
        "text_input": True, "audio_input": True, "video_input": False, "audio_output": True,
        "text_output": True}
    assert _resolved(RoomOptions()) == _resolved(lk)  # type: ignore[arg-type]
    ours, theirs = AudioInputOptions(), lk_room_io.AudioInputOptions()
    assert (ours.sample_rate, ours.num_channels, ours.frame_size_ms) == (
        theirs.sample_rate, theirs.num_channels, theirs.frame_size_ms)


@pytest.mark.parametrize("build, option", [
    (lambda: RoomOptions(video_input=True), "RoomOptions.video_input"),
    (lambda: RoomOptions(video_input=VideoInputOptions()), "RoomOptions.video_input"),
    (lambda: AudioInputOptions(noise_cancellation=object()),
     "AudioInputOptions.noise_cancellation"),
    (lambda: AudioInputOptions(auto_gain_control=True), "AudioInputOptions.auto_gain_control"),
    (lambda: TextOutputOptions(transcription_speed_factor=1.5),
     "TextOutputOptions.transcription_speed_factor"),
    (lambda: TextOutputOptions(json_format=True), "TextOutputOptions.json_format"),
    (lambda: resolve_room_options(room_input_options=RoomInputOptions(video_enabled=True)),
     "RoomOptions.video_input"),
])
def test_what_cannot_be_honoured_is_refused_by_name(build: Any, option: str) -> None:
    with pytest.raises(UnsupportedRoomOptionError, match=option.replace(".", r"\.")):
        build()


def test_bad_values_and_types_are_refused() -> None:
    with pytest.raises(ValueError, match="sample_rate"):
        AudioInputOptions(sample_rate=0)
    with pytest.raises(TypeError, match="expected RoomOptions"):
        resolve_room_options(lk_room_io.RoomOptions())  # type: ignore[arg-type]


async def test_session_start_refuses_unsupported_deprecated_options() -> None:
    session = AgentSession(llm=FakeLLM())
    with pytest.raises(UnsupportedRoomOptionError, match="video_input"):
        await session.start(Agent(instructions="x"), room_input_options=RoomInputOptions(
            video_enabled=True))


class Collected(TextOutput):
    def __init__(self) -> None:
        self.texts: list[str] = []
        self.flushes = 0

    async def capture_text(self, text: str) -> None:
        self.texts.append(text)

    def flush(self) -> None:
        self.flushes += 1


async def test_the_room_io_honours_the_parts_options(
        autojump_clock: trio.testing.MockClock) -> None:
    chained = Collected()
    heard: list[str] = []

    async def on_text(session: Any, ev: TextInputEvent) -> None:
        heard.append(ev.text)
        session.generate_reply(user_input=ev.text)

    options = RoomOptions(audio_input=False, audio_output=False,
                          text_input=TextInputOptions(text_input_cb=on_text),
                          text_output=TextOutputOptions(next_in_chain=chained))
    llm = FakeLLM([FakeLLMResponse(input="hi", content="hello there")])
    session = AgentSession(llm=llm)
    async with open_bridge() as bridge:
        room = FakeRoom()
        async with open_room_io(room, session, options=options) as rio, session:
            await session.start(Agent(instructions="x"))
            assert rio.audio_input is None and rio.audio_output is None
            bridge.call_soon(room.join, FakeRemoteParticipant("user"))
            await rio.wait_for_participant()
            bridge.call_soon(room.send_chat, "user", "hi")
            await session_until(session, lambda: chained.flushes > 0)
            await room_events_handled(bridge)
    assert heard == ["hi"]
    assert "".join(chained.texts) == "hello there"
    assert [w.text for w in room.transcripts("agent")][-1:] == ["hello there"]


def test_audio_output_options_carry_the_publish_options() -> None:
    publish = rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_SCREENSHARE_AUDIO)
    resolved = resolve_room_options(room_output_options=RoomOutputOptions(
        audio_publish_options=publish, audio_track_name="voice"))
    out = resolved.get_audio_output_options()
    assert out is not None and out.track_publish_options is publish
    assert out.track_name == "voice"
    assert dataclasses.replace(RoomOptions(), audio_output=False).get_audio_output_options() is None


def test_audio_output_defaults_are_livekit_defaults() -> None:
    ours, theirs = AudioOutputOptions(), lk_room_io.AudioOutputOptions()
    assert (ours.sample_rate, ours.num_channels) == (theirs.sample_rate, theirs.num_channels)
    assert ours.track_publish_options.source == theirs.track_publish_options.source
