"""A LiveKit Agents ``vad.VAD`` (e.g. ``silero.VAD.load()``) as a Trio ``VAD``."""

from __future__ import annotations

from typing import ClassVar

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from livekit.agents import vad as lk_vad

from ..io.bridge import AsyncioBridge, executor_jobs_on_loop
from ..models import VADEvent, VADEventType
from ._common import resolve_bridge, to_api_error
from .stt import RecognitionStream, open_recognition_stream

_VAD_TYPES = {t.value: t for t in VADEventType}


class VADAdapter:
    """Wraps a LiveKit Agents VAD for agents_trio; events come back as
    :class:`agents_trio.VADEvent` (durations in seconds, as LiveKit reports them).

    Each 32 ms window of Silero costs ~0.2 ms of ONNX inference, which the plugin hands to the
    loop's default executor: a thread round trip per window that costs the process more CPU
    than the inference. By default the adapter runs those jobs on the loop instead (see
    :func:`agents_trio.io.bridge.executor_jobs_on_loop`); the events are the same.

    Args:
        vad: The LiveKit Agents VAD.
        bridge: The bridge to run it on (default: the current bridge at each call).
        inference_on_loop: Run the jobs the plugin's streams give the loop's default executor
            on the loop (True, the default), or in the executor as under asyncio (False: for a
            VAD whose per-window work is long or blocks).
    """

    #: where a session or agent takes it (``vad=``)
    model_kind: ClassVar[str] = "vad"

    def __init__(self, vad: lk_vad.VAD, *, bridge: AsyncioBridge | None = None,
                 inference_on_loop: bool = True) -> None:
        if not isinstance(vad, lk_vad.VAD):
            raise TypeError(f"VADAdapter wraps a livekit.agents.vad.VAD, got {vad!r}")
        if not isinstance(inference_on_loop, bool):
            raise TypeError(f"inference_on_loop must be a bool, got {inference_on_loop!r}")
        self.vad = vad
        self._bridge = bridge
        self.inference_on_loop = inference_on_loop

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
            stream = await bridge.run_sync(self._open_plugin_stream)
        except Exception as e:
            raise to_api_error(e, self.label) from e
        async with open_recognition_stream(bridge, stream, self.label,
                                           from_lk_vad_event) as recognition:
            yield recognition

    def _open_plugin_stream(self) -> lk_vad.VADStream:
        """In the loop: the plugin's stream (its tasks start here and keep the setting)."""
        if not self.inference_on_loop:
            return self.vad.stream()
        with executor_jobs_on_loop():
            return self.vad.stream()

    def __repr__(self) -> str:
        return f"VADAdapter({self.vad!r})"


def from_lk_vad_event(ev: lk_vad.VADEvent) -> VADEvent | None:
    kind = _VAD_TYPES.get(getattr(ev.type, "value", ev.type))
    if kind is None:
        return None
    return VADEvent(type=kind, speech_duration=ev.speech_duration,
                    silence_duration=ev.silence_duration,
                    inference_duration=ev.inference_duration, speaking=ev.speaking,
                    probability=ev.probability, timestamp=ev.timestamp,
                    samples_index=ev.samples_index, frames=ev.frames,
                    raw_accumulated_silence=ev.raw_accumulated_silence,
                    raw_accumulated_speech=ev.raw_accumulated_speech)
