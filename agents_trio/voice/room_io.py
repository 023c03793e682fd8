"""``agents_trio.voice.room_io``: LiveKit's ``livekit.agents.voice.room_io``, the same names as
:mod:`agents_trio.room_io`."""

from __future__ import annotations

from ..room_io import (AudioInputOptions, AudioOutputOptions, RoomInputOptions, RoomIO,
                       RoomOptions, RoomOutputOptions, TextInputEvent, TextInputOptions,
                       TextOutputOptions, UnsupportedRoomOptionError, VideoInputOptions,
                       open_room_io)

__all__ = ["AudioInputOptions", "AudioOutputOptions", "RoomIO", "RoomInputOptions",
           "RoomOptions", "RoomOutputOptions", "TextInputEvent", "TextInputOptions",
           "TextOutputOptions", "UnsupportedRoomOptionError", "VideoInputOptions",
           "open_room_io"]
