"""Offline real-voice models: no keys, no network.

- :class:`EspeakTTS`: text to speech with Debian's ``espeak-ng`` (``apt-get install espeak-ng``).
- :class:`SphinxSTT`: speech to text with PocketSphinx, decoding in a subprocess
  (``pip install -e '.[voice]'``), optionally restricted to a list of phrases.
- :class:`SileroVAD`: voice activity detection with the ONNX model of LiveKit's Silero plugin,
  run by agents_trio itself (``SileroVAD.load()`` takes ``silero.VAD.load()``'s arguments);
  ``adapt(silero.VAD.load())`` runs the plugin's own stream on the asyncio bridge instead.

All are Trio models (``agents_trio.models``): good enough for demos and tests on any machine.
"""

from __future__ import annotations

from ._errors import MissingDependency
from .espeak import EspeakTTS
from .silero import SileroModel, SileroVAD, SileroVADOptions, SileroVADStream
from .sphinx import SphinxSTT

__all__ = [
    "EspeakTTS",
    "MissingDependency",
    "SileroModel",
    "SileroVAD",
    "SileroVADOptions",
    "SileroVADStream",
    "SphinxSTT",
]
