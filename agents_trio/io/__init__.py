"""Audio and text transports between the session and the outside world."""

from .audio import AudioInput, AudioOutput, TextOutput, silence_frame

__all__ = ["AudioInput", "AudioOutput", "TextOutput", "silence_frame"]
