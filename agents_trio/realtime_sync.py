"""RealtimeSync: keeps one realtime session up to date with its agent.

What the agent changes (its instructions, tools or chat context) is marked *stale*; the sync
sends the stale parts, reading the agent's state when it sends one, so each change reaches the
session once and the latest value wins (a change made while its part is being sent marks it
stale again). A sync belongs to one connection: it is made with the connection, everything
stale, and runs in the connection's scope, so nothing it sends can reach a closed session; a
reconnect marks everything stale again. Changes made while no session is connected need no
record: the next connection starts from the agent's whole state.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Literal

import trio

from .nurseries import Wakeup
from .realtime import RealtimeError

logger = logging.getLogger("agents_trio")

Part = Literal["instructions", "tools", "chat_ctx"]
PARTS: tuple[Part, ...] = ("instructions", "tools", "chat_ctx")  # the order they are sent in


class RealtimeSync:
    """The agent's state still to send to one session (see the module docstring).

    Args:
        send: Sends one part of the agent's state, as it is now, to the session.
    """

    def __init__(self, send: Callable[[Part], Awaitable[None]]) -> None:
        self._send = send
        self._stale: set[Part] = set(PARTS)
        self._sending: Part | None = None
        self._changed = Wakeup()

    @property
    def synced(self) -> bool:
        """Nothing is stale and nothing is being sent."""
        return not self._stale and self._sending is None

    def mark_stale(self, *parts: Part) -> None:
        """``parts`` (all of them if none is named) changed: send them again."""
        self._stale.update(parts or PARTS)
        self._changed.notify()

    async def send_stale(self) -> None:
        """Send the stale parts until none is left.

        Raises:
            RealtimeError: the server refused a part (it is not stale any more).

        Cancellation: the part being sent stays stale.
        """
        while self._stale:
            part = next(p for p in PARTS if p in self._stale)
            self._stale.discard(part)
            self._sending = part
            try:
                await self._send(part)
            except trio.Cancelled:
                self._stale.add(part)
                raise
            finally:
                self._sending = None
                self._changed.notify()

    async def send_all(self) -> None:
        """Send the stale parts until none is left; a part the server refuses is logged and
        not sent again until it changes (as LiveKit's ``RealtimeSession._update_session``
        logs a refused update and goes on).

        Raises:
            Exception: sending failed otherwise (the connection failed).

        Cancellation: the part being sent stays stale.
        """
        while self._stale:
            try:
                await self.send_stale()
            except RealtimeError as e:
                logger.warning("the realtime model refused an update of the agent: %s", e)

    async def run(self) -> None:
        """Send each change as it comes, for the life of the connection (refusals are
        logged; any other error fails the connection).

        Cancellation: the connection ends; what is stale is left for the next one.
        """
        while True:
            await self.send_all()
            await self._changed.wait()

    async def wait_synced(self) -> None:
        """Wait until the session has every change made so far.

        Cancellation: a checkpoint; the sync goes on.
        """
        await trio.lowlevel.checkpoint()
        while not self.synced:
            await self._changed.wait()
