"""``Agent.on_user_turn_exceeded``: when recognition reports a user turn past
``user_turn_limit``, the agent's hook is called once the agent is idle (a reply already
under way that starts speaking makes it unnecessary), as LiveKit does.

A newer report replaces one still waiting; one arriving while the hook runs is dropped
(the hook is never cancelled by a report).
"""

from __future__ import annotations

import logging
from typing import Protocol

import trio

from .agent import Agent
from .conversation import Conversation
from .events import UserTurnExceededEvent
from .nurseries import LatestSlot

logger = logging.getLogger("agents_trio")


class TurnLimitHost(Protocol):
    """What the hook's caller needs from its activity."""

    @property
    def agent(self) -> Agent: ...

    @property
    def accepts_turns(self) -> bool: ...

    @property
    def settled(self) -> bool: ...


class TurnLimitHook:
    """Calls the agent's ``on_user_turn_exceeded`` for one activity."""

    def __init__(self, host: TurnLimitHost, conversation: Conversation) -> None:
        self._host = host
        self._conversation = conversation
        self._slot: LatestSlot | None = None
        self._in_hook = False

    def report(self, ev: UserTurnExceededEvent, nursery: trio.Nursery | None) -> None:
        """A turn went past the limit (called by recognition, via the activity)."""
        if not self._host.accepts_turns or nursery is None:
            logger.warning("user turn limit exceeded while the agent does not take turns: "
                           "%d words, %.1f s", ev.accumulated_word_count, ev.duration)
            return
        if self._in_hook:
            return
        if self._slot is None:
            self._slot = LatestSlot(nursery)
        self._slot.replace(self._when_idle, ev)

    def _speaking(self) -> bool:
        return self._conversation.agent_state == "speaking"

    async def _when_idle(self, ev: UserTurnExceededEvent) -> None:
        await self._conversation.wait_until(lambda: self._speaking() or self._host.settled)
        if self._speaking() or not self._host.accepts_turns:
            return  # the agent answers already, or no longer takes turns
        self._in_hook = True
        try:
            await self._host.agent.on_user_turn_exceeded(ev)
        except Exception:
            logger.exception("error in on_user_turn_exceeded")
        finally:
            self._in_hook = False
