"""Audio and text transports between the session and the outside world."""

from .audio import AudioInput, AudioOutput, TextOutput, silence_frame
from .frame_feed import FeedAttachment, FrameFeed

__all__ = ["AudioInput", "AudioOutput", "FeedAttachment", "FrameFeed", "TextOutput", "silence_frame"]
