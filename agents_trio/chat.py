"""Chat items and the chat context, as msgspec Structs.

Items are ordered by ``created_at`` (Trio time): ``ChatContext.insert`` places an item after the
last item created at or before it, so a context reads chronologically even when items are
committed out of order (a tool output committed after a message spoken during the tool).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal, NoReturn, Union

import msgspec
from livekit import rtc

from ._ids import now, random_hex
from .chat_format import provider_format

ChatRole = Literal["system", "developer", "user", "assistant"]


class ImageContent(msgspec.Struct, kw_only=True):
    """An image in a message: a URL (``https://…`` or a ``data:`` URL) or an
    ``rtc.VideoFrame``; the ``inference_*`` fields tell the LLM plugin how to size it."""

    image: str | rtc.VideoFrame
    id: str = msgspec.field(default_factory=lambda: f"img_{random_hex(12)}")
    inference_width: int | None = None
    inference_height: int | None = None
    inference_detail: Literal["auto", "high", "low"] = "auto"
    mime_type: str | None = None
    type: Literal["image_content"] = "image_content"


class AudioContent(msgspec.Struct, kw_only=True):
    """Audio in a message (``rtc.AudioFrame`` list), with its transcript when known."""

    frame: list[rtc.AudioFrame]
    transcript: str | None = None
    type: Literal["audio_content"] = "audio_content"


ChatContent = Union[ImageContent, AudioContent, str]

_ROLES = ("system", "developer", "user", "assistant")
_CONTENT_PART_TYPES = (str, ImageContent, AudioContent)


def _check_strings(what: str, **fields: object) -> None:
    for name, value in fields.items():
        if not isinstance(value, str):
            raise TypeError(f"a {what}'s {name} is a str, got {type(value).__name__}")


_ITEM_SEQ = itertools.count(1)
_SEQ_ID = re.compile(r"item_[0-9a-f]{8}_[0-9a-f]{4}\Z")


def new_item_id() -> str:
    # "item_" + an 8-hex-digit sequence + "_" + 4 random hex digits: ids made here sort by
    # creation, which breaks ties between items created at the same Trio time (see ``insert``).
    return f"item_{next(_ITEM_SEQ):08x}_{random_hex(4)}"


def sorts_before_or_with(a: ChatItem, b: ChatItem) -> bool:
    """Whether ``a`` sorts at or before ``b``: by time, then (for our ids) by creation order."""
    if a.created_at != b.created_at:
        return a.created_at < b.created_at
    if _SEQ_ID.match(a.id) and _SEQ_ID.match(b.id):
        return a.id <= b.id
    return True


class ChatMessage(msgspec.Struct, kw_only=True):
    """A message of the conversation."""

    role: ChatRole
    content: list[ChatContent] = msgspec.field(default_factory=list)
    id: str = msgspec.field(default_factory=new_item_id)
    interrupted: bool = False
    transcript_confidence: float | None = None
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    #: LiveKit's ``MetricsReport`` keys (``llm_node_ttft``, ``e2e_latency``, …)
    metrics: dict[str, Any] = msgspec.field(default_factory=dict)
    created_at: float = msgspec.field(default_factory=now)
    hash: bytes | None = None  # deprecated in LiveKit; kept for its dicts
    type: Literal["message"] = "message"

    def __post_init__(self) -> None:
        # as LiveKit's pydantic model: a bad message fails where it is made, not in every
        # later LLM request (a bare string would read back as one part per character)
        if self.role not in _ROLES:
            raise ValueError(f"a chat message's role is one of {', '.join(_ROLES)}, got "
                             f"{self.role!r}")
        content = self.content
        if not isinstance(content, list):
            raise TypeError("a chat message's content is a list of str, ImageContent or "
                            f"AudioContent, got {type(content).__name__}")
        for part in content:
            if not isinstance(part, _CONTENT_PART_TYPES):
                raise TypeError("a chat message's content parts are str, ImageContent or "
                                f"AudioContent, got {type(part).__name__}")

    @property
    def text_content(self) -> str | None:
        """The text parts joined by newlines, or None when there are none."""
        parts = [c for c in self.content if isinstance(c, str)]
        return "\n".join(parts) if parts else None

    @property
    def raw_text_content(self) -> str | None:
        """The text parts as generated (this runtime adds no markup, so ``text_content``)."""
        return self.text_content


class FunctionCall(msgspec.Struct, kw_only=True):
    """A tool call the LLM made; ``arguments`` is a JSON string."""

    call_id: str
    name: str
    arguments: str = "{}"
    id: str = msgspec.field(default_factory=new_item_id)
    created_at: float = msgspec.field(default_factory=now)
    #: provider data for this call (LiveKit keeps e.g. ``extra["google"]`` here)
    extra: dict[str, Any] = msgspec.field(default_factory=dict)
    #: calls made together (parallel calls of one response) share it; None: grouped by ``id``
    group_id: str | None = None
    type: Literal["function_call"] = "function_call"

    def __post_init__(self) -> None:
        _check_strings("function call", call_id=self.call_id, name=self.name,
                       arguments=self.arguments)


class FunctionCallOutput(msgspec.Struct, kw_only=True):
    """The result of a tool call, shown to the LLM."""

    call_id: str
    name: str
    output: str
    is_error: bool = False
    #: whether the LLM should answer this output (False: recorded without asking for a reply)
    reply_required: bool = True
    id: str = msgspec.field(default_factory=new_item_id)
    created_at: float = msgspec.field(default_factory=now)
    type: Literal["function_call_output"] = "function_call_output"

    def __post_init__(self) -> None:
        _check_strings("function call output", call_id=self.call_id, name=self.name,
                       output=self.output)
        if not isinstance(self.is_error, bool):
            raise TypeError(f"a function call output's is_error is a bool, got "
                            f"{self.is_error!r}")


class AgentHandoff(msgspec.Struct, kw_only=True):
    """The session switched from one agent to another (``old_agent_id`` is None at start)."""

    new_agent_id: str
    old_agent_id: str | None = None
    id: str = msgspec.field(default_factory=new_item_id)
    created_at: float = msgspec.field(default_factory=now)
    type: Literal["agent_handoff"] = "agent_handoff"


class AgentConfigUpdate(msgspec.Struct, kw_only=True):
    """The agent's instructions or tools changed (recorded at activity start and on updates)."""

    instructions: str | None = None
    tools_added: list[str] | None = None
    tools_removed: list[str] | None = None
    id: str = msgspec.field(default_factory=new_item_id)
    created_at: float = msgspec.field(default_factory=now)
    type: Literal["agent_config_update"] = "agent_config_update"


ChatItem = Union[ChatMessage, FunctionCall, FunctionCallOutput, AgentHandoff, AgentConfigUpdate]

INSTRUCTIONS_ID = "lk.agent_task.instructions"


class ChatContext:
    """An ordered list of chat items.

    Args:
        items: Initial items, kept in the given order.
    """

    def __init__(self, items: Iterable[ChatItem] | None = None) -> None:
        self._items: list[ChatItem] = list(items or [])

    @classmethod
    def empty(cls) -> ChatContext:
        return cls()

    @property
    def items(self) -> list[ChatItem]:
        return self._items

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[ChatItem]:
        return iter(self._items)

    def __repr__(self) -> str:
        return f"ChatContext({self._items!r})"

    @property
    def readonly(self) -> bool:
        return False

    def copy(self, *, exclude_function_call: bool = False, exclude_instructions: bool = False,
             exclude_empty_message: bool = False, exclude_handoff: bool = False,
             exclude_config_update: bool = False, tools: Sequence[object] | None = None,
             exclude_function_calls: bool = False) -> ChatContext:
        """A shallow copy (the list is new, the items are shared), leaving out: function
        calls and their outputs, every system/developer message (``exclude_instructions``),
        messages without content, handoffs, config updates; with ``tools`` (tools, toolsets
        or names), the calls of tools not among them and their outputs.
        ``exclude_function_calls`` is this runtime's first spelling of ``exclude_function_call``.
        """
        exclude_function_call = exclude_function_call or exclude_function_calls
        if not (exclude_function_call or exclude_instructions or exclude_empty_message
                or exclude_handoff or exclude_config_update or tools is not None):
            # every turn copies the agent's context: a plain copy stays one C-level list copy
            # (per-turn CPU flat as the history grows; bench.turn_cost)
            return ChatContext(self._items)
        kept_names = set(tool_names(tools)) if tools is not None else set()
        kept_calls = ({i.call_id for i in self._items
                       if isinstance(i, FunctionCall) and i.name in kept_names}
                      if tools is not None else set())
        items: list[ChatItem] = []
        for item in self._items:
            if exclude_function_call and isinstance(item, (FunctionCall, FunctionCallOutput)):
                continue
            if isinstance(item, ChatMessage):
                if exclude_instructions and item.role in ("system", "developer"):
                    continue
                if exclude_empty_message and not item.content:
                    continue
            if exclude_handoff and isinstance(item, AgentHandoff):
                continue
            if exclude_config_update and isinstance(item, AgentConfigUpdate):
                continue
            if tools is not None:
                if isinstance(item, FunctionCall) and item.name not in kept_names:
                    continue
                # an output without a name goes with its call
                if isinstance(item, FunctionCallOutput) and (
                        item.name not in kept_names if item.name
                        else item.call_id not in kept_calls):
                    continue
            items.append(item)
        return ChatContext(items)

    def truncate(self, *, max_items: int) -> ChatContext:
        """Keep the last ``max_items`` items, in place, and return this context.

        The kept part never starts with a function call or output (their pair would be
        cut), and the first system/developer message is put back in front when it was cut.
        ``max_items=0`` leaves only that message; a negative value raises ValueError.
        """
        if max_items < 0:
            raise ValueError(f"max_items must be >= 0, got {max_items}")
        if len(self._items) <= max_items:
            return self
        first_instructions = next(
            (i for i in self._items
             if isinstance(i, ChatMessage) and i.role in ("system", "developer")), None)
        kept = self._items[len(self._items) - max_items:]
        while kept and isinstance(kept[0], (FunctionCall, FunctionCallOutput)):
            kept.pop(0)
        if first_instructions is not None and all(i.id != first_instructions.id for i in kept):
            kept.insert(0, first_instructions)
        self._items[:] = kept
        return self

    def remove(self, item: ChatItem | str) -> None:
        """Remove the item (or the item with this id); ValueError when it is not there."""
        idx = self.index_by_id(item if isinstance(item, str) else item.id)
        if idx is None:
            raise ValueError(f"item not in the chat context: {item!r}")
        del self._items[idx]

    def get_by_id(self, item_id: str) -> ChatItem | None:
        for item in self._items:
            if item.id == item_id:
                return item
        return None

    def index_by_id(self, item_id: str) -> int | None:
        for i, item in enumerate(self._items):
            if item.id == item_id:
                return i
        return None

    def insert(self, item: ChatItem | Iterable[ChatItem]) -> None:
        """Insert items in ``created_at`` order (after the last item created at or before).

        Items created at the same Trio time keep the order in which they were made, so a
        function call made before a reply spoken during the tool sorts before that reply.
        """
        items = [item] if isinstance(item, msgspec.Struct) else list(item)
        for it in items:
            idx = len(self._items)
            while idx > 0 and not sorts_before_or_with(self._items[idx - 1], it):
                idx -= 1
            self._items.insert(idx, it)

    def append(self, item: ChatItem) -> None:
        self._items.append(item)

    def add_message(self, *, role: ChatRole, content: str | list[ChatContent],
                    interrupted: bool = False, created_at: float | None = None,
                    id: str | None = None, metrics: dict[str, Any] | None = None,
                    extra: dict[str, Any] | None = None) -> ChatMessage:
        """Build a message and insert it by creation time."""
        msg = ChatMessage(role=role, content=[content] if isinstance(content, str) else content,
                          interrupted=interrupted)
        if created_at is not None:
            msg.created_at = created_at
        if id is not None:
            msg.id = id
        if metrics is not None:
            msg.metrics = dict(metrics)
        if extra is not None:
            msg.extra = dict(extra)
        self.insert(msg)
        return msg

    def upsert(self, item: ChatItem) -> None:
        """Replace the item with the same id, or insert it."""
        idx = self.index_by_id(item.id)
        if idx is None:
            self.insert(item)
        else:
            self._items[idx] = item

    def messages(self) -> list[ChatMessage]:
        return [i for i in self._items if isinstance(i, ChatMessage)]

    def merge(self, other: ChatContext, *, exclude_function_calls: bool = True,
              exclude_instructions: bool = True, exclude_config_update: bool = False,
              exclude_function_call: bool | None = None) -> ChatContext:
        """Add the items of ``other`` that this context lacks (by id), in creation-time order.

        ``exclude_function_call`` is LiveKit's spelling of ``exclude_function_calls`` (given,
        it wins). The defaults differ from LiveKit's (which excludes nothing by default).
        """
        if exclude_function_call is not None:
            exclude_function_calls = exclude_function_call
        known = {i.id for i in self._items}
        for item in other.items:
            if item.id in known:
                continue
            if exclude_instructions and item.id == INSTRUCTIONS_ID:
                continue
            if exclude_function_calls and item.type in ("function_call", "function_call_output"):
                continue
            if exclude_config_update and item.type == "agent_config_update":
                continue
            self.insert(item)
        return self

    def is_equivalent(self, other: ChatContext) -> bool:
        """Same items by id, type and content (ignores creation times and metrics)."""
        if len(self._items) != len(other._items):
            return False
        for a, b in zip(self._items, other._items):
            if a.id != b.id or a.type != b.type:
                return False
            if isinstance(a, ChatMessage) and isinstance(b, ChatMessage):
                if (a.role, a.content, a.interrupted) != (b.role, b.content, b.interrupted):
                    return False
            elif isinstance(a, FunctionCall) and isinstance(b, FunctionCall):
                if (a.call_id, a.name, a.arguments) != (b.call_id, b.name, b.arguments):
                    return False
            elif isinstance(a, FunctionCallOutput) and isinstance(b, FunctionCallOutput):
                if (a.call_id, a.output, a.is_error) != (b.call_id, b.output, b.is_error):
                    return False
        return True

    def to_dict(self, *, exclude_image: bool = True, exclude_audio: bool = True,
                exclude_timestamp: bool = True, exclude_function_call: bool = False,
                exclude_metrics: bool = False, exclude_config_update: bool = False,
                strip_markup: bool = False) -> dict[str, Any]:
        """The context as LiveKit's ``ChatContext.to_dict`` writes it: ``{"items": [...]}``,
        each item a JSON-ready dict without its None fields (``from_dict`` reads it back,
        and so does LiveKit's). ``created_at`` is this runtime's Trio time when included.
        ``strip_markup`` changes nothing here: this runtime writes no expressive markup.
        """
        items = []
        for item in self._items:
            if exclude_function_call and isinstance(item, (FunctionCall, FunctionCallOutput)):
                continue
            if exclude_config_update and isinstance(item, AgentConfigUpdate):
                continue
            items.append(item_to_dict(item, exclude_image=exclude_image,
                                      exclude_audio=exclude_audio,
                                      exclude_timestamp=exclude_timestamp,
                                      exclude_metrics=exclude_metrics))
        return {"items": items}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChatContext:
        """A context from ``to_dict``'s (or LiveKit's) dict; ValueError on a malformed item."""
        return cls([item_from_dict(raw) for raw in data["items"]])

    def to_provider_format(self, format: str, *, inject_dummy_user_message: bool = True,
                           **kwargs: object) -> tuple[list[dict[str, Any]], object]:
        """The messages in a provider's request format and that format's extra data, as
        LiveKit's formatter of that name (``"openai"``, ``"openai.responses"``,
        ``"google"``, ``"aws"``, ``"anthropic"``, ``"mistralai"``) writes them.

        Formats other than ``"openai"`` use livekit-agents' formatters (the
        ``livekit-plugins`` extra); an unknown format raises ValueError.
        """
        items = [item_to_dict(i, exclude_image=False, exclude_audio=False,
                              exclude_timestamp=False, exclude_metrics=True, keep_frames=True)
                 for i in self._items]
        return provider_format(items, format, inject_dummy_user_message=inject_dummy_user_message,
                               **kwargs)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def tool_names(tools: Iterable[object]) -> Iterator[str]:
    """The names of tools given as names, tools (``.name`` or ``.info.name``) or toolsets
    (``.tools``)."""
    for tool in tools:
        if isinstance(tool, str):
            yield tool
        elif isinstance(getattr(tool, "name", None), str):
            yield getattr(tool, "name")
        elif isinstance(getattr(getattr(tool, "info", None), "name", None), str):
            yield getattr(getattr(tool, "info"), "name")
        elif isinstance(getattr(tool, "tools", None), (list, tuple)):
            yield from tool_names(getattr(tool, "tools"))


class ReadOnlyChatContext(ChatContext):
    """A view of an agent's chat context; mutating it raises RuntimeError."""

    def _refuse(self, *_: object, **__: object) -> NoReturn:
        raise RuntimeError("the agent's chat_ctx is read-only; use agent.update_chat_ctx()")

    @property
    def readonly(self) -> bool:
        return True

    insert = append = add_message = upsert = merge = remove = truncate = _refuse


# LiveKit's dict of each item, as pydantic's ``model_dump(mode="json", exclude_none=True)``
# writes it: the fields in LiveKit's order, None fields left out.
def _without_none(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def _content_to_dict(content: ChatContent, *, keep_frames: bool) -> str | dict[str, Any]:
    if isinstance(content, str):
        return content
    if isinstance(content, ImageContent):
        image = content.image
        if not isinstance(image, str) and not keep_frames:
            raise ValueError("an ImageContent holding a video frame has no JSON form; "
                             "pass exclude_image=True or give the image as a data URL")
        return _without_none({
            "id": content.id, "type": content.type, "image": image,
            "inference_width": content.inference_width,
            "inference_height": content.inference_height,
            "inference_detail": content.inference_detail, "mime_type": content.mime_type})
    if not keep_frames:
        raise ValueError("an AudioContent's frames have no JSON form; pass exclude_audio=True")
    return _without_none({"type": content.type, "frame": list(content.frame),
                          "transcript": content.transcript})


def item_to_dict(item: ChatItem, *, exclude_image: bool, exclude_audio: bool,
                 exclude_timestamp: bool, exclude_metrics: bool,
                 keep_frames: bool = False) -> dict[str, Any]:
    """One item as LiveKit's ``to_dict`` writes it (``keep_frames``: media objects kept as
    they are, for the provider formatters, instead of refused)."""
    out: dict[str, Any]
    if isinstance(item, ChatMessage):
        content = [c for c in item.content
                   if not (exclude_image and isinstance(c, ImageContent))
                   and not (exclude_audio and isinstance(c, AudioContent))]
        out = _without_none({
            "id": item.id, "type": item.type, "role": item.role,
            "content": [_content_to_dict(c, keep_frames=keep_frames) for c in content],
            "interrupted": item.interrupted,
            "transcript_confidence": item.transcript_confidence, "extra": dict(item.extra),
            "metrics": None if exclude_metrics else dict(item.metrics),
            "created_at": item.created_at,
            "hash": None if item.hash is None else item.hash.decode("utf-8", "replace")})
    elif isinstance(item, FunctionCall):
        out = _without_none({
            "id": item.id, "type": item.type, "call_id": item.call_id,
            "arguments": item.arguments, "name": item.name, "created_at": item.created_at,
            "extra": dict(item.extra), "group_id": item.group_id})
    elif isinstance(item, FunctionCallOutput):
        out = {"id": item.id, "type": item.type, "name": item.name, "call_id": item.call_id,
               "output": item.output, "is_error": item.is_error, "created_at": item.created_at}
    elif isinstance(item, AgentHandoff):
        out = _without_none({
            "id": item.id, "type": item.type, "old_agent_id": item.old_agent_id,
            "new_agent_id": item.new_agent_id, "created_at": item.created_at})
    else:
        out = _without_none({
            "id": item.id, "type": item.type, "instructions": item.instructions,
            "tools_added": item.tools_added, "tools_removed": item.tools_removed,
            "created_at": item.created_at})
    if exclude_timestamp:
        out.pop("created_at", None)
    return out


_ITEM_TYPES: dict[str, type[ChatItem]] = {
    "message": ChatMessage, "function_call": FunctionCall,
    "function_call_output": FunctionCallOutput, "agent_handoff": AgentHandoff,
    "agent_config_update": AgentConfigUpdate,
}
_CONTENT_TYPES: dict[str, type[ImageContent] | type[AudioContent]] = {
    "image_content": ImageContent, "audio_content": AudioContent}


def _from_fields(cls: type[Any], raw: dict[str, Any], what: str) -> object:
    # unknown keys are ignored (LiveKit's models ignore them too: ``reply_required``, …)
    fields = {k: v for k, v in raw.items() if k in cls.__struct_fields__ and k != "type"}
    try:
        return cls(**fields)
    except TypeError as e:
        raise ValueError(f"malformed {what} {raw!r}: {e}") from None


def _content_from_dict(raw: object) -> ChatContent:
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, dict) or raw.get("type") not in _CONTENT_TYPES:
        raise ValueError(f"unknown chat content {raw!r}")
    content = _from_fields(_CONTENT_TYPES[raw["type"]], raw, "chat content")
    assert isinstance(content, (ImageContent, AudioContent))
    return content


def item_from_dict(raw: object) -> ChatItem:
    """An item from its dict (``item_to_dict``'s or LiveKit's)."""
    if not isinstance(raw, dict) or raw.get("type") not in _ITEM_TYPES:
        raise ValueError(f"not a chat item: {raw!r}")
    fields = dict(raw)
    if isinstance(fields.get("content"), list):
        fields["content"] = [_content_from_dict(c) for c in fields["content"]]
    if isinstance(fields.get("hash"), str):
        fields["hash"] = fields["hash"].encode()
    item = _from_fields(_ITEM_TYPES[raw["type"]], fields, "chat item")
    assert isinstance(item, tuple(_ITEM_TYPES.values()))
    return item  # type: ignore[return-value]
