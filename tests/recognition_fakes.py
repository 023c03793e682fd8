"""A VAD/STT driven by the test, step by step, for the fault and close tests.

``ManualRecognizer`` works as a VAD or an STT: each ``stream()`` call opens a new
``ManualStream``; the test sends events into the newest one, makes its iteration fail, or makes
its ``push_frame`` raise. Opening times and pushed audio are recorded for assertions.
"""

from __future__ import annotations

import math
from contextlib import asynccontextmanager
from typing import Any

import trio

from agents_trio import SpeechData, SpeechEvent, SpeechEventType, VADEvent, VADEventType


class ManualStream:
    def __init__(self, *, push_error: BaseException | None = None,
                 failed_at: list[float] | None = None) -> None:
        self.push_error = push_error
        self.failed_at = failed_at if failed_at is not None else []   # when a push raised
        self.pushed = 0.0        # seconds of audio pushed
        self.input_ended = False
        self.on_push: list[Any] = []   # events the next push returns (produced at once)
        self._send, self._recv = trio.open_memory_channel[Any](math.inf)

    def push_frame(self, frame: Any) -> list[Any]:
        if self.push_error is not None:
            self.failed_at.append(trio.current_time())
            raise self.push_error
        self.pushed += frame.duration
        events, self.on_push = self.on_push, []
        return events

    def end_input(self) -> None:
        self.input_ended = True

    def send(self, ev: Any) -> None:
        self._send.send_nowait(ev)

    def fail(self, error: BaseException) -> None:
        """The next ``__anext__`` raises ``error``."""
        self._send.send_nowait(error)

    def __aiter__(self) -> ManualStream:
        return self

    async def __anext__(self) -> Any:
        try:
            item = await self._recv.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None
        if isinstance(item, BaseException):
            raise item
        return item


class ManualRecognizer:
    """A VAD or STT under the test's control.

    Args:
        push_error: Every stream's ``push_frame`` raises it (None: pushing works).
        open_errors: Errors raised by the next ``stream()`` calls, one per call, in order.
    """

    def __init__(self, *, push_error: BaseException | None = None,
                 open_errors: list[BaseException] | None = None) -> None:
        self.push_error = push_error
        self.open_errors = list(open_errors or [])
        self.streams: list[ManualStream] = []
        self.opened_at: list[float] = []
        self.failed_at: list[float] = []   # when a stream's push raised, every stream

    @property
    def current(self) -> ManualStream:
        return self.streams[-1]

    @asynccontextmanager
    async def stream(self) -> Any:
        self.opened_at.append(trio.current_time())
        if self.open_errors:
            raise self.open_errors.pop(0)
        stream = ManualStream(push_error=self.push_error, failed_at=self.failed_at)
        self.streams.append(stream)
        yield stream


def vad_event(kind: str, *, speech: float = 0.0, silence: float = 0.0) -> VADEvent:
    return VADEvent(type=VADEventType(kind), speech_duration=speech, silence_duration=silence,
                    speaking=kind == "start_of_speech")


def stt_event(kind: str, text: str = "") -> SpeechEvent:
    alternatives = [SpeechData(text=text)] if text else []
    return SpeechEvent(type=SpeechEventType(kind), alternatives=alternatives)


def final(text: str) -> SpeechEvent:
    return stt_event("final_transcript", text)


def interim(text: str) -> SpeechEvent:
    return stt_event("interim_transcript", text)
