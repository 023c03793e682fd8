"""Text transforms applied to LLM text before it reaches the TTS (not the transcript)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

_MARKDOWN = re.compile(r"(\*\*|__|\*|`{1,3}|^#{1,6}\s*|^>\s*)", re.MULTILINE)
_EMOJI = re.compile(
    "[\U0001F300-\U0001FAFF\U00002700-\U000027BF\U0001F000-\U0001F02F\U00002600-\U000026FF"
    "\U0000FE0F\U0000200D]")

TextTransform = Callable[[str], str]


def filter_markdown(text: str) -> str:
    """Drop markdown emphasis, code ticks, headings and quote markers."""
    return _MARKDOWN.sub("", text)


def filter_emoji(text: str) -> str:
    return _EMOJI.sub("", text)


BUILTIN: dict[str, TextTransform] = {"filter_markdown": filter_markdown,
                                     "filter_emoji": filter_emoji}
DEFAULT = ("filter_markdown", "filter_emoji")


def resolve(transforms: Sequence[str | TextTransform] | None) -> list[TextTransform]:
    """Turn names or callables into callables; unknown names raise ValueError."""
    out: list[TextTransform] = []
    for t in transforms or ():
        if callable(t):
            out.append(t)
        elif t in BUILTIN:
            out.append(BUILTIN[t])
        else:
            raise ValueError(f"unknown text transform {t!r}; known: {sorted(BUILTIN)}")
    return out


def apply(transforms: list[TextTransform], text: str) -> str:
    for t in transforms:
        text = t(text)
    return text


_VOWEL_GROUPS = re.compile(r"[aeiouy]+")


def syllables(word: str) -> int:
    """A rough syllable count, enough to pace a transcript against audio."""
    w = re.sub(r"[^a-z]", "", word.lower())
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
    tokens = re.findall(r"\S+\s*", text)
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
