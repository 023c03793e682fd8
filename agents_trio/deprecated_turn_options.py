"""The turn keywords ``AgentSession`` took before ``turn_handling=`` existed.

LiveKit Agents 1.8.9 still accepts them (deprecated, to be removed in 2.0), so code written
for LiveKit 1.x passes them: ``preemptive_generation=True``, ``turn_detection=...``,
``min_endpointing_delay=...``. :func:`turn_handling_from_deprecated` builds the
``turn_handling`` dict they stand for, one section key per keyword given and nothing for a
keyword left out, as LiveKit's migration does. Values are checked later, with the rest of
``turn_handling``.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["DEPRECATED_TURN_KEYWORDS", "turn_handling_from_deprecated"]

#: keyword -> (section of ``turn_handling``, key in it); None: the key is the section itself
_PLACES: dict[str, tuple[str, str | None]] = {
    "min_endpointing_delay": ("endpointing", "min_delay"),
    "max_endpointing_delay": ("endpointing", "max_delay"),
    "discard_audio_if_uninterruptible": ("interruption", "discard_audio_if_uninterruptible"),
    "min_interruption_duration": ("interruption", "min_duration"),
    "min_interruption_words": ("interruption", "min_words"),
    "false_interruption_timeout": ("interruption", "false_interruption_timeout"),
    "resume_false_interruption": ("interruption", "resume_false_interruption"),
    "turn_detection": ("turn_detection", None),
}

#: every deprecated keyword ``AgentSession`` accepts
DEPRECATED_TURN_KEYWORDS = frozenset(
    {*_PLACES, "allow_interruptions", "agent_false_interruption_timeout",
     "preemptive_generation"})


def turn_handling_from_deprecated(owner: str, given: Mapping[str, object]
                                  ) -> dict[str, Any]:
    """The ``turn_handling`` dict that the deprecated keywords in ``given`` stand for.

    ``agent_false_interruption_timeout`` (an older name) wins over
    ``false_interruption_timeout``; ``allow_interruptions=True`` is the default and adds
    nothing; ``preemptive_generation`` is a bool (``{"enabled": ...}``) or the options dict.

    Raises:
        TypeError: a keyword that is not one of :data:`DEPRECATED_TURN_KEYWORDS`, worded as
            Python words an unexpected keyword argument; ``allow_interruptions`` that is not
            a bool.

    Warns:
        DeprecationWarning: once per call that gives any, naming them.
    """
    unknown = sorted(set(given) - DEPRECATED_TURN_KEYWORDS)
    if unknown:
        raise TypeError(f"{owner}.__init__() got an unexpected keyword argument "
                        f"{unknown[0]!r}")
    if not given:
        return {}
    warnings.warn(f"{owner}: {', '.join(sorted(given))} are deprecated, use "
                  "turn_handling=TurnHandlingOptions(...) instead", DeprecationWarning,
                  stacklevel=3)
    values = dict(given)
    if "agent_false_interruption_timeout" in values:
        values["false_interruption_timeout"] = values.pop("agent_false_interruption_timeout")
    result: dict[str, Any] = {}
    allow_interruptions = values.pop("allow_interruptions", True)
    if not isinstance(allow_interruptions, bool):
        # only False turns them off: "no" or 0 would silently leave them on
        raise TypeError(f"{owner}: allow_interruptions must be a bool, got "
                        f"{allow_interruptions!r}")
    if not allow_interruptions:
        result["interruption"] = {"enabled": False}
    preemptive = values.pop("preemptive_generation", None)
    for name, value in values.items():
        section, key = _PLACES[name]
        if key is None:
            result[section] = value
        else:
            result.setdefault(section, {})[key] = value
    if isinstance(preemptive, Mapping):
        result["preemptive_generation"] = dict(preemptive)
    elif preemptive is not None:
        result["preemptive_generation"] = {"enabled": preemptive}
    return result
