"""BackgroundAudioPlayer: ambient sound and "thinking" clips next to the agent's voice
(LiveKit's ``BackgroundAudioPlayer``).

As in LiveKit, the player publishes its own audio track (``background_audio``) in the room and
mixes every sound playing into it: 48 kHz mono, one 20 ms frame per tick, each sound scaled
by its volume (and its fade-in / fade-out envelope), the sum clipped. The ambient sound loops
from ``start()``; the thinking sound plays while the session's agent state is ``thinking``.

Trio: the mixer and one task per sound (it loads or reads the sound and lives as long as it;
its end ends the sound's handle) are tasks of the player's nursery, which lives while the
player is open (``async with BackgroundAudioPlayer(...) as player:``); leaving
the block stops every sound and unpublishes the track. ``start()`` on a player that is not
open raises ``RuntimeError``.

Sources: a file path (decoded with PyAV in a worker thread, cached), a
:class:`BuiltinAudioClip` (LiveKit's clips, read from the installed ``livekit-agents`` when
it is there; without it a clip is a soft generated tone, and a warning says so), or an async
iterator of ``rtc.AudioFrame`` (played until it ends; a frame it does not deliver within
``stream_timeout_ms`` is silence). Instead of a room, ``start(output=...)`` takes any object
with ``async capture_frame(frame)`` (a test sink, a local speaker).
"""

from __future__ import annotations

import enum
import logging
import math
import random
from collections.abc import AsyncIterator, Generator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, NamedTuple, Protocol, Union

import numpy as np
import trio
from livekit import rtc

from .agent import NOT_GIVEN, NotGiven
from .events import AgentStateChangedEvent
from .io.bridge import AsyncioBridge
from .io.resample import FrameResampler
from .options import check_non_negative
from .speech_args import check_flag

logger = logging.getLogger("agents_trio")

SAMPLE_RATE = 48000
FRAME_SAMPLES = SAMPLE_RATE // 50  # 20 ms
TRACK_NAME = "background_audio"


class BuiltinAudioClip(enum.Enum):
    CITY_AMBIENCE = "city-ambience.ogg"
    FOREST_AMBIENCE = "forest-ambience.ogg"
    OFFICE_AMBIENCE = "office-ambience.ogg"
    CROWDED_ROOM = "crowded-room.ogg"
    KEYBOARD_TYPING = "keyboard-typing.ogg"
    KEYBOARD_TYPING2 = "keyboard-typing2.ogg"
    HOLD_MUSIC = "hold_music.ogg"

    def path(self) -> str | None:
        """The clip in the installed livekit-agents package; None when it is not installed."""
        try:
            import livekit.agents.resources as resources
        except ImportError:
            return None
        candidate = Path(resources.__file__).parent / self.value
        return str(candidate) if candidate.exists() else None


AudioSource = Union[str, BuiltinAudioClip, AsyncIterator[rtc.AudioFrame]]


class AudioConfig(NamedTuple):
    """A sound with its volume (0–1), its chance of being picked from a list, and the
    seconds its volume ramps up when it starts and down when it is stopped."""

    source: AudioSource
    volume: float = 1.0
    probability: float = 1.0
    fade_in: float = 0.0
    fade_out: float = 0.0


class AudioSink(Protocol):
    """Where the mixed frames go when the player does not publish in a room."""

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        """Take one 20 ms frame (it may wait, which delays the next tick).

        Cancellation: the player cancels it only when it stops; the frame may be dropped.
        """
        ...


class PlayHandle:
    """One sound playing: ``stop()`` it, or wait until it has played (``await handle``)."""

    def __init__(self, *, fade_out: float = 0.0) -> None:
        self.fade_out = fade_out
        self._done = trio.Event()
        self.stop_requested = False

    def done(self) -> bool:
        return self._done.is_set()

    def stop(self) -> None:
        """Stop the sound (after its fade-out, if it has one)."""
        if self.done():
            return
        self.stop_requested = True
        if self.fade_out <= 0:
            self.mark_done()

    def mark_done(self) -> None:
        self._done.set()

    async def wait_for_playout(self) -> None:
        """Wait until the sound ended or was stopped.

        Cancellation: a checkpoint; the sound plays on.
        """
        await self._done.wait()

    def __await__(self) -> Generator[Any, None, PlayHandle]:
        async def wait() -> PlayHandle:
            await self.wait_for_playout()
            return self
        return wait().__await__()


def _to_mono_48k(frame: rtc.AudioFrame, resampler: FrameResampler) -> np.ndarray:
    out = [np.frombuffer(bytes(f.data), dtype=np.int16).reshape(-1, f.num_channels)
           .mean(axis=1) for f in resampler.push(frame)]
    return (np.concatenate(out) if out else np.zeros(0)).astype(np.float32) / 32768.0


def _decode_file(path: str) -> np.ndarray:
    """A whole file as 48 kHz mono float samples (worker thread)."""
    import av

    chunks: list[np.ndarray] = []
    with av.open(path) as container:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=SAMPLE_RATE)
        for frame in container.decode(audio=0):
            for out in resampler.resample(frame):
                chunks.append(out.to_ndarray().reshape(-1))
        for out in resampler.resample(None):
            chunks.append(out.to_ndarray().reshape(-1))
    pcm = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int16)
    return pcm.astype(np.float32) / 32768.0


def _tone(seconds: float = 2.0) -> np.ndarray:
    """A soft 220 Hz hum with a slow swell: the stand-in for a clip that is not installed."""
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    return (0.05 * np.sin(2 * np.pi * 220 * t) * (0.6 + 0.4 * np.sin(np.pi * t / seconds))
            ).astype(np.float32)


class _Sound:
    """A sound being mixed: where its samples come from and its volume envelope."""

    def __init__(self, handle: PlayHandle, cfg: AudioConfig, *, samples: np.ndarray | None,
                 loop: bool) -> None:
        self.handle = handle
        self.cfg = cfg
        self.samples = samples          # a decoded file or clip
        self.loop = loop
        self.position = 0               # next sample of ``samples``
        self.played = 0                 # samples mixed so far (for the fade-in)
        self.stopped_at: int | None = None
        self.queue = np.zeros(0, dtype=np.float32)  # a streamed source's samples
        self.stream_ended = samples is not None

    def take(self, n: int) -> np.ndarray | None:
        """The next ``n`` samples (zero-padded), or None when the sound has ended."""
        if self.samples is not None:
            if self.position >= len(self.samples):
                if not self.loop or len(self.samples) == 0:
                    return None
                self.position = 0
            out = self.samples[self.position:self.position + n]
            self.position += len(out)
            while self.loop and len(out) < n and len(self.samples):
                more = self.samples[:n - len(out)]
                self.position = len(more)
                out = np.concatenate([out, more])
        else:
            if self.stream_ended and len(self.queue) == 0:
                return None
            out, self.queue = self.queue[:n], self.queue[n:]
        return np.pad(out, (0, n - len(out)))

    def gain(self, n: int) -> np.ndarray:
        idx = self.played + np.arange(n)
        g = np.full(n, self.cfg.volume, dtype=np.float32)
        if self.cfg.fade_in > 0:
            g *= np.sin(np.clip(idx / (self.cfg.fade_in * SAMPLE_RATE), 0, 1) * math.pi / 2)
        if self.stopped_at is not None and self.cfg.fade_out > 0:
            phase = np.clip((idx - self.stopped_at) / (self.cfg.fade_out * SAMPLE_RATE), 0, 1)
            g *= np.cos(phase * math.pi / 2)
        return g


class BackgroundAudioPlayer:
    """Plays ambient and thinking sounds on a track of their own (see the module docstring).

    Args:
        ambient_sound: Played (looped, for a file or clip) from ``start()``.
        thinking_sound: Played while the agent state is ``thinking``.
        stream_timeout_ms: How long the mixer waits for a streamed source's samples before it
            mixes silence for it.

    Raises:
        ValueError: A negative ``stream_timeout_ms``.
    """

    def __init__(self, *, ambient_sound: AudioSource | AudioConfig | list[AudioConfig] | None
                 | NotGiven = NOT_GIVEN,
                 thinking_sound: AudioSource | AudioConfig | list[AudioConfig] | None
                 | NotGiven = NOT_GIVEN, stream_timeout_ms: int = 200) -> None:
        if stream_timeout_ms < 0:
            raise ValueError("stream_timeout_ms must not be negative")
        for name, sound in (("ambient_sound", ambient_sound), ("thinking_sound", thinking_sound)):
            if sound is not None and not isinstance(sound, NotGiven):
                _check_audio(name, sound)
        self._ambient = None if isinstance(ambient_sound, NotGiven) else ambient_sound
        self._thinking = None if isinstance(thinking_sound, NotGiven) else thinking_sound
        self.stream_timeout = stream_timeout_ms / 1000
        self.publication: Any = None
        self._nursery: trio.Nursery | None = None
        self._sink: AudioSink | None = None
        self._sounds: list[_Sound] = []
        self._session: Any = None
        self._thinking_handle: PlayHandle | None = None
        self._ambient_handle: PlayHandle | None = None
        self._cache: dict[str, np.ndarray] = {}
        self._room: Any = None
        self._bridge: AsyncioBridge | None = None
        self._work: trio.Nursery | None = None  # the mixer and the sources' readers
        self._stack: AsyncExitStack | None = None

    # -- lifetime -------------------------------------------------------------------------------
    async def __aenter__(self) -> BackgroundAudioPlayer:
        """Open the player's nursery.

        Cancellation: nothing is opened when it is cancelled.
        """
        stack = AsyncExitStack()
        self._nursery = await stack.enter_async_context(trio.open_nursery())
        self._stack = stack
        return self

    async def __aexit__(self, *exc: object) -> None:
        """Stop every sound and unpublish the track.

        Cancellation: the sounds are stopped already; the unpublishing is shielded up to
        a second.
        """
        await self.aclose()
        assert self._nursery is not None and self._stack is not None
        self._nursery.cancel_scope.cancel()
        self._nursery = None
        await self._stack.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """Stop every sound, forget the session, unpublish the track.

        Cancellation: the unpublishing is shielded (a second at most).
        """
        if self._session is not None:
            self._session.off("agent_state_changed", self._on_agent_state)
            self._session = None
        for sound in self._sounds:
            sound.handle.mark_done()
        self._sounds.clear()
        if self._work is not None:
            self._work.cancel_scope.cancel()
            self._work = None
        if self.publication is not None and self._bridge is not None and self._room is not None:
            with trio.move_on_after(1.0, shield=True):
                await self._bridge.run(self._room.local_participant.unpublish_track,
                                       self.publication.sid)
            self.publication = None

    async def start(self, *, room: Any = None,  # noqa: ANN401 - an rtc.Room
                    agent_session: Any = NOT_GIVEN,  # noqa: ANN401 - an AgentSession
                    track_publish_options: Any = NOT_GIVEN,  # noqa: ANN401
                    output: AudioSink | None = None,
                    bridge: AsyncioBridge | None = None) -> None:
        """Publish the track in ``room`` (or write to ``output``), start mixing and the
        ambient sound, and follow ``agent_session``'s state for the thinking sound.

        Args:
            bridge: The asyncio bridge of the room (by default the job's).

        Raises:
            RuntimeError: The player is not open, or neither a room nor an output is given.

        Cancellation: cancelling it while it publishes leaves nothing playing.
        """
        if self._nursery is None:
            raise RuntimeError("open the BackgroundAudioPlayer first (async with "
                               "BackgroundAudioPlayer(...) as player:): it owns the mixer")
        if output is None:
            if room is None:
                raise RuntimeError("give a room (or an output) to play into")
            output = await self._publish(room, bridge, track_publish_options)
        self._sink = output
        # decode the configured files now, so the thinking sound starts with the thinking
        for configured in (self._ambient, self._thinking):
            for cfg in _configs(configured):
                if isinstance(cfg.source, (str, BuiltinAudioClip)):
                    await self._samples_of(cfg.source)
        self._work = await self._nursery.start(self._run_work)
        self._work.start_soon(self._mix)
        if not isinstance(agent_session, NotGiven) and agent_session is not None:
            self._session = agent_session
            agent_session.on("agent_state_changed", self._on_agent_state)
        if self._ambient is not None:
            self._ambient_handle = self.play(self._ambient, loop=True)

    @staticmethod
    async def _run_work(*, task_status: trio.TaskStatus[trio.Nursery]) -> None:
        async with trio.open_nursery() as work:
            task_status.started(work)
            await trio.sleep_forever()

    async def _publish(self, room: Any, bridge: AsyncioBridge | None,  # noqa: ANN401
                       options: Any) -> AudioSink:  # noqa: ANN401
        if bridge is None:
            from .job import get_job_context
            job = get_job_context(required=False)
            if job is None:
                raise RuntimeError("publishing in a room needs its asyncio bridge (bridge=)")
            bridge = job.bridge
        source = await bridge.run_sync(rtc.AudioSource, SAMPLE_RATE, 1)
        track = await bridge.run_sync(rtc.LocalAudioTrack.create_audio_track, TRACK_NAME,
                                      source)
        publish_options = options if not isinstance(options, NotGiven) and options \
            else rtc.TrackPublishOptions()
        self.publication = await bridge.run(room.local_participant.publish_track, track,
                                            publish_options)
        self._room, self._bridge = room, bridge
        return _RoomSink(bridge, source)

    # -- playing ----------------------------------------------------------------------------
    def play(self, audio: AudioSource | AudioConfig | list[AudioConfig], *,
             loop: bool = False) -> PlayHandle:
        """Play ``audio`` once (or looped: files and clips only).

        Raises:
            RuntimeError: The player is not started.
            ValueError: ``loop`` with a streamed source.
        """
        _check_audio("audio", audio)
        check_flag("loop", loop)
        if self._work is None:
            raise RuntimeError("BackgroundAudioPlayer is not started")
        cfg = _pick(audio)
        if cfg is None:  # the draw picked silence
            handle = PlayHandle()
            handle.mark_done()
            return handle
        streamed = not isinstance(cfg.source, (str, BuiltinAudioClip))
        if loop and streamed:
            raise ValueError("an async iterator cannot be looped; give a file or a clip")
        handle = PlayHandle(fade_out=cfg.fade_out)
        self._work.start_soon(self._play, handle, cfg, loop)
        return handle

    async def _play(self, handle: PlayHandle, cfg: AudioConfig, loop: bool) -> None:
        """Play one sound. The task lives as long as the sound and its end ends the handle
        (as LiveKit's play task), so no handle outlives its sound: a source that fails is
        logged, and a close cuts the sound short, also while it is still loading."""
        sound: _Sound | None = None
        try:
            source = cfg.source
            if isinstance(source, (str, BuiltinAudioClip)):
                samples = await self._samples_of(source)
                if handle.done():
                    return  # stopped while it loaded
                sound = _Sound(handle, cfg, samples=samples, loop=loop)
                self._sounds.append(sound)
            else:
                sound = _Sound(handle, cfg, samples=None, loop=False)
                self._sounds.append(sound)
                await self._read_stream(sound, source)
            await handle.wait_for_playout()  # the mixer ends it, or stop()
        except Exception:
            logger.exception("background audio: %r could not be played", cfg.source)
        finally:
            handle.mark_done()
            if sound in self._sounds:
                self._sounds.remove(sound)

    async def _read_stream(self, sound: _Sound, source: AsyncIterator[rtc.AudioFrame]) -> None:
        resampler = FrameResampler(SAMPLE_RATE)
        try:
            async for frame in source:
                if sound.handle.done():
                    break
                sound.queue = np.concatenate([sound.queue, _to_mono_48k(frame, resampler)])
                while len(sound.queue) > SAMPLE_RATE and not sound.handle.done():
                    await trio.sleep(0.1)  # a second ahead is enough
        finally:
            sound.stream_ended = True

    async def _samples_of(self, source: str | BuiltinAudioClip) -> np.ndarray:
        if isinstance(source, BuiltinAudioClip):
            path = source.path()
            if path is None:
                logger.warning("livekit-agents is not installed: %s plays a generated tone",
                               source.name)
                return _tone()
            source = path
        if source not in self._cache:
            self._cache[source] = await trio.to_thread.run_sync(_decode_file, source)
        return self._cache[source]

    def _on_agent_state(self, ev: AgentStateChangedEvent) -> None:
        if self._thinking is None or self._sink is None:
            return
        if ev.new_state == "thinking":
            if self._thinking_handle is None or self._thinking_handle.done():
                self._thinking_handle = self.play(self._thinking)
        elif self._thinking_handle is not None:
            self._thinking_handle.stop()

    # -- the mixer --------------------------------------------------------------------------
    def mix_frame(self) -> rtc.AudioFrame:
        """The next 20 ms of every sound playing, mixed (removes the sounds that ended)."""
        mixed = np.zeros(FRAME_SAMPLES, dtype=np.float32)
        for sound in list(self._sounds):
            handle = sound.handle
            if handle.stop_requested and sound.stopped_at is None:
                sound.stopped_at = sound.played
            faded = (sound.stopped_at is not None and sound.played - sound.stopped_at
                     >= sound.cfg.fade_out * SAMPLE_RATE)
            chunk = None if handle.done() or faded else sound.take(FRAME_SAMPLES)
            if chunk is None:
                handle.mark_done()
                self._sounds.remove(sound)
                continue
            mixed += chunk * sound.gain(FRAME_SAMPLES)
            sound.played += FRAME_SAMPLES
        pcm = (np.clip(mixed, -1.0, 1.0) * 32767).astype(np.int16)
        return rtc.AudioFrame(pcm.tobytes(), SAMPLE_RATE, 1, FRAME_SAMPLES)

    async def _mix(self) -> None:
        assert self._sink is not None
        tick = trio.current_time()
        while True:
            if self._sounds:
                await self._sink.capture_frame(self.mix_frame())
            tick += FRAME_SAMPLES / SAMPLE_RATE
            await trio.sleep_until(tick)


class _RoomSink:
    def __init__(self, bridge: AsyncioBridge, source: rtc.AudioSource) -> None:
        self._bridge = bridge
        self._source = source

    async def capture_frame(self, frame: rtc.AudioFrame) -> None:
        await self._bridge.run(self._source.capture_frame, frame)


def _configs(audio: AudioSource | AudioConfig | list[AudioConfig] | None) -> list[AudioConfig]:
    if audio is None:
        return []
    if isinstance(audio, list):
        return audio
    return [audio if isinstance(audio, AudioConfig) else AudioConfig(audio)]


def _check_audio(name: str, audio: object) -> None:
    """What ``play`` (or the constructor, for the ambient and thinking sounds) is given,
    checked there: a wrong source or a bad number used to fail in the mixer, which ended
    the player (a fade given as a str), or to silence every sound (a NaN volume)."""
    items = audio if isinstance(audio, list) else [audio]
    for item in items:
        if isinstance(audio, list) and not isinstance(item, AudioConfig):
            raise TypeError(f"{name}: a list holds AudioConfig items, got {item!r}")
        cfg = item if isinstance(item, AudioConfig) else AudioConfig(item)  # type: ignore[arg-type]
        if not (isinstance(cfg.source, (str, BuiltinAudioClip))
                or hasattr(cfg.source, "__aiter__")):
            raise TypeError(f"{name} must be a file path, a BuiltinAudioClip, an async "
                            "iterator of rtc.AudioFrame or an AudioConfig (or a list of them), "
                            f"got {cfg.source!r}")
        for field in ("volume", "probability"):
            value = getattr(cfg, field)
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value)):
                raise ValueError(f"{name}'s {field} must be a finite number, got {value!r}")
        check_non_negative(f"{name}'s fade_in", cfg.fade_in, finite=True)
        check_non_negative(f"{name}'s fade_out", cfg.fade_out, finite=True)


def _pick(audio: AudioSource | AudioConfig | list[AudioConfig]) -> AudioConfig | None:
    """One config: a list is drawn by probability (a total below 1 may draw silence)."""
    if isinstance(audio, AudioConfig):
        return audio
    if not isinstance(audio, list):
        return AudioConfig(audio)
    total = sum(max(c.probability, 0.0) for c in audio)
    if total <= 0:
        return None
    r = random.random()
    if total < 1.0 and r > total:
        return None
    r *= min(total, 1.0)
    for cfg in audio:
        share = max(cfg.probability, 0.0) / max(total, 1.0)
        if r < share:
            return cfg
        r -= share
    return audio[-1]
