"""Offline real-voice models: no keys, no network.

- :class:`EspeakTTS`: text to speech with Debian's ``espeak-ng`` (``apt-get install espeak-ng``).
- :class:`SphinxSTT`: speech to text with PocketSphinx, decoding in a subprocess
  (``pip install -e '.[voice]'``), optionally restricted to a list of phrases.

Both are Trio models (``agents_trio.models``): good enough for demos and tests on any machine.
Silero VAD comes from LiveKit's plugin through the bridge: ``adapt(silero.VAD.load())``.
"""

from __future__ import annotations

from ._errors import MissingDependency
from .espeak import EspeakTTS
from .sphinx import SphinxSTT

__all__ = ["EspeakTTS", "MissingDependency", "SphinxSTT"]
