"""Conversions between agents_trio's chat items and tools and LiveKit Agents' ones."""

from __future__ import annotations

import inspect
import logging
from typing import Any

from livekit.agents import llm as lk_llm

from ..chat import (
    AgentConfigUpdate,
    AgentHandoff,
    AudioContent,
    ChatContent,
    ChatContext,
    ChatItem,
    ChatMessage,
    FunctionCall,
    FunctionCallOutput,
    ImageContent,
)
from ..models import ChatChunk, ChoiceDelta, CompletionUsage, FunctionToolCall, ToolChoice
from ..tools import FunctionTool
from ..toolsets import ProviderTool

logger = logging.getLogger("agents_trio")


def to_lk_chat_ctx(chat_ctx: ChatContext) -> lk_llm.ChatContext:
    """The same items, in the same order, as a LiveKit ``llm.ChatContext``."""
    return lk_llm.ChatContext([_to_lk_item(item) for item in chat_ctx.items])


def to_lk_chat_message(message: ChatMessage) -> lk_llm.ChatMessage:
    """``message`` as LiveKit's ``ChatMessage``."""
    converted = _to_lk_item(message)
    assert isinstance(converted, lk_llm.ChatMessage)
    return converted


def _to_lk_content(content: ChatContent) -> lk_llm.ChatContent:
    if isinstance(content, ImageContent):
        return lk_llm.ImageContent(id=content.id, image=content.image,
                                   inference_width=content.inference_width,
                                   inference_height=content.inference_height,
                                   inference_detail=content.inference_detail,
                                   mime_type=content.mime_type)
    if isinstance(content, AudioContent):
        return lk_llm.AudioContent(frame=list(content.frame), transcript=content.transcript)
    return content


def _to_lk_item(item: ChatItem) -> lk_llm.ChatItem:
    if isinstance(item, ChatMessage):
        return lk_llm.ChatMessage(id=item.id, role=item.role,
                                  content=[_to_lk_content(c) for c in item.content],
                                  interrupted=item.interrupted, created_at=item.created_at,
                                  extra=dict(item.extra))
    if isinstance(item, FunctionCall):
        return lk_llm.FunctionCall(id=item.id, call_id=item.call_id, name=item.name,
                                   arguments=item.arguments, created_at=item.created_at,
                                   extra=dict(item.extra), group_id=item.group_id)
    if isinstance(item, FunctionCallOutput):
        return lk_llm.FunctionCallOutput(id=item.id, call_id=item.call_id, name=item.name,
                                         output=item.output, is_error=item.is_error,
                                         reply_required=item.reply_required,
                                         created_at=item.created_at)
    if isinstance(item, AgentHandoff):
        return lk_llm.AgentHandoff(id=item.id, old_agent_id=item.old_agent_id,
                                   new_agent_id=item.new_agent_id, created_at=item.created_at)
    if isinstance(item, AgentConfigUpdate):
        return lk_llm.AgentConfigUpdate(id=item.id, instructions=item.instructions,
                                        tools_added=item.tools_added,
                                        tools_removed=item.tools_removed,
                                        created_at=item.created_at)
    raise TypeError(f"cannot convert chat item {item!r} for a LiveKit plugin")


def from_lk_function_call(call: lk_llm.FunctionCall) -> FunctionCall:
    return FunctionCall(call_id=call.call_id, name=call.name, arguments=call.arguments or "{}")


async def _executed_by_agents_trio(raw_arguments: dict[str, Any]) -> None:
    raise RuntimeError("agents_trio executes tools itself; the plugin must not call them")


def _lk_function_tool(tool: FunctionTool) -> Any:  # noqa: ANN401 - LiveKit's tool types
    """A LiveKit tool with ``tool``'s name, description and parameters, never invoked.

    A signature tool becomes a LiveKit ``FunctionTool`` over a stand-in function with the
    LLM-visible parameters (the context ones left out, annotations resolved) and the original
    docstring, so that each provider format gets the schema LiveKit builds for it (strict or
    not). A raw-schema tool passes its schema (with the confirm flag already added) as is.
    """
    if tool.raw_schema is not None:
        return lk_llm.function_tool(_executed_by_agents_trio, raw_schema=tool.raw_schema)
    params = tool.signature_parameters

    async def stand_in(**kwargs: object) -> None:
        raise RuntimeError("agents_trio executes tools itself; the plugin must not call them")

    stand_in.__name__ = tool.fn.__name__
    stand_in.__qualname__ = tool.fn.__qualname__
    stand_in.__doc__ = tool.fn.__doc__
    stand_in.__signature__ = inspect.Signature(list(params))  # type: ignore[attr-defined]
    stand_in.__annotations__ = {p.name: p.annotation for p in params}
    return lk_llm.function_tool(stand_in, name=tool.name, description=tool.description or None)


def to_lk_tools(tools: list[Any] | None) -> list[Any]:
    """Schemas the plugin sends to the provider. The runtime executes the calls itself, so
    each tool becomes a LiveKit tool that is never invoked (see :func:`_lk_function_tool`).
    LiveKit tools (e.g. a provider's built-in tools) pass through."""
    out: list[Any] = []
    for tool in tools or []:
        if isinstance(tool, FunctionTool):
            out.append(_lk_function_tool(tool))
        elif isinstance(tool, lk_llm.Tool):
            out.append(tool)
        elif isinstance(tool, ProviderTool):  # one for a Trio-native LLM: not LiveKit's
            logger.warning("provider tool %r is not a LiveKit tool; the plugin does not get it",
                           tool.id)
        else:
            raise TypeError(f"cannot give tool {tool!r} to a LiveKit plugin")
    return out


def to_lk_tool_choice(tool_choice: ToolChoice) -> ToolChoice:
    """``"auto" | "required" | "none"`` pass through; a dict naming a function too."""
    return tool_choice


def from_lk_chunk(chunk: lk_llm.ChatChunk) -> ChatChunk:
    """LiveKit's chunk as the runtime's: the delta's text (an empty one as None), its tool
    calls (missing arguments as ``"{}"``; any other arguments as given, invalid JSON too: the
    tool runner reports those), the provider data of both (``extra``: e.g. Google's thought
    signatures, which the provider needs back with the call) and the usage."""
    delta = chunk.delta
    usage = chunk.usage
    return ChatChunk(
        id=chunk.id or "",
        delta=None if delta is None else _from_lk_delta(delta),
        usage=None if usage is None else CompletionUsage(
            completion_tokens=usage.completion_tokens, prompt_tokens=usage.prompt_tokens,
            total_tokens=usage.total_tokens, prompt_cached_tokens=usage.prompt_cached_tokens,
            cache_creation_tokens=usage.cache_creation_tokens,
            reasoning_tokens=usage.reasoning_tokens),
    )


def _from_lk_delta(delta: lk_llm.ChoiceDelta) -> ChoiceDelta | None:
    """None for a delta that carries nothing (as the runtime's chunks have no delta then)."""
    content = delta.content or None
    tool_calls = [FunctionToolCall(name=tc.name, arguments=tc.arguments or "{}",
                                   call_id=tc.call_id,
                                   extra=dict(tc.extra) if tc.extra else None)
                  for tc in delta.tool_calls]
    extra = dict(delta.extra) if delta.extra else None
    if content is None and not tool_calls and extra is None:
        return None
    return ChoiceDelta(role=delta.role, content=content, tool_calls=tool_calls, extra=extra)
