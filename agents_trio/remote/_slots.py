"""A host's connection slots and the waiting room in front of them.

At most ``capacity`` connections hold a slot. A newcomer that finds none free waits, in
arrival order, for up to ``wait_timeout`` seconds (at most ``capacity`` newcomers wait; more
are refused at once). While anyone waits, the connections that have gone longest without a
request are asked to give their slot up — one per waiting newcomer, each once it has been
quiet for ``idle_when_full`` seconds. A connection that is subscribed to events or has a
request in flight is never asked (its ``quiet_since`` is None).

This is what keeps slow-loris clients from locking a host: a client that holds a slot without
finishing a request is the first to make room, whatever its deadlines are.
"""

from __future__ import annotations

import collections
import math
from typing import Protocol

import trio


class SlotHolder(Protocol):
    """What the slots need of a connection."""

    @property
    def quiet_since(self) -> float | None:
        """Trio time of its last request or answer; None while it must not be asked."""

    def set_eviction_deadline(self, deadline: float) -> None:
        """Give the slot up (close) at ``deadline`` unless a request comes first; ``inf``:
        never."""


class _Ticket:
    """A newcomer's place in the waiting room."""

    __slots__ = ("decided", "granted")

    def __init__(self) -> None:
        self.decided = trio.Event()
        self.granted = False


class Slots:
    """See the module docstring."""

    def __init__(self, capacity: int, *, idle_when_full: float, wait_timeout: float) -> None:
        self._free = capacity
        self._capacity = capacity
        self._idle_when_full = idle_when_full
        self._wait_timeout = wait_timeout
        self._queue: collections.deque[_Ticket] = collections.deque()
        self._holders: dict[SlotHolder, None] = {}  # in the order they came (for ties)
        self._asked: set[SlotHolder] = set()
        self._closed = False

    @property
    def waiting(self) -> int:
        """Newcomers waiting for a slot."""
        return len(self._queue)

    async def acquire(self) -> bool:
        """Take a slot, waiting for one in arrival order; False when refused: the waiting room
        is full, the wait timed out, or :meth:`close` was called. A True return must be
        followed by :meth:`hold` or :meth:`give_back`.

        Cancellation: a cancelled wait leaves the waiting room (a slot handed over meanwhile
        goes to the next newcomer).
        """
        if self._closed:
            return False
        if self._free and not self._queue:
            self._free -= 1
            return True
        if len(self._queue) >= self._capacity:
            return False
        ticket = _Ticket()
        self._queue.append(ticket)
        self._rebalance()
        try:
            with trio.move_on_after(self._wait_timeout):
                await ticket.decided.wait()
        except BaseException:
            self._withdraw(ticket)
            raise
        if not ticket.decided.is_set():
            self._withdraw(ticket)
        return ticket.granted

    def hold(self, holder: SlotHolder) -> None:
        """``holder`` now holds the slot just acquired."""
        self._holders[holder] = None
        self._rebalance()

    def release(self, holder: SlotHolder) -> None:
        """``holder`` gives its slot back (no-op if it holds none)."""
        if holder in self._holders:
            del self._holders[holder]
            self._asked.discard(holder)
            self.give_back()

    def give_back(self) -> None:
        """Return a slot: to the first newcomer waiting, or to the free ones."""
        if self._queue:
            ticket = self._queue.popleft()
            ticket.granted = True
            ticket.decided.set()
        else:
            self._free += 1
        self._rebalance()

    def quiet_changed(self) -> None:
        """A holder's ``quiet_since`` changed: who is asked to make room may change too."""
        if self._queue or self._asked:
            self._rebalance()

    def close(self) -> None:
        """Refuse every newcomer from now on, those waiting included."""
        self._closed = True
        queue, self._queue = self._queue, collections.deque()
        for ticket in queue:
            ticket.decided.set()
        self._rebalance()

    def _withdraw(self, ticket: _Ticket) -> None:
        if not ticket.decided.is_set():
            self._queue.remove(ticket)
            self._rebalance()
        elif ticket.granted:  # handed a slot while leaving: pass it on
            ticket.granted = False
            self.give_back()

    def _rebalance(self) -> None:
        """Ask the longest-quiet holders, one per waiting newcomer, to make room."""
        wanted = len(self._queue)
        if not wanted and not self._asked:
            return
        quiet = [(since, h) for h in self._holders if (since := h.quiet_since) is not None]
        quiet.sort(key=lambda entry: entry[0])  # stable: the oldest holder first on ties
        asked = {holder for _, holder in quiet[:wanted]}
        for holder in self._asked - asked:
            holder.set_eviction_deadline(math.inf)
        for since, holder in quiet[:wanted]:
            holder.set_eviction_deadline(since + self._idle_when_full)
        self._asked = asked
