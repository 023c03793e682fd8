"""``tool_handling``: the prompts the runtime writes around background (``ctx.update()``) tools.

LiveKit's ``ToolHandlingOptions`` is a dict with one key, ``async_options``, an
:class:`AsyncToolOptions` of five templates (each a ``str.format`` string or a callable given
the arguments as a dict). Keys left out keep the defaults below. It is given to
``AgentSession``, ``Agent`` (or ``AgentTask``) and ``AsyncToolset``; the most specific one set
wins as a whole (an agent's options are completed with the defaults, not with the session's):

- ``update_template`` wraps the message of ``ctx.update("...")`` (``function_name``,
  ``call_id``, ``message``);
- ``duplicate_reject_template`` / ``duplicate_confirm_template`` answer a call refused by
  ``on_duplicate="reject"`` / ``"confirm"`` (``function_name``, ``fnc_calls_json``: the running
  calls as JSON, ``fnc_calls_text``: the same joined by newlines);
- ``reply_at_tail_template`` / ``reply_maybe_covered_template`` instruct the deferred reply to
  background results (``call_ids``), the first when those results are still the newest items of
  the conversation, the second when something was said after them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypedDict, Union

__all__ = ["AsyncToolOptions", "DuplicatePromptArgs", "ReplyPromptArgs", "ToolHandlingOptions",
           "UpdatePromptArgs", "DEFAULT_ASYNC_TOOL_OPTIONS", "DUPLICATE_CONFIRM",
           "DUPLICATE_REJECT", "REPLY_AT_TAIL", "REPLY_MAYBE_COVERED", "Template", "UPDATE_TEMPLATE",
           "check_tool_handling", "render_template", "resolve_async_tool_options"]


class UpdatePromptArgs(TypedDict):
    """What the update template is filled with."""

    function_name: str
    call_id: str
    message: str


class DuplicatePromptArgs(TypedDict):
    """What the duplicate templates are filled with."""

    function_name: str
    fnc_calls_json: list[str]
    fnc_calls_text: str


class ReplyPromptArgs(TypedDict):
    """What the deferred-reply templates are filled with."""

    call_ids: list[str]


Template = Union[str, Callable[[Any], str]]


class AsyncToolOptions(TypedDict, total=False):
    """The templates written around background tools (see the module docs)."""

    update_template: Template
    duplicate_reject_template: Template
    duplicate_confirm_template: Template
    reply_at_tail_template: Template
    reply_maybe_covered_template: Template


class ToolHandlingOptions(TypedDict, total=False):
    """``tool_handling=``: ``{"async_options": AsyncToolOptions}``."""

    async_options: AsyncToolOptions


#: how a progress message reaches the model
UPDATE_TEMPLATE = ("The tool `{function_name}` has updated, message: {message}\n"
                   "The task is still running, so DON'T make up or give information not "
                   "included in the message above.")
#: a call refused because the same tool is running (``on_duplicate="reject"``)
DUPLICATE_REJECT = ("Same tool `{function_name}` is already running:\n{fnc_calls_text}\n"
                    "If you want to cancel the existing one, call `lk_agents_cancel_task` with "
                    "call_id.\nOnly do this when user explicitly requests it.")
#: ... unless the model confirms it (``on_duplicate="confirm"``)
DUPLICATE_CONFIRM = ("Same tool `{function_name}` is already running:\n{fnc_calls_text}\n"
                     "Re-call with confirm duplicate True to run a duplicate if needed,\n"
                     "or if you want to cancel the existing one, call `lk_agents_cancel_task` "
                     "with call_id.\nOnly run duplicate or cancel the existing one when user "
                     "explicitly requests it.")
#: the deferred reply's instructions when the results are the newest items of the context
REPLY_AT_TAIL = ("New results arrived from background tool calls (call_ids: {call_ids}).\n"
                 "Summarize the results naturally. Do NOT repeat information you have "
                 "already told the user.")
#: ... and when something was said after them (the agent may have covered them already)
REPLY_MAYBE_COVERED = (
    "New results arrived from background tool calls (call_ids: {call_ids}).\n"
    "You may have already mentioned them in your most recent replies.\n"
    "If you already told the user everything in these results, reply with an empty response "
    "(no text at all).\nOtherwise, summarize only what you have not said yet, with a natural "
    "transition.\nNever repeat information you have already told the user.")

DEFAULT_ASYNC_TOOL_OPTIONS: AsyncToolOptions = {
    "update_template": UPDATE_TEMPLATE,
    "duplicate_reject_template": DUPLICATE_REJECT,
    "duplicate_confirm_template": DUPLICATE_CONFIRM,
    "reply_at_tail_template": REPLY_AT_TAIL,
    "reply_maybe_covered_template": REPLY_MAYBE_COVERED,
}


def render_template(template: Template, args: Mapping[str, Any]) -> str:
    """A ``str.format`` template filled with ``args``, or a callable's answer to them."""
    return template(dict(args)) if callable(template) else template.format(**args)


def resolve_async_tool_options(options: AsyncToolOptions | None) -> AsyncToolOptions:
    """``options`` with the defaults for the keys it leaves out."""
    return AsyncToolOptions(**{**DEFAULT_ASYNC_TOOL_OPTIONS, **(options or {})})


def check_tool_handling(owner: str, tool_handling: object) -> AsyncToolOptions | None:
    """The ``async_options`` of a ``tool_handling=`` value (None when it gives none).

    Raises:
        TypeError: not a dict, or a template that is neither a string nor a callable.
        ValueError: an unknown key.
    """
    if tool_handling is None:
        return None
    if not isinstance(tool_handling, Mapping):
        raise TypeError(f"{owner}(tool_handling=) takes a dict, got {tool_handling!r}")
    unknown = set(tool_handling) - set(ToolHandlingOptions.__annotations__)
    if unknown:
        raise ValueError(f"{owner}(tool_handling=): unknown key(s) {sorted(unknown)}; "
                         "the only key is 'async_options'")
    options = tool_handling.get("async_options")
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise TypeError(f"{owner}(tool_handling=): 'async_options' takes a dict, "
                        f"got {options!r}")
    unknown = set(options) - set(DEFAULT_ASYNC_TOOL_OPTIONS)
    if unknown:
        raise ValueError(f"{owner}(tool_handling=): unknown async_options key(s) "
                         f"{sorted(unknown)}; known: {sorted(DEFAULT_ASYNC_TOOL_OPTIONS)}")
    for key, value in options.items():
        if not (isinstance(value, str) or callable(value)):
            raise TypeError(f"{owner}(tool_handling=): async_options[{key!r}] must be a "
                            f"str.format template or a callable, got {value!r}")
    return AsyncToolOptions(**options)  # type: ignore[typeddict-item]
