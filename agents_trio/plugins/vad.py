"""A LiveKit Agents ``vad.VAD`` (e.g. ``silero.VAD.load()``) as a Trio ``VAD``."""

from __future__ import annotations

from typing import ClassVar

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from livekit.agents import vad as lk_vad

from ..io.bridge import AsyncioBridge
from ..models import VADEvent, VADEventType
from ._common import resolve_bridge, to_api_error
from .stt import RecognitionStream, open_recognition_stream

_VAD_TYPES = {t.value: t for t in VADEventType}


class VADAdapter:
    """Wraps a LiveKit Agents VAD for agents_trio; events come back as
    :class:`agents_trio.VADEvent` (durations in seconds, as LiveKit reports them).

    Args:
        vad: The LiveKit Agents VAD.
        bridge: The bridge to run it on (default: the current bridge at each call).
    """

    #: where a session or agent takes it (``vad=``)
    model_kind: ClassVar[str] = "vad"

    def __init__(self, vad: lk_vad.VAD, *, bridge: AsyncioBridge | None = None) -> None:
        if not isinstance(vad, lk_vad.VAD):
            raise TypeError(f"VADAdapter wraps a livekit.agents.vad.VAD, got {vad!r}")
        self.vad = vad
        self._bridge = bridge

    @property
    def label(self) -> str:
        return f"{type(self.vad).__module__}.{type(self.vad).__name__}"

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[RecognitionStream[VADEvent]]:
        """A VAD stream: ``push_frame`` (sync, batched into the loop), events by iteration.

        Cancellation:
            Owns the plugin stream; leaving the block closes it (shielded, bounded).
        """
        bridge = await resolve_bridge(self._bridge)
        try:
            stream = await bridge.run_sync(self.vad.stream)
        except Exception as e:
            raise to_api_error(e, self.label) from e
        async with open_recognition_stream(bridge, stream, self.label,
                                           from_lk_vad_event) as recognition:
            yield recognition

    def __repr__(self) -> str:
        return f"VADAdapter({self.vad!r})"


def from_lk_vad_event(ev: lk_vad.VADEvent) -> VADEvent | None:
    kind = _VAD_TYPES.get(getattr(ev.type, "value", ev.type))
    if kind is None:
        return None
    return VADEvent(type=kind, speech_duration=ev.speech_duration,
                    silence_duration=ev.silence_duration,
                    inference_duration=ev.inference_duration, speaking=ev.speaking,
                    probability=ev.probability, timestamp=ev.timestamp)
