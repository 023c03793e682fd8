"""``agents_trio.tokenize.basic``: LiveKit's rule-based tokenizers (``SentenceTokenizer``)."""

from __future__ import annotations

from .sentences import BasicSentenceTokenizer as SentenceTokenizer
from .sentences import split_sentences

__all__ = ["SentenceTokenizer", "split_sentences"]
