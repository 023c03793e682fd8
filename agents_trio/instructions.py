"""Instructions with a part for every modality (LiveKit's ``Instructions``).

An agent's instructions may differ with how the user reached it: a spoken turn wants short
sentences without markup, a typed one may get lists and digits. ``Instructions`` holds the
text both share (``common``), what is added for a spoken turn (``audio``) and for a typed
one (``text``), and ``dynamic``, text that changes between calls (the time, the caller),
kept after the rest so that the stable part can be a provider's cached prompt prefix.

Each reply renders the agent's instructions for the modality of the turn it answers
(``speech_handle.input_details.modality``): ``"audio"`` for a turn the user spoke,
``"text"`` for typed input, ``session.run()`` and ``generate_reply()`` (unless their
``input_modality`` says otherwise). A plain string is the same for every modality.
"""

from __future__ import annotations

import logging
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["InputDetails", "InputModality", "Instructions", "render_instructions"]

logger = logging.getLogger("agents_trio")

InputModality = Literal["text", "audio"]


@dataclass(frozen=True)
class InputDetails:
    """How the input a speech answers reached the agent (LiveKit's ``InputDetails``)."""

    modality: InputModality


class Instructions:
    """Instructions with optional additions per modality and a per-call ``dynamic`` part.

    Args:
        common: The text every modality gets.
        audio: Added after ``common`` when the turn was spoken.
        text: Added after ``common`` when the turn was typed.
        dynamic: Appended last, after one newline; changes from call to call.

    ``str()`` gives ``common``. Equal to a plain string when it has only ``common``.
    """

    __slots__ = ("audio", "common", "dynamic", "text")

    def __init__(self, common: str = "", *, audio: str | None = None, text: str | None = None,
                 dynamic: str | None = None) -> None:
        for name, value in (("common", common), ("audio", audio), ("text", text),
                            ("dynamic", dynamic)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"Instructions {name} must be a string, got "
                                f"{type(value).__name__}")
        self.common = common
        self.audio = audio
        self.text = text
        self.dynamic = dynamic

    def render_static(self, *, modality: InputModality | None = None) -> str:
        """``common`` and the addition for ``modality`` (none without one), without
        ``dynamic``; parts are separated by a blank line."""
        parts = [self.common]
        if modality is not None:
            parts.append((self.audio if modality == "audio" else self.text) or "")
        return "\n\n".join(p for p in parts if p)

    def render(self, *, modality: InputModality | None = None,
               data: Mapping[str, object] | None = None) -> str:
        """The whole text for ``modality``; ``data`` fills ``{name}`` placeholders (a missing
        one is logged and left empty)."""
        result = "\n".join(p for p in (self.render_static(modality=modality), self.dynamic or "")
                           if p)
        return _fill(result, data) if data else result

    @staticmethod
    def resolve_template(template: str, **kwargs: object) -> Instructions:
        """Fill ``template``; an ``Instructions`` value puts its audio part into the audio
        variant and its text part into the text one (``common`` where the part is ``None``).
        The result has no ``dynamic``."""
        if not any(isinstance(v, Instructions) for v in kwargs.values()):
            return Instructions(_fill(template, kwargs))

        def variant(modality: InputModality) -> str:
            values = {k: (_part(v, modality) if isinstance(v, Instructions) else v)
                      for k, v in kwargs.items()}
            return _fill(template, values)

        audio, text = variant("audio"), variant("text")
        if audio == text:
            return Instructions(audio)
        return Instructions("", audio=audio, text=text)

    def __str__(self) -> str:
        return self.common

    def __repr__(self) -> str:
        extra = "".join(f", {k}={getattr(self, k)!r}" for k in ("audio", "text", "dynamic")
                        if getattr(self, k) is not None)
        return f"Instructions({self.common!r}{extra})"

    def __hash__(self) -> int:
        return hash((self.common, self.audio, self.text, self.dynamic))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Instructions):
            return ((self.common, self.audio, self.text, self.dynamic)
                    == (other.common, other.audio, other.text, other.dynamic))
        if isinstance(other, str):
            return self.common == other and not (self.audio or self.text or self.dynamic)
        return NotImplemented


def render_instructions(instructions: str | Instructions,
                        modality: InputModality = "audio") -> str:
    """The text of ``instructions`` for a turn of ``modality`` (a string is itself)."""
    if isinstance(instructions, Instructions):
        return instructions.render(modality=modality)
    return instructions


def _part(value: Instructions, modality: InputModality) -> str:
    part = value.audio if modality == "audio" else value.text
    return str(value) if part is None else part


class _Missing(dict[str, object]):
    def __missing__(self, key: str) -> object:
        logger.warning("instructions: no value for the placeholder {%s}", key)
        return ""


def _fill(template: str, values: Mapping[str, object]) -> str:
    # only {name} placeholders are filled; anything format() would reject stays as written
    try:
        return string.Formatter().vformat(template, (), _Missing(values))
    except (ValueError, IndexError, KeyError):
        return template
