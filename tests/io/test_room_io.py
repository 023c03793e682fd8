"""RoomIO against a fake room (no server) with the real SDK audio path.

The room's events are emitted from the asyncio side, as the SDK does; the agent's audio goes
to a real ``AudioSource`` and the user's microphone is a real ``LocalAudioTrack``. The SDK
plays audio on its own real-time threads, so these tests run on the wall clock, each bounded
by ``trio.fail_after`` and waiting on positive witnesses (``room_witnesses``), never polling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import trio
from livekit import rtc

from agents_trio import Agent, AgentSession, SpeechEvent, SpeechEventType, open_bridge
from agents_trio.io.room import RoomOptions, open_room_io
from agents_trio.models import SpeechData
from agents_trio.testing import FakeLLM, FakeRemoteParticipant, FakeRoom, FakeTTS
from agents_trio.testing.actions import FakeLLMResponse, FakeTTSResponse
from room_witnesses import agent_state_reaches, room_events_handled


class Quiet(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Be brief.")


def make_session(reply: str = "Hi there!", audio: float = 0.2, **kwargs: Any) -> AgentSession:
    llm = FakeLLM([FakeLLMResponse(input="hello", content=reply, ttft=0.01, duration=0.02)])
    tts = FakeTTS([FakeTTSResponse(input=reply, audio_duration=audio, ttfb=0.01,
                                   duration=0.02)])
    return AgentSession(llm=llm, tts=tts, **kwargs)


async def test_participant_leaving_closes_the_session_with_participant_disconnected() -> None:
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            room = FakeRoom()
            user = FakeRemoteParticipant("user")
            session = make_session()
            async with open_room_io(room, session) as rio, session:
                await session.start(Quiet())
                bridge.call_soon(room.join, user)
                assert (await rio.wait_for_participant()).identity == "user"
                # another participant leaving, or ours dropping (may reconnect): nothing
                other = FakeRemoteParticipant("other")
                bridge.call_soon(room.join, other)
                bridge.call_soon(room.leave, other, rtc.DisconnectReason.CLIENT_INITIATED)
                await room_events_handled(bridge)
                assert session.agent_state == "listening"
                bridge.call_soon(room.leave, user, rtc.DisconnectReason.CLIENT_INITIATED)
                assert await rio.wait_session_closed() == "participant_disconnected"
            assert bridge.statistics().asyncio_tasks == 0
            assert room.text_handlers == {} and room.local_participant.published == []


async def test_chat_text_is_answered_with_voice_transcription_and_agent_state() -> None:
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            room = FakeRoom()
            user = FakeRemoteParticipant("user")
            session = make_session("Hi there!", audio=0.2)
            async with open_room_io(room, session) as rio, session:
                await session.start(Quiet())
                bridge.call_soon(room.join, user)
                await rio.wait_for_participant()
                bridge.call_soon(room.send_chat, "user", "hello")
                await room.wait_for(lambda: any(w.final for w in room.transcripts("agent")))
                await room.wait_for(lambda: room.local_participant.attributes.get(
                    "lk.agent.state") == "listening" and len(
                        room.local_participant.attribute_history) >= 3)
                states = [a["lk.agent.state"] for a in room.local_participant.attribute_history]
                finished = list(rio.audio_output.playback_finished_events)
            [agent_text] = room.transcripts("agent")
            assert agent_text.text == "Hi there!" and agent_text.final
            assert agent_text.attributes["lk.transcribed_track_id"] == (
                rio._publication.sid)
            assert [m.text_content for m in session.history.messages()
                    if m.role in ("user", "assistant")] == ["hello", "Hi there!"]
            # states are latest-wins, so fast transitions may be skipped, never reordered
            assert states[-1] == "listening" and "speaking" in states
            assert states.index("speaking") > (states.index("thinking")
                                               if "thinking" in states else -1)
            assert len(finished) == 1 and not finished[0].interrupted
            assert finished[0].playback_position == pytest.approx(0.2, abs=0.011)
            assert bridge.statistics().asyncio_tasks == 0


async def test_chat_from_another_participant_is_ignored() -> None:
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            room = FakeRoom()
            session = make_session()
            async with open_room_io(room, session) as rio, session:
                await session.start(Quiet())
                bridge.call_soon(room.join, FakeRemoteParticipant("user"))
                await rio.wait_for_participant()
                bridge.call_soon(room.send_chat, "eavesdropper", "hello")
                await room_events_handled(bridge)
                assert rio.text_input_statistics().ignored == 1   # seen, and ignored
            assert [m for m in session.history.messages() if m.role != "system"] == []


async def test_room_dropping_mid_speech_closes_cleanly_with_job_shutdown() -> None:
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            room = FakeRoom()
            session = make_session("A long answer.", audio=3.0)
            async with open_room_io(room, session) as rio, session:
                await session.start(Quiet())
                bridge.call_soon(room.join, FakeRemoteParticipant("user"))
                await rio.wait_for_participant()
                bridge.call_soon(room.send_chat, "user", "hello")
                await agent_state_reaches(session, "speaking")
                await trio.sleep(0.1)   # some of the answer plays
                dropped_at = trio.current_time()
                bridge.call_soon(room.drop)
                assert await rio.wait_session_closed() == "job_shutdown"
                assert trio.current_time() - dropped_at < 0.5
                [ev] = rio.audio_output.playback_finished_events
            assert ev.interrupted and ev.playback_position < 1.0
            assert bridge.statistics().asyncio_tasks == 0


class CountingVAD:
    """A VAD that only counts the frames it is given (nothing else happens)."""

    def __init__(self) -> None:
        self.samples = 0
        self.loud = 0
        self._counted = trio.Event()

    async def wait_loud(self, samples: float) -> None:
        """Wait until at least ``samples`` non-silent samples were pushed."""
        while self.loud < samples:
            await self._counted.wait()

    def stream(self) -> Any:
        vad = self

        class _Stream:
            def push_frame(self, frame: rtc.AudioFrame) -> None:
                data = np.frombuffer(frame.data, dtype=np.int16)
                vad.samples += data.size
                vad.loud += int((data != 0).sum())
                vad._counted.set()
                vad._counted = trio.Event()

            def end_input(self) -> None:
                pass

            def __aiter__(self) -> Any:
                return self

            async def __anext__(self) -> Any:
                await trio.sleep_forever()

        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def _cm() -> Any:
            yield _Stream()

        return _cm()


class EchoSTT:
    """An STT that reports one final transcript as soon as audio arrives."""

    def stream(self) -> Any:
        from contextlib import asynccontextmanager

        class _Stream:
            def __init__(self) -> None:
                self.first = trio.Event()

            def push_frame(self, frame: rtc.AudioFrame) -> None:
                self.first.set()

            def end_input(self) -> None:
                pass

            def __aiter__(self) -> Any:
                return self._events()

            async def _events(self) -> Any:
                await self.first.wait()
                yield SpeechEvent(type=SpeechEventType.FINAL_TRANSCRIPT,
                                  alternatives=[SpeechData(text="from the mic")])
                await trio.sleep_forever()

        @asynccontextmanager
        async def _cm() -> Any:
            yield _Stream()

        return _cm()


async def test_the_linked_participants_microphone_feeds_the_session() -> None:
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            room = FakeRoom()
            user = FakeRemoteParticipant("user")
            mic_source = await bridge.run_sync(rtc.AudioSource, 24000, 1)
            mic = await bridge.run_sync(rtc.LocalAudioTrack.create_audio_track, "mic",
                                        mic_source)
            publication = user.add_microphone(mic)
            vad = CountingVAD()
            session = AgentSession(vad=vad, stt=EchoSTT(), turn_handling={
                "turn_detection": "manual"})
            options = RoomOptions(input_frame_ms=10, audio_output=False)
            async with open_room_io(room, session, options=options) as rio, session:
                await session.start(Quiet())
                bridge.call_soon(room.join, user)
                await rio.wait_for_participant()
                bridge.call_soon(room.subscribe, user, publication)
                loud = np.full(240, 500, dtype=np.int16).tobytes()
                for _ in range(20):  # 0.2 s of voice
                    await bridge.run(mic_source.capture_frame,
                                     rtc.AudioFrame(loud, 24000, 1, 240))
                await vad.wait_loud(0.15 * 24000)
                await room.wait_for(lambda: room.transcripts("user"))
            [user_text] = room.transcripts("user")
            assert user_text.text == "from the mic" and user_text.final
            assert user_text.attributes["lk.transcribed_track_id"] == publication.sid
            await bridge.run(mic_source.aclose)
            assert bridge.statistics().asyncio_tasks == 0


async def test_an_sdk_error_in_the_agents_audio_closes_the_session_with_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken_capture(self: rtc.AudioSource, frame: rtc.AudioFrame) -> None:
        raise Exception("capture_audio_frame: invalid state")

    monkeypatch.setattr(rtc.AudioSource, "capture_frame", broken_capture)
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            room = FakeRoom()
            session = make_session("Hi there!", audio=0.3)
            async with open_room_io(room, session) as rio, session:
                await session.start(Quiet())
                bridge.call_soon(room.join, FakeRemoteParticipant("user"))
                await rio.wait_for_participant()
                bridge.call_soon(room.send_chat, "user", "hello")
                assert await rio.wait_session_closed() == "error"
            assert "invalid state" in str(rio.audio_output.failure)
            assert bridge.statistics().asyncio_tasks == 0


async def test_an_sdk_error_in_the_users_audio_ends_that_track_only(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from agents_trio.io import room_audio

    failed = trio.Event()

    async def failing_frames(stream: Any) -> Any:
        async for event in stream:
            yield event.frame
            failed.set()
            raise RuntimeError("audio_stream_event: decoder error")

    monkeypatch.setattr(room_audio, "_frames_of", failing_frames)
    with trio.fail_after(5):
        async with open_bridge() as bridge:
            room = FakeRoom()
            user = FakeRemoteParticipant("user")
            mic_source = await bridge.run_sync(rtc.AudioSource, 24000, 1)
            mic = await bridge.run_sync(rtc.LocalAudioTrack.create_audio_track, "mic",
                                        mic_source)
            publication = user.add_microphone(mic)
            vad = CountingVAD()
            session = AgentSession(vad=vad, turn_handling={"turn_detection": "manual"})
            options = RoomOptions(input_frame_ms=10, audio_output=False)
            async with open_room_io(room, session, options=options) as rio, session:
                await session.start(Quiet())
                bridge.call_soon(room.join, user)
                await rio.wait_for_participant()
                bridge.call_soon(room.subscribe, user, publication)
                await failed.wait()
                await room_events_handled(bridge)   # the failure crossed the bridge
                assert rio.audio_input.failures
                assert session.agent_state == "listening"  # the session goes on
                bridge.call_soon(room.leave, user, rtc.DisconnectReason.CLIENT_INITIATED)
                assert await rio.wait_session_closed() == "participant_disconnected"
            assert "decoder error" in str(rio.audio_input.failures[0])
            await bridge.run(mic_source.aclose)
            assert bridge.statistics().asyncio_tasks == 0
