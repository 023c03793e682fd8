"""Sentences of a text, whole or as it streams in (LiveKit's ``tokenize.basic``).

Rules: a sentence ends at ``.``, ``!``, ``?`` (and the CJK, Arabic, Urdu and Devanagari
stops), with a closing quote kept, followed by white space or the end of the text (the CJK
stops need no space). A period does not end a sentence after a common title or company
abbreviation (``Dr.``, ``Mrs.``, ``Inc.`` …), a single letter (an initial, ``U.S.``) or
another period (an ellipsis). Sentences of at most ``min_sentence_len`` characters are joined
to the next one.

A stream (:class:`SentenceStream`) holds text until it knows a sentence is over: a sentence
is sent once another one has begun after it, and the last one on ``flush``/``end_input``.
"""

from __future__ import annotations

import math
import re
import uuid
from dataclasses import dataclass

import trio

__all__ = ["BasicSentenceTokenizer", "SentenceStream", "SentenceTokenizer", "TokenData",
           "split_sentences"]

_STOPS = ".!?。！？؟۔।॥"
_NO_SPACE_STOPS = "。！？"
_END = re.compile(rf"[{re.escape(_STOPS)}]+[\"”’']?")
_ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "prof", "capt", "cpt", "lt",
                            "inc", "ltd", "jr", "sr", "co", "vs", "etc", "no", "e.g", "i.e",
                            "ph.d"})
_WORD_BEFORE = re.compile(r"([\w.]+)$")


def _is_sentence_end(text: str, start: int, end: int) -> bool:
    mark = text[start:end].rstrip("\"”’'")
    if end < len(text) and not text[end].isspace() and mark[-1] not in _NO_SPACE_STOPS:
        return False
    if mark == ".":
        before = _WORD_BEFORE.search(text, 0, start)
        word = before.group(1).lower() if before else ""
        if word in _ABBREVIATIONS or (len(word.replace(".", "")) <= 2 and "." in word):
            return False   # an abbreviation, or an acronym such as U.S.
        if len(word) == 1 and word.isalpha():
            return False   # an initial
    elif mark.startswith("..") and not mark.strip("."):
        return False       # an ellipsis goes on
    return True


def split_sentences(text: str, min_sentence_len: int = 20, retain_format: bool = False
                    ) -> list[tuple[str, int, int]]:
    """The sentences of ``text`` as ``(sentence, start, end)`` offsets into it (short ones
    joined to the next, with a space); ``retain_format`` keeps line breaks and spacing,
    else line breaks become spaces and each sentence is stripped."""
    pieces: list[tuple[int, int]] = []
    start = 0
    for m in _END.finditer(text):
        if _is_sentence_end(text, m.start(), m.end()):
            pieces.append((start, m.end()))
            start = m.end()
    if start < len(text):
        pieces.append((start, len(text)))
    # a sentence is long enough once it is longer than min_sentence_len, counting the space
    # that joins it to the one before (none when the format is kept)
    spacing = 0 if retain_format else 1
    sentences: list[tuple[str, int, int]] = []
    group: list[str] = []
    group_start = 0
    for piece_start, piece_end in pieces:
        piece = text[piece_start:piece_end]
        if not retain_format:
            piece = piece.replace("\n", " ").strip()
        if not piece.strip():
            continue
        if not group:
            group_start = piece_start
        group.append(piece)
        joined = ("" if retain_format else " ").join(group)
        if len(joined) + spacing > min_sentence_len:
            sentences.append((joined, group_start, piece_end))
            group = []
    if group:
        sentences.append((("" if retain_format else " ").join(group), group_start, len(text)))
    return sentences


@dataclass
class TokenData:
    """One token of a stream: its text, and the segment (between two flushes) it is in."""

    segment_id: str = ""
    token: str = ""


class SentenceStream:
    """Text in (``push_text``, ``flush``, ``end_input``: non-blocking), sentences out (async
    iteration of :class:`TokenData`). Iteration ends after ``end_input`` once every sentence
    was read, or at ``aclose``."""

    def __init__(self, *, min_sentence_len: int, context_len: int, retain_format: bool) -> None:
        self._min_sentence_len = min_sentence_len
        self._context_len = context_len
        self._retain_format = retain_format
        self._pending = ""     # text not yet split off
        self._ready = ""       # sentences split off, shorter than a token so far
        self._segment_id = _segment_id()
        self._send, self._recv = trio.open_memory_channel[TokenData](math.inf)
        self._ended = False

    def push_text(self, text: str) -> None:
        """Add text; sentences known to be complete are sent.

        Raises:
            RuntimeError: Input ended.
        """
        self._check_open()
        self._pending += text
        if len(self._pending) < self._context_len:
            return
        while True:
            sentences = split_sentences(self._pending, 0, self._retain_format)
            if len(sentences) < 2:
                return
            sentence, _, end = sentences[0]
            self._ready = f"{self._ready} {sentence}" if self._ready else sentence
            if len(self._ready) >= self._min_sentence_len:
                self._emit(self._ready)
                self._ready = ""
            self._pending = self._pending[end:].lstrip()

    def flush(self) -> None:
        """Send what is held (the segment ends here; the next text starts a new one).

        Raises:
            RuntimeError: Input ended.
        """
        self._check_open()
        rest = " ".join(s for s, _, _ in split_sentences(self._pending, 0, self._retain_format))
        text = " ".join(part for part in (self._ready, rest) if part)
        if text:
            self._emit(text)
        self._pending = self._ready = ""
        self._segment_id = _segment_id()

    def end_input(self) -> None:
        """Flush, and end the stream after what was sent."""
        self.flush()
        self._ended = True
        self._send.close()

    async def aclose(self) -> None:
        """Stop: iteration ends now, what was not read is dropped.

        Cancellation: not a checkpoint, it completes at once.
        """
        self._ended = True
        self._send.close()
        self._recv.close()

    def _emit(self, token: str) -> None:
        self._send.send_nowait(TokenData(segment_id=self._segment_id, token=token))

    def _check_open(self) -> None:
        if self._ended:
            raise RuntimeError("the sentence stream's input has ended")

    def __aiter__(self) -> SentenceStream:
        return self

    async def __anext__(self) -> TokenData:
        """The next sentence.

        Cancellation: a checkpoint; a cancelled wait loses nothing.
        """
        try:
            return await self._recv.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None


def _segment_id() -> str:
    return uuid.uuid4().hex[:12]


class SentenceTokenizer:
    """What a sentence tokenizer offers (LiveKit's ``tokenize.SentenceTokenizer``)."""

    def tokenize(self, text: str, *, language: str | None = None) -> list[str]:
        raise NotImplementedError

    def stream(self, *, language: str | None = None) -> SentenceStream:
        raise NotImplementedError


class BasicSentenceTokenizer(SentenceTokenizer):
    """LiveKit's ``tokenize.basic.SentenceTokenizer``: the rules of this module.

    Args:
        language: Recorded (the rules are the same for every language).
        min_sentence_len: Sentences of at most this many characters are joined to the next.
        stream_context_len: A stream waits for this many characters before splitting.
        retain_format: Keep line breaks and spacing in the sentences.

    Raises:
        ValueError: A negative length.
    """

    def __init__(self, *, language: str = "english", min_sentence_len: int = 20,
                 stream_context_len: int = 10, retain_format: bool = False) -> None:
        if min_sentence_len < 0 or stream_context_len < 0:
            raise ValueError("min_sentence_len and stream_context_len must not be negative")
        self.language = language
        self.min_sentence_len = min_sentence_len
        self.stream_context_len = stream_context_len
        self.retain_format = retain_format

    def tokenize(self, text: str, *, language: str | None = None) -> list[str]:
        """The sentences of ``text``."""
        return [s for s, _, _ in split_sentences(text, self.min_sentence_len,
                                                 self.retain_format)]

    def stream(self, *, language: str | None = None) -> SentenceStream:
        """A stream splitting text into sentences as it is pushed."""
        return SentenceStream(min_sentence_len=self.min_sentence_len,
                              context_len=self.stream_context_len,
                              retain_format=self.retain_format)
