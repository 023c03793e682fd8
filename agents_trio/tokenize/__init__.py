"""``agents_trio.tokenize``: LiveKit's ``livekit.agents.tokenize`` names, Trio-native.
``basic.SentenceTokenizer`` splits text into sentences, whole (``tokenize``) or as it streams
in (``stream``: a :class:`SentenceStream`)."""

from __future__ import annotations

from . import basic
from .sentences import SentenceStream, SentenceTokenizer, TokenData

__all__ = ["SentenceStream", "SentenceTokenizer", "TokenData", "basic"]
