"""Manual turn control: ``session.commit_user_turn()`` and ``session.clear_user_turn()``.

A commit runs in the session's work nursery (one at a time: a new commit replaces the one
still waiting for its transcript; the close cancels it, as LiveKit's closing recognition
cancels its future) and hands back a ``PendingTranscript`` the caller may await for the
transcript, as LiveKit hands back a future.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import trio

from .activity import Activity
from .nurseries import LatestSlot
from .recognition import AudioRecognition


class CommitCancelledError(RuntimeError):
    """The commit ended before its transcript: a newer commit replaced it, or the session
    closed."""


class PendingTranscript:
    """The transcript of a committed user turn: ``await`` it (or ignore it)."""

    def __init__(self) -> None:
        self._done = trio.Event()
        self._transcript: str | None = None

    def done(self) -> bool:
        return self._done.is_set()

    def set(self, transcript: str | None) -> None:
        """The transcript, or None when the commit was cancelled (first call wins)."""
        if not self._done.is_set():
            self._transcript = transcript
            self._done.set()

    async def wait(self) -> str:
        """The transcript once the turn is committed.

        Cancellation: cancelling the wait leaves the commit running.

        Raises:
            CommitCancelledError: The commit was replaced or the session closed first.
        """
        await self._done.wait()
        if self._transcript is None:
            raise CommitCancelledError("the user turn commit was cancelled (replaced by a "
                                       "newer commit, or the session closed)")
        return self._transcript

    def __await__(self) -> Generator[Any, None, str]:
        return self.wait().__await__()


class ManualTurns:
    """A session's manual commits and clears of the user turn."""

    def __init__(self, *, nursery: Callable[[], trio.Nursery | None],
                 recognition: Callable[[], AudioRecognition | None],
                 activity: Callable[[], Activity | None],
                 generate_reply: Callable[[], object]) -> None:
        self._nursery = nursery
        self._recognition = recognition
        self._activity = activity
        self._generate_reply = generate_reply
        self._slot: LatestSlot | None = None

    def _running_activity(self) -> Activity:
        activity = self._activity()
        if activity is None or self._nursery() is None:
            raise RuntimeError("AgentSession isn't running")
        return activity

    def clear(self) -> None:
        """Drop the open user turn: its transcripts, its pending decision and what the STT
        buffered of it; a realtime model's input audio buffer is cleared too."""
        activity = self._running_activity()
        recognition = self._recognition()
        if recognition is not None:
            recognition.clear_user_turn(restart_stt=True)
        rt = activity.realtime.session if activity.realtime is not None else None
        if rt is not None:
            rt.clear_audio()

    def commit(self, *, transcript_timeout: float, stt_flush_duration: float,
               skip_reply: bool) -> PendingTranscript:
        """End the user turn now; see ``AgentSession.commit_user_turn``."""
        activity = self._running_activity()
        nursery = self._nursery()
        assert nursery is not None
        rt = activity.realtime.session if activity.realtime is not None else None
        if rt is not None:
            # the realtime model answers the committed audio; the STT transcript (if any)
            # only completes the chat context
            rt.commit_audio()
            if not skip_reply:
                self._generate_reply()
            skip_reply = True
        pending = PendingTranscript()
        recognition = self._recognition()
        if recognition is None:
            pending.set("")
            return pending
        if self._slot is None:
            self._slot = LatestSlot(nursery)
        self._slot.replace(self._run, recognition, pending, transcript_timeout,
                           stt_flush_duration, skip_reply)
        return pending

    @staticmethod
    async def _run(recognition: AudioRecognition, pending: PendingTranscript,
                   transcript_timeout: float, stt_flush_duration: float,
                   skip_reply: bool) -> None:
        try:
            pending.set(await recognition.commit_user_turn(
                transcript_timeout=transcript_timeout, stt_flush_duration=stt_flush_duration,
                skip_reply=skip_reply, audio_detached=recognition.input_detached))
        finally:
            pending.set(None)  # cancelled first: the awaiting caller is told
