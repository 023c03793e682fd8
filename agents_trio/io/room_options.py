"""How a room is linked to a session: :class:`RoomOptions` and its parts (LiveKit's
``livekit.agents.room_io`` option classes), plus LiveKit's deprecated
:class:`RoomInputOptions` / :class:`RoomOutputOptions` and their translation.

Each part of the link (text input, audio input, video input, audio output, text output) is
``True``/``False``/``None`` (``None``: the default, on except video) or an options object that
turns it on and configures it. ``RoomOptions.get_*_options()`` resolves a part to its options
object, or None when it is off.

A value of the wrong type is refused when the options are built, naming the option (only
``False`` turns a part off, so ``audio_input=0`` would have left it on). What this runtime
cannot honour is refused too:
video input, noise cancellation and automatic gain control on the input, JSON transcription,
a transcription speed factor other than 1, and deleting the room on
close. Pre-connect audio (``pre_connect_audio``, on by default) is accepted and has no effect:
the room input starts with the live microphone track.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from typing import Any

from livekit import rtc

from ..speech_args import check_callable, check_flag, check_str
from .audio import TextOutput
from .room_chat import TextInputCallback, default_text_input

__all__ = ["AudioInputOptions", "AudioOutputOptions", "DEFAULT_PARTICIPANT_KINDS",
           "RoomInputOptions", "RoomOptions", "RoomOutputOptions", "TextInputOptions",
           "TextOutputOptions", "VideoInputOptions", "resolve_room_options"]

logger = logging.getLogger("agents_trio.room")

DEFAULT_PARTICIPANT_KINDS = (
    rtc.ParticipantKind.PARTICIPANT_KIND_CONNECTOR,
    rtc.ParticipantKind.PARTICIPANT_KIND_SIP,
    rtc.ParticipantKind.PARTICIPANT_KIND_STANDARD,
)
DEFAULT_TRACK_NAME = "roomio_audio"


def _microphone() -> rtc.TrackPublishOptions:
    return rtc.TrackPublishOptions(source=rtc.TrackSource.SOURCE_MICROPHONE)


class UnsupportedRoomOptionError(ValueError):
    """A room option this runtime cannot honour was set."""

    def __init__(self, option: str, why: str) -> None:
        super().__init__(f"{option} is not supported by agents_trio's room I/O: {why}")
        self.option = option


@dataclasses.dataclass
class TextInputOptions:
    """Text the linked participant sends on ``lk.chat``: ``text_input_cb`` is awaited with
    ``(session, TextInputEvent)`` (default: interrupt the agent and reply)."""

    text_input_cb: TextInputCallback = default_text_input

    def __post_init__(self) -> None:
        check_callable("TextInputOptions.text_input_cb", self.text_input_cb)


@dataclasses.dataclass
class AudioInputOptions:
    """The linked participant's microphone as the session's audio input.

    ``sample_rate``/``num_channels``/``frame_size_ms``: the frames the session receives.
    ``noise_cancellation`` and ``auto_gain_control=True`` are refused (no audio filters here);
    ``pre_connect_audio`` is accepted and has no effect.
    """

    sample_rate: int = 24000
    num_channels: int = 1
    frame_size_ms: int = 50
    noise_cancellation: Any = None
    auto_gain_control: bool | None = None
    pre_connect_audio: bool = True
    pre_connect_audio_timeout: float = 3.0

    def __post_init__(self) -> None:
        _positive("AudioInputOptions.sample_rate", self.sample_rate)
        _positive("AudioInputOptions.num_channels", self.num_channels)
        _positive("AudioInputOptions.frame_size_ms", self.frame_size_ms)
        _positive("AudioInputOptions.pre_connect_audio_timeout",
                  self.pre_connect_audio_timeout, allow_zero=True)
        _flag("AudioInputOptions.auto_gain_control", self.auto_gain_control, allow_none=True)
        _flag("AudioInputOptions.pre_connect_audio", self.pre_connect_audio)
        if self.noise_cancellation is not None:
            raise UnsupportedRoomOptionError(
                "AudioInputOptions.noise_cancellation", "no audio filter runs on the input")
        if self.auto_gain_control is True:
            raise UnsupportedRoomOptionError(
                "AudioInputOptions.auto_gain_control", "no audio filter runs on the input")


@dataclasses.dataclass
class VideoInputOptions:
    """Video of the linked participant (refused when turned on: no video input here)."""


@dataclasses.dataclass
class AudioOutputOptions:
    """The agent's voice, published as an audio track (``track_name``, default
    ``roomio_audio``, with ``track_publish_options``) at ``sample_rate``/``num_channels``."""

    sample_rate: int = 24000
    num_channels: int = 1
    track_publish_options: rtc.TrackPublishOptions = dataclasses.field(
        default_factory=_microphone)
    track_name: str | None = None

    def __post_init__(self) -> None:
        _positive("AudioOutputOptions.sample_rate", self.sample_rate)
        _positive("AudioOutputOptions.num_channels", self.num_channels)
        check_str("AudioOutputOptions.track_name", self.track_name, allow_none=True)


@dataclasses.dataclass
class TextOutputOptions:
    """The agent's transcription on ``lk.transcription``; ``next_in_chain`` also receives it.

    ``sync_transcription`` (None: on): release the words in step with the agent's audio, or
    (False) send the text as it is generated. ``transcription_speed_factor`` other than 1
    and ``json_format`` are refused.
    """

    sync_transcription: bool | None = None
    transcription_speed_factor: float = 1.0
    next_in_chain: TextOutput | None = None
    json_format: bool = False

    def __post_init__(self) -> None:
        _flag("TextOutputOptions.sync_transcription", self.sync_transcription, allow_none=True)
        _flag("TextOutputOptions.json_format", self.json_format)
        if self.transcription_speed_factor != 1.0:
            raise UnsupportedRoomOptionError(
                "TextOutputOptions.transcription_speed_factor",
                "the transcription is not synchronized to the audio here")
        if self.json_format:
            raise UnsupportedRoomOptionError("TextOutputOptions.json_format",
                                             "the transcription is sent as plain text")


@dataclasses.dataclass(frozen=True)
class RoomOptions:
    """What :func:`~agents_trio.io.room.open_room_io` links, and how.

    Attributes:
        text_input, audio_input, video_input, audio_output, text_output: Each part of the
            link: a bool, None (default: on, except video), or its options object.
        participant_identity: Link this participant (default: the first that joins).
        participant_kinds: Kinds of participant that can be linked.
        close_on_disconnect: Close the session when the linked participant leaves.
        delete_room_on_close: Delete the room when the session closes (LiveKit's): done by
            the job that linked the room (``ctx.delete_room()``; skipped in the console).
        transcription, agent_state: Turn the transcription / the ``lk.agent.state``
            attribute off (``transcription=False`` is ``text_output=False``).
        input_sample_rate, input_num_channels, input_frame_ms: The user's audio format when
            ``audio_input`` is not an :class:`AudioInputOptions`.
        output_sample_rate, output_num_channels, track_name: The published voice when
            ``audio_output`` is not an :class:`AudioOutputOptions`.
        output_queue_ms: The SDK's playout queue (how fast an interruption is heard).
        text_input_cb: The chat callback when ``text_input`` is not a
            :class:`TextInputOptions`: awaited with ``(session, TextInputEvent)``; chat
            arriving meanwhile is delivered as one input when it returns.
        text_input_max_messages, text_input_max_chars: Bound of the chat waiting for the
            agent; messages beyond it are refused (logged, counted).
    """

    text_input: TextInputOptions | bool | None = None
    audio_input: AudioInputOptions | bool | None = None
    video_input: VideoInputOptions | bool | None = None
    audio_output: AudioOutputOptions | bool | None = None
    text_output: TextOutputOptions | bool | None = None
    participant_kinds: Sequence[int] = DEFAULT_PARTICIPANT_KINDS
    participant_identity: str | None = None
    close_on_disconnect: bool = True
    delete_room_on_close: bool = False
    transcription: bool = True
    agent_state: bool = True
    input_sample_rate: int = 24000
    input_num_channels: int = 1
    input_frame_ms: int = 50
    output_sample_rate: int = 24000
    output_num_channels: int = 1
    output_queue_ms: int = 200
    track_name: str = DEFAULT_TRACK_NAME
    text_input_cb: TextInputCallback = default_text_input
    text_input_max_messages: int = 50
    text_input_max_chars: int = 16_000

    def __post_init__(self) -> None:
        for name, kind in (("text_input", TextInputOptions), ("audio_input", AudioInputOptions),
                           ("video_input", VideoInputOptions),
                           ("audio_output", AudioOutputOptions),
                           ("text_output", TextOutputOptions)):
            _part(f"RoomOptions.{name}", getattr(self, name), kind)
        for name in ("close_on_disconnect", "delete_room_on_close", "transcription",
                     "agent_state"):
            _flag(f"RoomOptions.{name}", getattr(self, name))
        if self.video_input is True or isinstance(self.video_input, VideoInputOptions):
            raise UnsupportedRoomOptionError("RoomOptions.video_input",
                                             "the room I/O has no video input")
        for name in ("output_queue_ms", "text_input_max_messages", "text_input_max_chars",
                     "input_sample_rate", "input_num_channels", "input_frame_ms",
                     "output_sample_rate", "output_num_channels"):
            _positive(f"RoomOptions.{name}", getattr(self, name))
        check_str("RoomOptions.track_name", self.track_name)
        check_callable("RoomOptions.text_input_cb", self.text_input_cb)
        if self.participant_identity is not None and not isinstance(
                self.participant_identity, str):
            # no participant's identity would ever equal it: the session would hear no one
            raise TypeError("RoomOptions.participant_identity must be a str, got "
                            f"{self.participant_identity!r}")

    def get_text_input_options(self) -> TextInputOptions | None:
        """The chat input's options, or None when it is off."""
        if isinstance(self.text_input, TextInputOptions):
            return self.text_input
        return None if self.text_input is False else TextInputOptions(self.text_input_cb)

    def get_audio_input_options(self) -> AudioInputOptions | None:
        """The microphone input's options, or None when it is off."""
        if isinstance(self.audio_input, AudioInputOptions):
            return self.audio_input
        if self.audio_input is False:
            return None
        return AudioInputOptions(sample_rate=self.input_sample_rate,
                                 num_channels=self.input_num_channels,
                                 frame_size_ms=self.input_frame_ms)

    def get_video_input_options(self) -> VideoInputOptions | None:
        """None: video input is never on (turning it on is refused at construction)."""
        return None

    def get_audio_output_options(self) -> AudioOutputOptions | None:
        """The published voice's options, or None when it is off."""
        if isinstance(self.audio_output, AudioOutputOptions):
            return self.audio_output
        if self.audio_output is False:
            return None
        return AudioOutputOptions(sample_rate=self.output_sample_rate,
                                  num_channels=self.output_num_channels,
                                  track_name=self.track_name)

    def get_text_output_options(self) -> TextOutputOptions | None:
        """The transcription output's options, or None when it is off."""
        if self.text_output is False or not self.transcription:
            return None
        if isinstance(self.text_output, TextOutputOptions):
            return self.text_output
        return TextOutputOptions()


def _positive(name: str, value: object, *, allow_zero: bool = False) -> None:
    """A number > 0 (>= 0 when ``allow_zero``): a str or a bool is a ``TypeError``, NaN,
    infinity and what is out of range a ``ValueError``, naming the option."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else 'positive'}, "
                         f"got {value!r}")


def _not_given(value: object) -> bool:
    """Whether ``value`` is ``NOT_GIVEN`` (LiveKit's default of the option fields; this
    runtime's, or LiveKit's own), which means the default here as None does."""
    return type(value).__name__ == "NotGiven"


def _flag(name: str, value: object, *, allow_none: bool = False) -> None:
    if not (allow_none and _not_given(value)):
        check_flag(name, value, allow_none=allow_none)


def _part(name: str, value: object, options: type) -> None:
    """A part of the link: a bool, None/``NOT_GIVEN`` (the default), or its options."""
    if value is None or isinstance(value, (bool, options)) or _not_given(value):
        return
    raise TypeError(f"{name} must be a bool, None or a {options.__name__}, got {value!r}")


# -- LiveKit's deprecated options ---------------------------------------------------------------
@dataclasses.dataclass
class RoomInputOptions:
    """Deprecated in LiveKit (use :class:`RoomOptions`): the input half of the link, for
    ``session.start(room_input_options=...)``. Its fields become a :class:`RoomOptions`
    (see :func:`resolve_room_options`), which refuses what it cannot honour."""

    text_enabled: bool | None = None
    audio_enabled: bool | None = None
    video_enabled: bool | None = None
    audio_sample_rate: int = 24000
    audio_num_channels: int = 1
    audio_frame_size_ms: int = 50
    noise_cancellation: Any = None
    text_input_cb: TextInputCallback = default_text_input
    participant_kinds: Sequence[int] | None = None
    participant_identity: str | None = None
    pre_connect_audio: bool = True
    pre_connect_audio_timeout: float = 3.0
    close_on_disconnect: bool = True
    delete_room_on_close: bool = False

    def __post_init__(self) -> None:
        # checked here, where they are given (the rest when they become a RoomOptions)
        for name in ("text_enabled", "audio_enabled", "video_enabled"):
            _flag(f"RoomInputOptions.{name}", getattr(self, name), allow_none=True)
        for name in ("pre_connect_audio", "close_on_disconnect", "delete_room_on_close"):
            _flag(f"RoomInputOptions.{name}", getattr(self, name))


@dataclasses.dataclass
class RoomOutputOptions:
    """Deprecated in LiveKit (use :class:`RoomOptions`): the output half of the link, for
    ``session.start(room_output_options=...)``."""

    transcription_enabled: bool | None = None
    audio_enabled: bool | None = None
    audio_sample_rate: int = 24000
    audio_num_channels: int = 1
    audio_publish_options: rtc.TrackPublishOptions = dataclasses.field(
        default_factory=_microphone)
    audio_track_name: str | None = None
    sync_transcription: bool | None = None
    transcription_speed_factor: float = 1.0

    def __post_init__(self) -> None:
        for name in ("transcription_enabled", "audio_enabled", "sync_transcription"):
            _flag(f"RoomOutputOptions.{name}", getattr(self, name), allow_none=True)


def resolve_room_options(options: RoomOptions | None = None, *,
                         room_input_options: RoomInputOptions | None = None,
                         room_output_options: RoomOutputOptions | None = None) -> RoomOptions:
    """The :class:`RoomOptions` of ``session.start``'s arguments (LiveKit's rule): the
    deprecated input/output options (a warning is logged) make one when ``options`` is not
    given, and are ignored when it is.

    Raises:
        TypeError: ``options`` is not a :class:`RoomOptions` (or the deprecated ones are not
            theirs).
        UnsupportedRoomOptionError: An option this runtime cannot honour is set.
    """
    if room_input_options is not None and not isinstance(room_input_options, RoomInputOptions):
        raise TypeError(f"room_input_options: expected RoomInputOptions, got "
                        f"{type(room_input_options).__name__}")
    if room_output_options is not None and not isinstance(room_output_options,
                                                          RoomOutputOptions):
        raise TypeError(f"room_output_options: expected RoomOutputOptions, got "
                        f"{type(room_output_options).__name__}")
    if room_input_options is not None or room_output_options is not None:
        logger.warning("RoomInputOptions and RoomOutputOptions are deprecated, use "
                       "RoomOptions instead")
        if options is None:
            return _from_legacy(room_input_options, room_output_options)
    if options is None:
        return RoomOptions()
    if not isinstance(options, RoomOptions):
        raise TypeError(f"room_options: expected RoomOptions, got {type(options).__name__}")
    return options


def _from_legacy(inp: RoomInputOptions | None, out: RoomOutputOptions | None) -> RoomOptions:
    fields: dict[str, Any] = {}
    if inp is not None:
        fields["text_input"] = (False if inp.text_enabled is False
                                else TextInputOptions(text_input_cb=inp.text_input_cb))
        fields["audio_input"] = (False if inp.audio_enabled is False else AudioInputOptions(
            sample_rate=inp.audio_sample_rate, num_channels=inp.audio_num_channels,
            frame_size_ms=inp.audio_frame_size_ms, noise_cancellation=inp.noise_cancellation,
            pre_connect_audio=inp.pre_connect_audio,
            pre_connect_audio_timeout=inp.pre_connect_audio_timeout))
        fields["video_input"] = inp.video_enabled
        if inp.participant_kinds is not None:
            fields["participant_kinds"] = tuple(inp.participant_kinds)
        fields["participant_identity"] = inp.participant_identity
        fields["close_on_disconnect"] = inp.close_on_disconnect
        fields["delete_room_on_close"] = inp.delete_room_on_close
    if out is not None:
        fields["audio_output"] = (False if out.audio_enabled is False else AudioOutputOptions(
            sample_rate=out.audio_sample_rate, num_channels=out.audio_num_channels,
            track_publish_options=out.audio_publish_options, track_name=out.audio_track_name))
        fields["text_output"] = (False if out.transcription_enabled is False else
                                 TextOutputOptions(
                                     sync_transcription=out.sync_transcription,
                                     transcription_speed_factor=out.transcription_speed_factor))
    return RoomOptions(**fields)
