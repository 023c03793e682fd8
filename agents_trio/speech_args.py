"""Checks of what a speech is asked for with (``say``, ``generate_reply``, ``Agent``'s
instructions), made where it is asked: a wrong argument fails the call, before anything is
scheduled, instead of failing inside the speech later (or being read the wrong way: only
``False`` turns interruptions off, so ``allow_interruptions="no"`` left them on).

The same small checks serve the rest of the public API where a wrong argument would fail
later, away from the call: flags, names, callbacks (``session.on``'s too), chat contexts."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping

from .chat import ChatContext
from .instructions import Instructions

__all__ = ["check_callable", "check_chat_ctx", "check_event_callback", "check_flag",
           "check_instructions", "check_say_text", "check_str", "check_tool_choice"]

_TOOL_CHOICES = ("auto", "required", "none")


def check_say_text(text: object) -> None:
    """``say()``'s text: a string or an async iterable of strings (its items are checked
    as they come)."""
    if not isinstance(text, str) and not hasattr(text, "__aiter__"):
        raise TypeError("say() text must be a str or an async iterable of str, got "
                        f"{type(text).__name__}")


def check_flag(name: str, value: object, *, allow_none: bool = False) -> None:
    """A bool argument (``None`` too when it means "the default")."""
    if isinstance(value, bool) or (allow_none and value is None):
        return
    raise TypeError(f"{name} must be a bool{' or None' if allow_none else ''}, got "
                    f"{value!r}")


def check_tool_choice(choice: object) -> None:
    """LiveKit's ``ToolChoice``: ``"auto"``, ``"required"``, ``"none"`` or
    ``{"type": "function", "function": {"name": ...}}`` (``None``: the default)."""
    if choice is None:
        return
    if isinstance(choice, str):
        if choice not in _TOOL_CHOICES:
            raise ValueError(f"tool_choice must be one of {', '.join(map(repr, _TOOL_CHOICES))}"
                             f" or a named function, got {choice!r}")
        return
    if not isinstance(choice, Mapping):
        raise TypeError("tool_choice must be a str or a dict naming a function, got "
                        f"{type(choice).__name__}")
    function = choice.get("function")
    if (choice.get("type") != "function" or not isinstance(function, Mapping)
            or not isinstance(function.get("name"), str)):
        raise ValueError('a named tool_choice is {"type": "function", "function": {"name": '
                         f'...}}, got {choice!r}')


def check_chat_ctx(chat_ctx: object, *, allow_none: bool = True) -> None:
    """A ``ChatContext`` (``None``, when allowed: the agent's)."""
    if chat_ctx is None and allow_none:
        return
    if not isinstance(chat_ctx, ChatContext):
        raise TypeError(f"chat_ctx must be a ChatContext, got {type(chat_ctx).__name__}")


def check_str(name: str, value: object, *, allow_none: bool = False) -> None:
    """A str argument (``None`` too when it means "the default")."""
    if isinstance(value, str) or (allow_none and value is None):
        return
    raise TypeError(f"{name} must be a str{' or None' if allow_none else ''}, got "
                    f"{type(value).__name__}")


def check_callable(name: str, value: object, *, allow_none: bool = False) -> None:
    """A callback (``None`` too when it means "none")."""
    if callable(value) or (allow_none and value is None):
        return
    raise TypeError(f"{name} must be callable{' or None' if allow_none else ''}, got "
                    f"{value!r}")


def check_event_callback(callback: object) -> Callable[..., object]:
    """A callback for ``session.on``/``once``, as LiveKit's emitter calls it: a plain
    function, passed the event when it takes a positional argument and called without it
    otherwise. Returns what to register: the callback itself, or a wrapper calling it
    without the event. Refused at registration: a non-callable and a callback needing more
    than the event (``TypeError``), an async function (``ValueError``, as in LiveKit: its
    coroutine would never run)."""
    if not callable(callback):
        raise TypeError(f"an event callback must be callable, got {callback!r}")
    if inspect.iscoroutinefunction(callback):
        raise ValueError(f"cannot register an async callback ({callback!r}) for a session "
                         "event: register a plain function and start the work from it")
    try:
        params = list(inspect.signature(callback).parameters.values())
    except (TypeError, ValueError):  # no signature (some builtins): called with the event
        return callback
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    required_kw = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if len(required) > 1 or required_kw:
        raise TypeError(f"an event callback is called with the event alone; {callback!r} "
                        "needs more arguments")
    if positional or any(p.kind is p.VAR_POSITIONAL for p in params):
        return callback

    def without_event(event: object) -> object:
        return callback()
    return without_event


def check_instructions(instructions: object, *, allow_none: bool = False) -> None:
    """Instructions: a string or :class:`~agents_trio.llm.Instructions`."""
    if allow_none and instructions is None:
        return
    if not isinstance(instructions, (str, Instructions)):
        raise TypeError("instructions must be a string or agents_trio.llm.Instructions, got "
                        f"{type(instructions).__name__}")
