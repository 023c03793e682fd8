"""LiveKit's STT context options (``AgentSession(stt_context_options=...)``) and the hooks a
speech-to-text model offers for them.

``STTContextOptions`` holds static ``keyterms`` (spellings the recognizer should favour),
``keyterm_detection`` (an LLM that finds more of them as the conversation goes, see
:mod:`agents_trio.keyterm_detection`) and ``forward_chat_context`` (conversation turns handed
to an STT that reads them itself). ``KeytermsOptions`` is LiveKit's deprecated older form.

An STT takes part through optional members, as LiveKit's STT base class has them:
``capabilities`` (an :class:`STTCapabilities` whose ``keyterms`` / ``chat_context`` say what
it accepts), ``update_session_keyterms(terms)`` (called with the whole effective list each
time it changes) and ``push_conversation_item(event)`` (each ``conversation_item_added``
event). An STT without them gets nothing. A LiveKit plugin STT gets LiveKit's own hooks
through its adapter (``agents_trio.plugins``).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, runtime_checkable

__all__ = ["KeytermDetectionOptions", "KeytermsOptions", "ResolvedKeytermDetection",
           "ResolvedSTTContext", "STTContextOptions", "resolve_stt_context"]


class KeytermDetectionOptions(TypedDict, total=False):
    """Background keyterm detection (the ``keyterm_detection`` key).

    Keys (all optional): ``enabled`` (default False), ``llm`` (the detection model: an LLM,
    a LiveKit plugin LLM or an inference model string; default: LiveKit's gateway model for
    it — the agent's own LLM is never used), ``turn_interval`` (a pass every N user turns,
    default 1), ``max_keyterms`` (cap on the detected terms applied, oldest dropped first;
    default None), ``instructions`` (replaces the built-in prompt), ``timeout`` (seconds one
    pass may take before it is dropped with no change; default 10).
    """

    enabled: bool
    llm: Any
    turn_interval: int
    max_keyterms: int | None
    instructions: str | None
    timeout: float


class STTContextOptions(TypedDict, total=False):
    """Conversation-aware context for the STT (``AgentSession(stt_context_options=...)``).

    Keys (all optional): ``keyterms`` (static terms, always applied where the STT accepts a
    term list; detection never removes them), ``keyterm_detection``
    (:class:`KeytermDetectionOptions`), ``forward_chat_context`` (default True: conversation
    turns go to an STT whose capabilities say ``chat_context``).
    """

    keyterms: list[str]
    keyterm_detection: KeytermDetectionOptions
    forward_chat_context: bool


class KeytermsOptions(TypedDict, total=False):
    """Deprecated (LiveKit's older ``keyterms_options=``): the ``keyterms`` and
    ``keyterm_detection`` keys of :class:`STTContextOptions`."""

    keyterms: list[str]
    keyterm_detection: KeytermDetectionOptions


@dataclass(frozen=True)
class ResolvedKeytermDetection:
    """:class:`KeytermDetectionOptions` with every default filled in and checked."""

    enabled: bool = False
    llm: Any = None
    turn_interval: int = 1
    max_keyterms: int | None = None
    instructions: str | None = None
    timeout: float = 10.0


@dataclass(frozen=True)
class ResolvedSTTContext:
    """:class:`STTContextOptions` with every default filled in and checked."""

    keyterms: tuple[str, ...] = ()
    detection: ResolvedKeytermDetection = field(default_factory=ResolvedKeytermDetection)
    forward_chat_context: bool = True


@runtime_checkable
class KeytermsHook(Protocol):
    """An STT that accepts the session's keyterms (see the module docstring)."""

    def update_session_keyterms(self, keyterms: list[str]) -> None: ...


@runtime_checkable
class ConversationHook(Protocol):
    """An STT that reads the conversation's turns (see the module docstring)."""

    def push_conversation_item(self, event: Any) -> None: ...  # noqa: ANN401 - the event


_CONTEXT_KEYS = frozenset(STTContextOptions.__annotations__)
_LEGACY_KEYS = frozenset(KeytermsOptions.__annotations__)
_DETECTION_KEYS = frozenset(KeytermDetectionOptions.__annotations__)


def resolve_stt_context(stt_context_options: Mapping[str, Any] | None = None,
                        keyterms_options: Mapping[str, Any] | None = None
                        ) -> ResolvedSTTContext:
    """The session's STT context: ``stt_context_options`` if given, else the deprecated
    ``keyterms_options`` (with a DeprecationWarning, as LiveKit warns), else the defaults.

    Raises:
        TypeError, ValueError: an unknown key, or a value of the wrong type or range.
    """
    if keyterms_options is not None:
        warnings.warn("AgentSession(keyterms_options=...) is deprecated: use "
                      "stt_context_options=STTContextOptions(...) instead", DeprecationWarning,
                      stacklevel=3)
    if stt_context_options is not None:
        return _resolve(stt_context_options, "stt_context_options", _CONTEXT_KEYS)
    if keyterms_options is not None:
        return _resolve(keyterms_options, "keyterms_options", _LEGACY_KEYS)
    return ResolvedSTTContext()


def _resolve(options: Mapping[str, Any], where: str, keys: frozenset[str]
             ) -> ResolvedSTTContext:
    if not isinstance(options, Mapping):
        raise TypeError(f"{where} must be a dict, got {options!r}")
    _check_keys(options, keys, where)
    keyterms = options.get("keyterms", [])
    if isinstance(keyterms, str) or not isinstance(keyterms, Sequence) or not all(
            isinstance(term, str) for term in keyterms):
        raise TypeError(f"{where}['keyterms'] must be a list of strings, got {keyterms!r}")
    forward = options.get("forward_chat_context", True)
    if not isinstance(forward, bool):
        raise TypeError(f"{where}['forward_chat_context'] must be a bool, got {forward!r}")
    return ResolvedSTTContext(
        keyterms=tuple(dict.fromkeys(term for term in keyterms if term)),
        detection=resolve_detection(options.get("keyterm_detection"),
                                    f"{where}['keyterm_detection']"),
        forward_chat_context=forward)


def resolve_detection(options: Mapping[str, Any] | None, where: str
                      ) -> ResolvedKeytermDetection:
    """``keyterm_detection`` checked, with LiveKit's defaults for what it leaves out.

    Raises:
        TypeError, ValueError: as :func:`resolve_stt_context`.
    """
    if options is None:
        return ResolvedKeytermDetection()
    if not isinstance(options, Mapping):
        raise TypeError(f"{where} must be a dict, got {options!r}")
    _check_keys(options, _DETECTION_KEYS, where)
    defaults = ResolvedKeytermDetection()
    enabled = options.get("enabled", defaults.enabled)
    interval = options.get("turn_interval", defaults.turn_interval)
    cap = options.get("max_keyterms", defaults.max_keyterms)
    instructions = options.get("instructions", defaults.instructions)
    timeout = options.get("timeout", defaults.timeout)
    if not isinstance(enabled, bool):
        raise TypeError(f"{where}['enabled'] must be a bool, got {enabled!r}")
    if isinstance(interval, bool) or not isinstance(interval, int):
        raise TypeError(f"{where}['turn_interval'] must be an int, got {interval!r}")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 0):
        raise ValueError(f"{where}['max_keyterms'] must be None or an int >= 0, got {cap!r}")
    if instructions is not None and not isinstance(instructions, str):
        raise TypeError(f"{where}['instructions'] must be a string, got {instructions!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError(f"{where}['timeout'] must be a number of seconds > 0, got "
                         f"{timeout!r}")
    return ResolvedKeytermDetection(
        enabled=enabled, llm=options.get("llm"), turn_interval=max(1, interval),
        max_keyterms=cap, instructions=instructions or None, timeout=float(timeout))


def _check_keys(options: Mapping[str, Any], keys: frozenset[str], where: str) -> None:
    unknown = sorted(set(options) - keys)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: {sorted(keys)}")


def accepts_keyterms(stt: object) -> bool:
    """Whether ``stt`` says it takes a keyterm list (``capabilities.keyterms``) and has the
    hook to receive it."""
    return bool(getattr(getattr(stt, "capabilities", None), "keyterms", False)) and \
        isinstance(stt, KeytermsHook)


def reads_conversation(stt: object) -> bool:
    """Whether ``stt`` says it reads conversation turns (``capabilities.chat_context``) and
    has the hook to receive them."""
    return bool(getattr(getattr(stt, "capabilities", None), "chat_context", False)) and \
        isinstance(stt, ConversationHook)
