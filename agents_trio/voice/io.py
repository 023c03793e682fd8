"""``agents_trio.voice.io``: LiveKit's ``livekit.agents.voice.io`` names: the session's input
and output (``session.input``/``session.output``: ``AgentInput``/``AgentOutput``), the audio
and text I/O they hold, their playback events, and ``TimedString`` (text placed in time, as
STTs and TTSs give it)."""

from __future__ import annotations

from ..events import PlaybackFinishedEvent, PlaybackStartedEvent
from ..io.audio import AudioInput, AudioOutput, TextOutput
from ..models import TimedString
from ..session import SessionInput as AgentInput
from ..session import SessionOutput as AgentOutput

__all__ = ["AgentInput", "AgentOutput", "AudioInput", "AudioOutput", "PlaybackFinishedEvent",
           "PlaybackStartedEvent", "TextOutput", "TimedString"]
