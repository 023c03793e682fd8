"""Pages of a chat history that always fit one reply frame.

A page covers the history indices ``start`` to ``end`` (exclusive). It takes items in order
while they fit the frame limit; an item that does not fit ends the page (``more``), unless it
is the page's first, which is then sent with its longest texts shortened and listed in
``truncated`` — so every page covers at least one index, a walk over pages always ends, and no
history makes the request fail. Items without a wire form (or, with an absurdly small frame
limit, too large even when shortened) are left out but still counted in the index range.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import msgspec

from ..chat import ChatItem

from .wire import (AgentConfigUpdateItem, FunctionCallItem, FunctionCallOutputItem,
                   GetChatHistory, HistoryReply, MessageItem, WireItem, to_wire_item)

logger = logging.getLogger("agents_trio.remote")

_encoder = msgspec.msgpack.Encoder()

# the fields that carry an item's text, which a shortened item loses the end of
_TEXT_FIELDS: dict[type[Any], tuple[str, ...]] = {
    MessageItem: ("content",),
    FunctionCallItem: ("arguments",),
    FunctionCallOutputItem: ("output",),
    AgentConfigUpdateItem: ("instructions", "tools_added", "tools_removed"),
}
# a msgpack array header grows from 1 to at most 5 bytes with its length
_ARRAY_HEADER_GROWTH = 4


def history_page(items: Sequence[Any], request: GetChatHistory, max_frame_size: int
                 ) -> HistoryReply:
    """The reply to ``request`` over the chat items ``items``: at most ``request.limit``
    indices from ``request.start`` (None: the most recent items that fit), in one frame of at
    most ``max_frame_size`` bytes."""
    total = len(items)
    start = request.start
    limit = total if request.limit is None else request.limit
    widest = max(total, start or 0)
    budget = max_frame_size - _envelope_size(request.id, widest) - _ARRAY_HEADER_GROWTH
    if start is None:
        indices = range(total - 1, max(total - limit, 0) - 1, -1)
    else:
        indices = range(start, min(start + limit, total))
    page = _Page(budget)
    for index in indices:
        if not page.take(items[index]):
            break
    first = total - page.covered if start is None else start
    if start is None:
        page.wire_items.reverse()
    end = first + page.covered
    return HistoryReply(id=request.id, items=page.wire_items, start=first, end=end,
                        total=total, more=end < total, truncated=page.truncated)


class _Page:
    """The items of one page, within ``budget`` bytes."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.wire_items: list[WireItem] = []
        self.truncated: list[str] = []
        self.covered = 0

    def take(self, item: ChatItem) -> bool:
        """Add ``item`` (shortened if it is the first and does not fit); False when it does
        not fit and the page ends before it."""
        try:
            wired = to_wire_item(item)
        except (KeyError, AttributeError, TypeError):
            logger.debug("chat item %r has no wire form; left out", item)
            self.covered += 1
            return True
        size = len(_encoder.encode(wired))
        if size > self.budget:
            if self.covered:
                return False
            room = self.budget - len(_encoder.encode([wired.id])) - _ARRAY_HEADER_GROWTH
            shortened = _shorten(wired, room)
            if shortened is None:
                logger.warning("chat item %s does not fit a reply even shortened; left out",
                               wired.id)
            else:
                self.wire_items.append(shortened)
                self.truncated.append(wired.id)
            self.covered += 1
            self.budget = 0
            return True
        self.wire_items.append(wired)
        self.budget -= size
        self.covered += 1
        return True


def _envelope_size(request_id: int, widest: int) -> int:
    """The bytes of a reply without its items (the numbers at their largest)."""
    return len(_encoder.encode(HistoryReply(id=request_id, start=widest, end=widest,
                                            total=widest, more=True)))


def _shorten(item: WireItem, room: int) -> WireItem | None:
    """``item`` with its longest texts cut (each cut says how much was dropped) so that it
    encodes in at most ``room`` bytes; None when even its bare fields do not fit."""
    fields = _TEXT_FIELDS.get(type(item), ())
    for _ in range(64):  # each round cuts the longest text; a few rounds always suffice
        size = len(_encoder.encode(item))
        if size <= room:
            return item
        cut = _cut_longest(item, fields, size - room)
        if cut is None:
            break
        item = cut
    if isinstance(item, MessageItem) and item.metrics:
        item = msgspec.structs.replace(item, metrics={})
    return item if len(_encoder.encode(item)) <= room else None


def _cut_longest(item: WireItem, fields: tuple[str, ...], excess: int) -> WireItem | None:
    """``item`` with its longest text cut by about ``excess`` bytes; None when no text is left
    to cut."""
    best: tuple[int, str, int | None] | None = None  # (length, field, index in a list)
    for name in fields:
        value = getattr(item, name)
        if isinstance(value, str) and value and (best is None or len(value) > best[0]):
            best = (len(value), name, None)
        elif isinstance(value, list):
            for i, part in enumerate(value):
                if part and (best is None or len(part) > best[0]):
                    best = (len(part), name, i)
    if best is None:
        return None
    _, name, index = best
    value = getattr(item, name)
    text = value if index is None else value[index]
    short = _cut_text(text, excess)
    if index is None:
        return msgspec.structs.replace(item, **{name: short})
    return msgspec.structs.replace(item, **{name: [*value[:index], short, *value[index + 1:]]})


def _cut_text(text: str, excess: int) -> str:
    data = text.encode()
    note = f" [... truncated: {len(text)} characters in all]"
    keep = len(data) - excess - len(note.encode()) - 8
    if keep <= 0:
        return ""
    return data[:keep].decode(errors="ignore") + note
