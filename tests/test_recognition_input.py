"""How AudioRecognition takes an input with a feed: frames are pushed to the streams from the
producer's step once the streams are open, the input's end ends the streams' input, and a
failing frame handler ends the input's task with its error; the recognition's tasks run in the
caller's nursery."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from agents_trio.chat import ChatContext
from agents_trio.options import TurnHandling
from agents_trio.recognition import AudioRecognition
from agents_trio.testing.fake_io import FakeAudioInput
from recognition_fakes import ManualRecognizer, ManualStream

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup


class Hooks:
    """The session's side, recording what is reported."""

    def __init__(self) -> None:
        self.errors: list[BaseException] = []

    def turn_options(self) -> TurnHandling:
        return TurnHandling()

    def turn_context(self, transcript: str) -> ChatContext:
        return ChatContext()

    def server_detects_turns(self) -> bool:
        return False

    def on_recognition_error(self, error: BaseException, source: object) -> None:
        self.errors.append(error)

    def on_recognition_given_up(self, error: BaseException, source: object) -> None:
        self.errors.append(error)

    def __getattr__(self, name: str) -> Any:  # the other decisions: not looked at here
        return lambda *args, **kwargs: True


class SlowToOpen(ManualRecognizer):
    """Its streams open ``delay`` seconds after they are asked for."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[ManualStream]:
        await trio.sleep(self.delay)
        async with super().stream() as stream:
            yield stream


async def test_frames_put_while_the_stt_opens_reach_both_streams_once_it_is_open(
        autojump_clock):
    vad, stt = ManualRecognizer(), SlowToOpen(delay=1.0)
    audio = FakeAudioInput()
    recognition = AudioRecognition(Hooks(), vad=vad, stt=stt)  # type: ignore[arg-type]
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(recognition.start, nursery, audio)
            for _ in range(5):
                audio.push(0.1)              # buffered in the feed until the STT is open
                await trio.sleep(0.1)
            await trio.sleep(1.0)
            audio.push(0.2)                  # pushed in this step, to both
            assert vad.current.pushed == pytest.approx(0.7)
            assert stt.current.pushed == pytest.approx(0.7)
            audio.close()
            await trio.sleep(0.1)
            # the end of the input ended both streams' input
            assert vad.current.input_ended and stt.current.input_ended
            assert recognition.input_detached
            nursery.cancel_scope.cancel()   # these fake streams never finish by themselves


async def test_a_failing_frame_handler_ends_the_run_with_its_error_unreported(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    audio = FakeAudioInput()
    hooks = Hooks()
    recognition = AudioRecognition(hooks, vad=vad, stt=stt)  # type: ignore[arg-type]
    with pytest.raises(BaseExceptionGroup) as caught, trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await recognition.start(nursery, audio)
            audio.push(0.1)
            assert audio.feed is not None
            audio.feed.put_nowait(object())   # not a frame: the handler raises
            await trio.sleep(1.0)
    failed, rest = caught.value.split(AttributeError)
    assert failed is not None and rest is None   # the handler's error, nothing else
    assert hooks.errors == []                 # the streams did not fail: nothing reported
    assert len(stt.opened_at) == 1 and len(vad.opened_at) == 1   # and none was reopened
    assert not audio.feed.consumer            # detached: the next reader gets the frames


async def test_the_recognitions_tasks_run_in_the_callers_nursery(autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    audio = FakeAudioInput()
    hooks = Hooks()
    recognition = AudioRecognition(hooks, vad=vad, stt=stt)  # type: ignore[arg-type]

    def tasks(nursery: trio.Nursery) -> list[str]:
        return sorted(t.name.rpartition(".")[2] for t in nursery.child_tasks)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await recognition.start(nursery, audio)
            assert tasks(nursery) == ["input", "stt", "vad"]   # no nursery of its own
            audio.close()
            await trio.sleep(0.1)
            assert tasks(nursery) == ["stt", "vad"]   # the input's task ended with the input
            assert vad.current.input_ended and stt.current.input_ended
            vad.current._send.close()   # the models finish: so do their streams' tasks
            stt.current._send.close()
            await trio.sleep(0.1)
            assert tasks(nursery) == []
    assert hooks.errors == []


async def test_cancelling_the_callers_nursery_stops_the_recognition_reporting_nothing(
        autojump_clock):
    vad, stt = ManualRecognizer(), ManualRecognizer()
    audio = FakeAudioInput()
    hooks = Hooks()
    recognition = AudioRecognition(hooks, vad=vad, stt=stt)  # type: ignore[arg-type]
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await recognition.start(nursery, audio)
            audio.push(0.1)
            nursery.cancel_scope.cancel()
    assert hooks.errors == []
    assert audio.feed is not None and not audio.feed.consumer   # detached on the way out
    assert len(vad.opened_at) == 1 and len(stt.opened_at) == 1
