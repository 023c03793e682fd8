"""A chat context in a provider's request format (``ChatContext.to_provider_format``).

Works on the items as ``ChatContext.to_dict`` writes them (LiveKit's dict form), so it needs
nothing of ``chat``. ``"openai"`` (Chat Completions messages) is written here; the other
formats LiveKit knows go through livekit-agents' own formatters, fed the same dicts.
"""

from __future__ import annotations

from typing import Any

#: the id LiveKit gives the per-call instructions message that follows the instructions
DYNAMIC_INSTRUCTIONS_ID = "lk.agent_task.instructions.dynamic"
#: ``extra`` keys the OpenAI format forwards as ``extra_content``
_FORWARDED_EXTRA = ("google", "livekit", "xai")
_LIVEKIT_FORMATS = ("openai.responses", "google", "aws", "anthropic", "mistralai")

Item = dict[str, Any]


def provider_format(items: list[Item], format: str, *, inject_dummy_user_message: bool = True,
                    **kwargs: object) -> tuple[list[dict[str, Any]], object]:
    """``items`` (LiveKit's item dicts, media objects kept) in ``format``."""
    if format == "openai" and not kwargs.get("prompt_cache_breakpoints") and not any(
            _has_frame(item) for item in items):
        return openai_messages(items), None
    if format == "openai" or format in _LIVEKIT_FORMATS:
        try:
            from livekit.agents import llm as lk_llm
        except ImportError as e:  # pragma: no cover - the extra is installed in CI
            raise ImportError(f"the {format!r} format uses livekit-agents' formatter: install "
                              "agents-trio[livekit-plugins]") from e
        lk_ctx = lk_llm.ChatContext.from_dict({"items": items})
        messages, extra = lk_ctx.to_provider_format(
            format, inject_dummy_user_message=inject_dummy_user_message, **kwargs)
        return list(messages), extra
    raise ValueError(f"unknown provider format {format!r}; known: 'openai', "
                     + ", ".join(repr(f) for f in _LIVEKIT_FORMATS))


def _has_frame(item: Item) -> bool:
    """Whether a message holds a video frame (encoding one is left to LiveKit's formatter)."""
    return any(isinstance(c, dict) and c.get("type") == "image_content"
               and not isinstance(c["image"], str) for c in item.get("content", ()))


def _is_instructions(item: Item) -> bool:
    return item["type"] == "message" and item["role"] in ("system", "developer")


def _merge_dynamic_instructions(items: list[Item]) -> list[Item]:
    """The per-call instructions message, right after the first instructions message,
    becomes part of it (one system prompt, as LiveKit sends without cache breakpoints)."""
    for i, item in enumerate(items):
        if _is_instructions(item):
            nxt = items[i + 1] if i + 1 < len(items) else None
            if nxt is None or nxt["type"] != "message" or nxt["id"] != DYNAMIC_INSTRUCTIONS_ID:
                return items
            merged = {**item, "content": [*item["content"], *nxt["content"]]}
            return [*items[:i], merged, *items[i + 2:]]
        if item["type"] in ("message", "function_call", "function_call_output"):
            return items
    return items


class _Turn:
    """An assistant message with the tool calls made with it and their outputs (or a
    single other message)."""

    def __init__(self) -> None:
        self.message: Item | None = None
        self.calls: list[Item] = []
        self.outputs: list[Item] = []

    def add(self, item: Item) -> None:
        if item["type"] == "message":
            self.message = item
        elif item["type"] == "function_call":
            self.calls.append(item)
        elif item["type"] == "function_call_output":
            self.outputs.append(item)

    def drop_unpaired(self) -> None:
        """A call without its output, or an output without its call, is not sent."""
        paired = ({c["call_id"] for c in self.calls} & {o["call_id"] for o in self.outputs})
        self.calls = [c for c in self.calls if c["call_id"] in paired]
        self.outputs = [o for o in self.outputs if o["call_id"] in paired]


def _turns(items: list[Item]) -> list[_Turn]:
    turns: dict[str, _Turn] = {}
    outputs = []
    for item in items:
        if item["type"] == "function_call" or (item["type"] == "message"
                                               and item["role"] == "assistant"):
            # calls share their reply's turn by group id, else by the id's prefix before "/"
            key = item.get("group_id") or item["id"].split("/")[0]
            turns.setdefault(key, _Turn()).add(item)
        elif item["type"] == "function_call_output":
            outputs.append(item)
        else:
            turns.setdefault(item["id"], _Turn()).add(item)
    by_call = {c["call_id"]: t for t in turns.values() for c in t.calls}
    for output in outputs:
        if output["call_id"] in by_call:
            by_call[output["call_id"]].add(output)
    for turn in turns.values():
        turn.drop_unpaired()
    return list(turns.values())


def _extra_content(extra: dict[str, Any] | None) -> dict[str, Any]:
    return {k: extra[k] for k in _FORWARDED_EXTRA if extra and extra.get(k)}


def _tool_call(call: Item) -> dict[str, Any]:
    out: dict[str, Any] = {"id": call["call_id"], "type": "function",
                           "function": {"name": call["name"], "arguments": call["arguments"]}}
    if extra := _extra_content(call.get("extra")):
        out["extra_content"] = extra
    return out


def _image_part(image: Item) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": image["image"],
                                               "detail": image.get("inference_detail", "auto")}}


def _message_content(content: list[Any]) -> str | list[dict[str, Any]]:
    """Text only: one string (texts joined by newlines). With images: the images, then
    the text as one part."""
    images = [_image_part(c) for c in content
              if isinstance(c, dict) and c.get("type") == "image_content"]
    text = ""
    seen_text = False
    for c in content:
        if isinstance(c, str):
            text += ("\n" if seen_text else "") + c
            seen_text = seen_text or bool(c)
    if not images:
        return text
    return [*images, {"type": "text", "text": text}] if text else images


def _message(item: Item) -> dict[str, Any]:
    out: dict[str, Any] = {"role": item["role"], "content": _message_content(item["content"])}
    if extra := _extra_content(item.get("extra")):
        out["extra_content"] = extra
    return out


def openai_messages(items: list[Item]) -> list[dict[str, Any]]:
    """Chat Completions messages: each assistant reply carries the tool calls made with it,
    followed by one ``tool`` message per output; handoffs and config updates are left out."""
    messages: list[dict[str, Any]] = []
    for turn in _turns(_merge_dynamic_instructions(items)):
        if turn.message is None and not turn.calls and not turn.outputs:
            continue
        msg: dict[str, Any] = (_message(turn.message) if turn.message is not None
                               else {"role": "assistant"})
        if turn.calls:
            msg["tool_calls"] = [_tool_call(c) for c in turn.calls]
        messages.append(msg)
        messages.extend({"role": "tool", "tool_call_id": o["call_id"], "content": o["output"]}
                        for o in turn.outputs)
    return messages
