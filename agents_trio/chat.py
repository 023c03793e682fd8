"""Chat items and the chat context, as msgspec Structs.

Items are ordered by ``created_at`` (Trio time): ``ChatContext.insert`` places an item after the
last item created at or before it, so a context reads chronologically even when items are
committed out of order (a tool output committed after a message spoken during the tool).
"""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import Iterable, Iterator
from typing import Any, Literal, NoReturn, Union

import msgspec

from ._ids import now

ChatRole = Literal["system", "developer", "user", "assistant"]


_ITEM_SEQ = itertools.count(1)
_SEQ_ID = re.compile(r"item_[0-9a-f]{8}_[0-9a-f]{4}\Z")


def new_item_id() -> str:
    # "item_" + an 8-hex-digit sequence + "_" + 4 random hex digits: ids made here sort by
    # creation, which breaks ties between items created at the same Trio time (see ``insert``).
    return f"item_{next(_ITEM_SEQ):08x}_{uuid.uuid4().hex[:4]}"


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
    content: list[str] = msgspec.field(default_factory=list)
    id: str = msgspec.field(default_factory=new_item_id)
    interrupted: bool = False
    transcript_confidence: float | None = None
    metrics: dict[str, float] = msgspec.field(default_factory=dict)
    created_at: float = msgspec.field(default_factory=now)
    type: Literal["message"] = "message"

    @property
    def text_content(self) -> str | None:
        """The text parts joined by newlines, or None when there are none."""
        parts = [c for c in self.content if isinstance(c, str)]
        return "\n".join(parts) if parts else None


class FunctionCall(msgspec.Struct, kw_only=True):
    """A tool call the LLM made; ``arguments`` is a JSON string."""

    call_id: str
    name: str
    arguments: str = "{}"
    id: str = msgspec.field(default_factory=new_item_id)
    created_at: float = msgspec.field(default_factory=now)
    type: Literal["function_call"] = "function_call"


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

    def copy(self, *, exclude_function_call: bool = False, exclude_instructions: bool = False,
             exclude_function_calls: bool = False) -> ChatContext:
        """A shallow copy: the list is new, the items are shared. ``exclude_function_call``
        is LiveKit's spelling, ``exclude_function_calls`` this runtime's first one."""
        items = self._items
        if exclude_function_call or exclude_function_calls:
            items = [i for i in items if i.type not in ("function_call", "function_call_output")]
        if exclude_instructions:
            items = [i for i in items if i.id != INSTRUCTIONS_ID]
        return ChatContext(items)

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

    def add_message(self, *, role: ChatRole, content: str | list[str],
                    interrupted: bool = False, created_at: float | None = None,
                    id: str | None = None) -> ChatMessage:
        """Build a message and insert it by creation time."""
        msg = ChatMessage(role=role, content=[content] if isinstance(content, str) else content,
                          interrupted=interrupted)
        if created_at is not None:
            msg.created_at = created_at
        if id is not None:
            msg.id = id
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

    def to_dict(self) -> dict[str, Any]:
        return {"items": [msgspec.to_builtins(i) for i in self._items]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


class ReadOnlyChatContext(ChatContext):
    """A view of an agent's chat context; mutating it raises RuntimeError."""

    def _refuse(self, *_: object, **__: object) -> NoReturn:
        raise RuntimeError("the agent's chat_ctx is read-only; use agent.update_chat_ctx()")

    insert = append = add_message = upsert = merge = _refuse
