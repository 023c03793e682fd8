"""``agents_trio.room_io``: LiveKit's ``livekit.agents.room_io`` names. ``RoomIO`` here is
an async context manager opened by ``open_room_io`` (the nursery owns its tasks); see
docs/livekit-names.md for how it differs from LiveKit's ``RoomIO(session, room).start()``."""

from __future__ import annotations

from .io.room import RoomIO, TextInputEvent, open_room_io
from .io.room_options import (AudioInputOptions, AudioOutputOptions, RoomInputOptions,
                              RoomOptions, RoomOutputOptions, TextInputOptions,
                              TextOutputOptions, UnsupportedRoomOptionError, VideoInputOptions)

__all__ = ["AudioInputOptions", "AudioOutputOptions", "RoomIO", "RoomInputOptions",
           "RoomOptions", "RoomOutputOptions", "TextInputEvent", "TextInputOptions",
           "TextOutputOptions", "UnsupportedRoomOptionError", "VideoInputOptions",
           "open_room_io"]
