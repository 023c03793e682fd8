"""Folding a conversation into one summary message, as LiveKit Agents 1.8.9's TaskGroup does.

The model is sent two messages and no tools: a system prompt explaining the format, and a user
message holding the conversation as tagged text (``<user>``/``<assistant>`` for what was said,
``<function_call name=… call_id=…>`` and ``<function_call_output call_id=… name=…>`` for tool
calls, an ``<error>`` inside a failed output). Instructions, handoffs, config updates and
earlier summaries are not sent. In the result, the said messages and tool calls are replaced by
one assistant message ``<chat_history_summary>…</chat_history_summary>`` (``extra["is_summary"]``)
placed just after them; the structural items stay.
"""

from __future__ import annotations

from .chat import ChatContext, ChatItem, ChatMessage, FunctionCall, FunctionCallOutput
from .models import LLM

__all__ = ["SUMMARY_PROMPT", "summarize_chat_ctx", "summary_request", "tagged"]

#: the system prompt of the summary request
SUMMARY_PROMPT = """\
Write a short, faithful summary of the older part of a conversation.

The conversation is given as tagged text:
- <user>…</user> is what the user said.
- <assistant>…</assistant> is what the assistant said.
- <function_call name="…" call_id="…">…</function_call> is an action the assistant took.
- <function_call_output name="…" call_id="…">…</function_call_output> is that action's \
result; <error>…</error> inside it means the action failed.

Rules:
- Keep what the actions' results taught, without saying that a tool or function was used.
- Keep the user's goals, constraints, decisions, preferences, key facts and names, and \
anything still pending.
- Leave out greetings and small talk.
- Be brief."""


def tagged(tag: str, content: str | None = None, attrs: dict[str, str] | None = None) -> str:
    """``<tag attrs>`` + newline + content + newline + ``</tag>``; ``<tag attrs />`` if empty."""
    opening = " ".join([tag, *(f'{key}="{value}"' for key, value in (attrs or {}).items())])
    if not content:
        return f"<{opening} />"
    return f"<{opening}>\n{content}\n</{tag}>"


def _is_said(item: ChatItem) -> bool:
    """A user or assistant message that a summary replaces (not an earlier summary)."""
    return (isinstance(item, ChatMessage) and item.role in ("user", "assistant")
            and item.extra.get("is_summary") is not True)


def _as_text(item: ChatItem) -> str | None:
    if isinstance(item, FunctionCall):
        return tagged("function_call", item.arguments,
                      {"name": item.name, "call_id": item.call_id})
    if isinstance(item, FunctionCallOutput):
        output = tagged("error", item.output) if item.is_error else item.output
        return tagged("function_call_output", output,
                      {"call_id": item.call_id, "name": item.name})
    if _is_said(item):
        assert isinstance(item, ChatMessage)
        text = (item.text_content or "").strip()
        return tagged(item.role, text) if text else None
    return None


def summary_request(chat_ctx: ChatContext) -> ChatContext | None:
    """The chat sent to the model to summarize ``chat_ctx``; None when there is nothing to."""
    parts = [text for item in chat_ctx.items if (text := _as_text(item)) is not None]
    conversation = "\n".join(parts).strip()
    if not conversation:
        return None
    request = ChatContext()
    request.add_message(role="system", content=SUMMARY_PROMPT)
    request.add_message(role="user", content=f"Conversation to summarize:\n\n{conversation}")
    return request


async def summarize_chat_ctx(chat_ctx: ChatContext, llm: LLM) -> ChatContext:
    """``chat_ctx`` with its said messages and tool calls replaced by the model's summary.

    Returns a new context; ``chat_ctx`` itself when there is nothing to summarize or the
    model answers nothing.

    Raises:
        Exception: whatever the model's stream raises.

    Cancellation:
        Cancelling abandons the model's stream; ``chat_ctx`` is left as it was.
    """
    request = summary_request(chat_ctx)
    if request is None:
        return chat_ctx
    parts: list[str] = []
    async with llm.chat(chat_ctx=request) as stream:
        async for chunk in stream:
            if chunk.content:
                parts.append(chunk.content)
    summary = "".join(parts).strip()
    if not summary:
        return chat_ctx
    kept = [item for item in chat_ctx.items
            if not _is_said(item) and not isinstance(item, (FunctionCall, FunctionCallOutput))]
    result = ChatContext(kept)
    last = chat_ctx.items[-1]
    result.add_message(role="assistant", content=tagged("chat_history_summary", summary),
                       created_at=last.created_at + 1e-6, extra={"is_summary": True})
    return result
