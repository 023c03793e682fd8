"""Text transforms applied to LLM text before it reaches the TTS (not the transcript).

A transform is either a function of one chunk (``str -> str``) or, as in LiveKit, a function
of the whole stream (``AsyncIterable[str] -> AsyncIterable[str]``: an async generator
function, or a :class:`StreamTextTransform` such as :func:`replace`'s), which may hold text
back until it knows what to do with it.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import (AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable,
                             Mapping, Sequence)
from typing import cast

_MARKDOWN = re.compile(r"(\*\*|__|\*|`{1,3}|^#{1,6}\s*|^>\s*)", re.MULTILINE)
_EMOJI = re.compile(
    "[\U0001F300-\U0001FAFF\U00002700-\U000027BF\U0001F000-\U0001F02F\U00002600-\U000026FF"
    "\U0000FE0F\U0000200D]")

StreamTransform = Callable[[AsyncIterable[str]], AsyncIterable[str]]
TextTransform = Callable[[str], str] | StreamTransform


class StreamTextTransform:
    """A transform of the whole text stream (LiveKit's form of a text transform)."""

    def __call__(self, text: AsyncIterable[str]) -> AsyncIterable[str]:
        raise NotImplementedError


def is_stream_transform(transform: object) -> bool:
    """Whether ``transform`` takes the stream (an async generator function or a
    :class:`StreamTextTransform`) rather than one chunk at a time."""
    return isinstance(transform, StreamTextTransform) or inspect.isasyncgenfunction(transform)


class _Replacer(StreamTextTransform):
    """Replaces each key of ``replacements`` with its value, in one pass (a replacement is
    never scanned again); where keys overlap the longest wins. Keys are matched anywhere in the
    text, not only as whole words. A trailing piece of text that may still grow into a key is
    held back until the next chunk (or the end) decides."""

    def __init__(self, replacements: Mapping[str, str], case_sensitive: bool) -> None:
        keys = sorted((k for k in replacements if k), key=len, reverse=True)
        self._case_sensitive = case_sensitive
        self._values = {self._fold(k): v for k, v in replacements.items() if k}
        flags = 0 if case_sensitive else re.IGNORECASE
        self._pattern = re.compile("|".join(map(re.escape, keys)), flags) if keys else None
        starts = sorted({k[:n] for k in keys for n in range(1, len(k))}, key=len, reverse=True)
        self._partial = (re.compile("(?:" + "|".join(map(re.escape, starts)) + r")\Z", flags)
                         if starts else None)
        self._longest_start = max((len(k) - 1 for k in keys), default=0)

    def _fold(self, text: str) -> str:
        return text if self._case_sensitive else text.lower()

    def substitute(self, text: str) -> str:
        """``text`` with every key replaced (the whole text at once)."""
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: self._values[self._fold(m.group(0))], text)

    def _safe_end(self, pending: str) -> int:
        """How much of ``pending`` can be replaced and sent now: all but a tail that may
        still become a key, extended over a match that crosses into that tail."""
        end = len(pending)
        if self._partial is not None:
            tail = self._partial.search(pending[-self._longest_start:])
            end -= len(tail.group(0)) if tail else 0
        if self._pattern is not None:
            for m in self._pattern.finditer(pending):
                if m.start() >= end:
                    break
                end = max(end, m.end())
        return end

    async def _replaced(self, text: AsyncIterable[str]) -> AsyncIterator[str]:
        pending = ""
        async for chunk in text:
            pending += chunk
            end = self._safe_end(pending)
            if end:
                ready, pending = pending[:end], pending[end:]
                yield self.substitute(ready)
        if pending:
            yield self.substitute(pending)

    def __call__(self, text: AsyncIterable[str]) -> AsyncIterable[str]:
        return self._replaced(text)


def replace(replacements: Mapping[str, str], case_sensitive: bool = False
            ) -> StreamTextTransform:
    """LiveKit's ``text_transforms.replace``: a transform (for ``tts_text_transforms``)
    replacing each key of ``replacements`` with its value, case-insensitively unless
    ``case_sensitive``; a key split across chunks still matches.

    Raises:
        TypeError: ``replacements`` is not a mapping of strings to strings.
    """
    if not isinstance(replacements, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in replacements.items()):
        raise TypeError(f"replace() takes a mapping of str to str, got {replacements!r}")
    return _Replacer(replacements, case_sensitive)


def filter_markdown(text: str) -> str:
    """Drop markdown emphasis, code ticks, headings and quote markers."""
    return _MARKDOWN.sub("", text)


def filter_emoji(text: str) -> str:
    return _EMOJI.sub("", text)


BUILTIN: dict[str, TextTransform] = {"filter_markdown": filter_markdown,
                                     "filter_emoji": filter_emoji}
DEFAULT = ("filter_markdown", "filter_emoji")


def resolve(transforms: Sequence[str | TextTransform] | None, *,
            name: str = "tts_text_transforms") -> list[TextTransform]:
    """Turn names or callables into callables (``name``: the argument, for the errors).

    Raises:
        TypeError: ``transforms`` is not a list (a single name would be read letter by
            letter), or an item is neither a name nor a callable.
        ValueError: An unknown name.
    """
    if transforms is None:
        return []
    if isinstance(transforms, (str, bytes)) or not isinstance(transforms, Iterable):
        raise TypeError(f"{name} must be a list of transform names or callables (e.g. "
                        f"[{transforms!r}]), got {transforms!r}")
    out: list[TextTransform] = []
    for t in transforms:
        if callable(t):
            out.append(t)
        elif not isinstance(t, str):
            raise TypeError(f"{name}: a transform is a name or a callable, got {t!r}")
        elif t in BUILTIN:
            out.append(BUILTIN[t])
        else:
            raise ValueError(f"{name}: unknown text transform {t!r}; known: "
                             f"{sorted(BUILTIN)}")
    return out


def apply(transforms: list[TextTransform], text: AsyncIterable[str]) -> AsyncIterable[str]:
    """``text`` through ``transforms`` in order: chunk transforms map each chunk, stream
    transforms take the stream so far; the empty chunks they leave are dropped. Without
    transforms ``text`` itself is returned (no layer per chunk): it is expected to have no
    empty chunks (the pipeline never sends one). With transforms, closing the result
    (``aclose``) closes every layer they made."""
    if not transforms:
        return text
    layers: list[AsyncIterable[str]] = []
    for t in transforms:
        if is_stream_transform(t):
            text = cast(StreamTransform, t)(text)
        else:
            text = _each_chunk(cast(Callable[[str], str], t), text)
        layers.append(text)
    layers.append(_non_empty(text))
    return TransformedText(layers)


class TransformedText:
    """Text through a chain of transforms: iterated from the last layer; ``aclose`` closes
    every layer, the last first (a generator that iterates another does not close it when it
    is closed, and a layer left open is finalized later by the garbage collector)."""

    def __init__(self, layers: list[AsyncIterable[str]]) -> None:
        self._layers = layers
        self._last = aiter(layers[-1])

    def __aiter__(self) -> TransformedText:
        return self

    def __anext__(self) -> Awaitable[str]:
        return self._last.__anext__()

    async def aclose(self) -> None:
        """Close the layers, the last first.

        Cancellation: each close runs to its end (a generator's cleanup that awaits can be
        cancelled like any await)."""
        for layer in reversed(self._layers):
            aclose = getattr(layer, "aclose", None)
            if aclose is not None:
                await aclose()


async def _each_chunk(transform: Callable[[str], str], text: AsyncIterable[str]
                      ) -> AsyncIterator[str]:
    async for chunk in text:
        out = transform(chunk)
        if not isinstance(out, str):
            raise TypeError(
                f"the text transform {transform!r} returned {type(out).__name__}, not str: a "
                "transform of the stream must be an async generator function (or a "
                "StreamTextTransform such as replace()'s)")
        yield out


async def _non_empty(text: AsyncIterable[str]) -> AsyncIterator[str]:
    async for chunk in text:
        if chunk:
            yield chunk


_VOWEL_GROUPS = re.compile(r"[aeiouy]+")
_NOT_LETTER = re.compile(r"[^a-z]")
TOKENS = re.compile(r"\s*\S+\s*")
"""A word with its trailing space, the first one with the text's leading space too (how
transcripts are paced): the words of a text join into it, so the words heard by a moment
are a prefix of it."""


@functools.lru_cache(maxsize=4096)
def syllables(word: str) -> int:
    """A rough syllable count, enough to pace a transcript against audio. Memoized: the
    transcript synchronizer counts every word of a segment again each time it wakes."""
    w = _NOT_LETTER.sub("", word.lower())
    if not w:
        return 0
    n = len(_VOWEL_GROUPS.findall(w))
    if w.endswith("e") and n > 1 and not w.endswith(("le", "ee")):
        n -= 1
    return max(n, 1)


def played_prefix(text: str, position: float, audio_duration: float) -> str:
    """The part of ``text`` heard after ``position`` seconds of ``audio_duration`` seconds.

    Words are paced evenly by syllables over the audio; a word counts as heard once its first
    syllable started (LiveKit's transcript synchronizer behaves the same way).
    """
    if position <= 0:
        return ""
    if position >= audio_duration:
        return text
    tokens = TOKENS.findall(text)
    counts = [syllables(t) for t in tokens]
    total = sum(counts) or 1
    per_syllable = audio_duration / total
    heard, elapsed = [], 0.0
    for token, count in zip(tokens, counts):
        if elapsed > position:
            break
        heard.append(token)
        elapsed += count * per_syllable
    return "".join(heard).rstrip()
