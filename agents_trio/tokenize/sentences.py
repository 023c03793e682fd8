"""Sentences of a text, whole or as it streams in (LiveKit's ``tokenize.basic``).

The rules are LiveKit's rule-based ones, applied in the same order so that the same text gives
the same sentences and the same offsets: periods that do not end a sentence are protected
first (titles such as ``Dr.``, web suffixes such as ``.com``, decimals, ellipses, ``Ph.D.``,
initials, acronyms such as ``U.S.``, company suffixes such as ``Inc.``), except where an
acronym or a suffix is followed by a word that usually starts a sentence (``He``, ``However``
…); then every remaining ``.``, ``!``, ``?`` (and the CJK, Arabic, Urdu and Devanagari stops)
ends a sentence, after a closing double quote when one follows. Sentences of at most
``min_sentence_len`` characters (counting the joining space) are joined to the next one.
``retain_format`` makes every line break end a sentence and keeps the text's spacing.

A stream (:class:`SentenceStream`) holds text until it knows a sentence is over: when its
text splits in two or more, the first one is sent (joined to the following ones until
``min_sentence_len`` is reached), and the rest on ``flush``/``end_input``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import trio

from .._ids import random_hex

__all__ = ["BasicSentenceTokenizer", "SentenceStream", "SentenceTokenizer", "TokenData",
           "split_sentences"]

# Two marks stand for "a period that stays" and "a sentence ends here" while the rules run;
# they are private-use characters, so no rule's pattern can match them. Every rule keeps
# the text's length apart from the end marks, so offsets carry over to the original text.
_KEEP = "\ue000"
_END_MARK = "\ue001"
_LINE_BREAK = "\ue002"

_LETTER = "([A-Za-z])"
_TITLES = "(Mr|St|Mrs|Ms|Dr)"
_SUFFIXES = "(Inc|Ltd|Jr|Sr|Co)"
_STARTERS = (r"(Mr|Mrs|Ms|Dr|Prof|Capt|Cpt|Lt|He\s|She\s|It\s|They\s|Their\s|Our\s|We\s|But\s"
             r"|However\s|That\s|This\s|Wherever)")
_ACRONYM = r"([A-Z][.][A-Z][.](?:[A-Z][.])?)"
_STOPS = "[.!?。！？؟۔।॥]"


def _keep_periods(match: re.Match[str]) -> str:
    return match.group(0).replace(".", _KEEP)


# (pattern, replacement), in the order they apply; each replacement keeps every character
# but turns some periods into _KEEP or adds _END_MARK
_RULES: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(rf"{_TITLES}[.]"), _keep_periods),                      # Dr. Smith
    (re.compile(r"[.](com|net|org|io|gov|edu|me)"), _keep_periods),     # example.com
    (re.compile(r"(?<=[0-9])\.(?=[0-9])"), _KEEP),                      # 3.14, 1.2.3
    (re.compile(r"\.{2,}"), _keep_periods),                             # an ellipsis
    (re.compile(r"Ph\.D\."), _keep_periods),                            # Ph.D.
    # an initial (J. Doe); the white space before it becomes a plain space, as in LiveKit
    (re.compile(rf"\s{_LETTER}[.] "), lambda m: f" {m.group(1)}{_KEEP} "),
    (re.compile(rf"{_ACRONYM} {_STARTERS}"),                            # U.S. He went
     lambda m: f"{m.group(1)}{_END_MARK} {m.group(2)}"),
    (re.compile(rf"{_LETTER}[.]{_LETTER}[.]{_LETTER}[.]"), _keep_periods),   # a.k.a.
    (re.compile(rf"{_LETTER}[.]{_LETTER}[.]"), _keep_periods),               # U.S.
    (re.compile(rf" {_SUFFIXES}[.] {_STARTERS}"),                       # Inc. They said
     lambda m: f" {m.group(1)}{_END_MARK} {m.group(2)}"),   # (LiveKit drops that period)
    (re.compile(rf" {_SUFFIXES}[.]"), _keep_periods),                   # Acme Inc. said
    (re.compile(rf" {_LETTER}[.]"), _keep_periods),                     # a single letter
    (re.compile(rf"({_STOPS})([\"”])"), rf"\1\2{_END_MARK}"),           # ends a quote
    (re.compile(rf"({_STOPS})(?![\"”])"), rf"\1{_END_MARK}"),
]


def _mark_sentence_ends(text: str, retain_format: bool) -> str:
    text = text.replace("\n", _LINE_BREAK + _END_MARK if retain_format else " ")
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text.replace(_KEEP, ".").replace(_LINE_BREAK, "\n")


def split_sentences(text: str, min_sentence_len: int = 20, retain_format: bool = False
                    ) -> list[tuple[str, int, int]]:
    """The sentences of ``text`` as ``(sentence, start, end)``, short ones joined to the next
    with a space (none when ``retain_format``: then the text's own spacing and line breaks
    are kept, else each sentence is stripped and line breaks become spaces).

    The offsets are LiveKit's: they count the characters of non-blank pieces only, so they
    are offsets into the text only while no blank piece came before (a stream cuts its
    buffer at them, as LiveKit's does).
    """
    marked = _mark_sentence_ends(text, retain_format)
    total = len(marked) - marked.count(_END_MARK)
    separator = "" if retain_format else " "
    sentences: list[tuple[str, int, int]] = []
    held = ""
    start = end = 0
    for piece in marked.split(_END_MARK):
        sentence = piece if retain_format else piece.strip()
        if not sentence:
            continue
        held += separator + sentence
        end += len(piece)
        if len(held) > min_sentence_len:
            sentences.append((held[len(separator):], start, end))
            start = end
            held = ""
    if held:
        sentences.append((held[len(separator):], start, total))
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
        if not text:
            return
        self._pending += text
        if len(self._pending) < self._context_len:
            return
        while True:
            sentences = self._split(self._pending)
            if len(sentences) < 2:
                return
            sentence, _, end = sentences[0]
            self._ready = f"{self._ready} {sentence}" if self._ready else sentence
            if len(self._ready) >= self._min_sentence_len:
                self._emit(self._ready)
                self._ready = ""
            self._pending = self._pending[end:]

    def flush(self) -> None:
        """Send what is held (the segment ends here; the next text starts a new one).

        Raises:
            RuntimeError: Input ended.
        """
        self._check_open()
        if self._pending or self._ready:
            held = [self._ready] if self._ready else []
            text = " ".join(held + [s for s, _, _ in self._split(self._pending)])
            if text:
                self._emit(text)
        self._pending = self._ready = ""
        self._segment_id = _segment_id()

    def _split(self, text: str) -> list[tuple[str, int, int]]:
        return split_sentences(text, self._min_sentence_len, self._retain_format)

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
    return random_hex(12)


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
