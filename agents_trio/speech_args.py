"""Checks of what a speech is asked for with (``say``, ``generate_reply``, ``Agent``'s
instructions), made where it is asked: a wrong argument fails the call, before anything is
scheduled, instead of failing inside the speech later (or being read the wrong way: only
``False`` turns interruptions off, so ``allow_interruptions="no"`` left them on)."""

from __future__ import annotations

from collections.abc import Mapping

from .chat import ChatContext
from .instructions import Instructions

__all__ = ["check_chat_ctx", "check_flag", "check_instructions", "check_say_text",
           "check_tool_choice"]

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


def check_chat_ctx(chat_ctx: object) -> None:
    """A ``ChatContext`` (``None``: the agent's)."""
    if chat_ctx is not None and not isinstance(chat_ctx, ChatContext):
        raise TypeError(f"chat_ctx must be a ChatContext, got {type(chat_ctx).__name__}")


def check_instructions(instructions: object, *, allow_none: bool = False) -> None:
    """Instructions: a string or :class:`~agents_trio.llm.Instructions`."""
    if allow_none and instructions is None:
        return
    if not isinstance(instructions, (str, Instructions)):
        raise TypeError("instructions must be a string or agents_trio.llm.Instructions, got "
                        f"{type(instructions).__name__}")
