"""``agents_trio.room_io``: LiveKit's ``livekit.agents.room_io`` names. ``RoomIO`` here is
an async context manager opened by ``open_room_io`` (the nursery owns its tasks); see
docs/livekit-names.md for how it differs from LiveKit's ``RoomIO(session, room).start()``."""

from __future__ import annotations

from .io.room import RoomIO, RoomOptions, TextInputEvent, open_room_io

__all__ = ["RoomIO", "RoomOptions", "TextInputEvent", "open_room_io"]
