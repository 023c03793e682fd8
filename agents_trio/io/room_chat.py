"""Chat input of a room (``lk.chat``): what the user types becomes the session's text input.

The rule, for :class:`~agents_trio.io.room.RoomIO`:

- **One speaker.** Only the linked participant (or the identity ``RoomOptions`` names) speaks
  for the user; chat from anyone else is ignored (see ``RoomIO``).
- **One reader, in order.** Messages are read one after another, in the order they arrived,
  and wait in one :class:`ChatInbox`.
- **A burst is one input.** One deliverer hands the inbox to ``text_input_cb`` and awaits it.
  Messages that arrive meanwhile (while the agent is busy with the previous input) wait, and
  are delivered together, joined with newlines, when the callback returned. The default
  callback returns once its reply has been taken (the agent speaks it, or it ended), so a
  flood of messages costs a few model requests, not one per message.
- **Bounded.** The inbox holds at most ``max_messages`` messages and ``max_chars``
  characters (messages still being read count too); a message that does not fit is refused,
  whole, and the refusal is logged (the first of a burst with its reason, the rest counted
  when the burst is delivered). Empty and blank messages are ignored.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ..events import AgentStateChangedEvent
from .session_port import ReplyHandle, RoomSession

__all__ = ["TextInputCallback", "TextInputEvent", "TextInputStatistics", "default_text_input"]

logger = logging.getLogger("agents_trio.room")


@dataclasses.dataclass(frozen=True)
class TextInputEvent:
    """Text the linked participant sent on ``lk.chat`` (several messages sent while the agent
    was busy arrive as one event, joined with newlines)."""

    text: str
    participant_identity: str = ""
    info: Any = None  # LiveKit's ``rtc.TextStreamInfo`` of the (last) message, when known
    participant: Any = None  # the sending ``rtc.RemoteParticipant``, when known


# The session parameter is ``Any`` so that a callback annotated with ``AgentSession`` fits;
# RoomIO passes its session (a RoomSession).
TextInputCallback = Callable[[Any, TextInputEvent], Awaitable[None]]


async def default_text_input(session: RoomSession, ev: TextInputEvent) -> None:
    """Interrupt the agent and reply to the text (LiveKit's default); returns once the reply
    was taken: the agent started speaking, or the reply ended (done, interrupted, failed).

    Cancellation:
        Cancelling the wait leaves the reply running.
    """
    try:
        await session.interrupt()
    except RuntimeError:
        pass  # nothing interruptible is playing
    handle = session.generate_reply(user_input=ev.text)
    await _reply_taken(session, handle)


async def _reply_taken(session: RoomSession, handle: ReplyHandle) -> None:
    taken = trio.Event()

    def on_state(state_ev: AgentStateChangedEvent) -> None:
        if state_ev.new_state == "speaking":
            taken.set()

    def on_done(_: object) -> None:
        taken.set()

    session.on("agent_state_changed", on_state)
    handle.add_done_callback(on_done)
    try:
        await taken.wait()
    finally:
        session.off("agent_state_changed", on_state)
        handle.remove_done_callback(on_done)


@dataclasses.dataclass(frozen=True)
class TextInputStatistics:
    """Counters of a room's chat input (see :meth:`RoomIO.text_input_statistics`).

    Attributes:
        received: Non-empty messages from the participant who speaks for the user.
        refused: Of those, refused because the inbox was full.
        delivered_messages: Of those, handed to ``text_input_cb``.
        delivered_inputs: Calls of ``text_input_cb`` (a burst is one call).
        ignored: Messages from anyone else, and empty or blank ones.
    """

    received: int
    refused: int
    delivered_messages: int
    delivered_inputs: int
    ignored: int


class ChatInbox:
    """The chat messages waiting for the agent (see the module docstring).

    A message is *reserved* when it arrives (before its text is read, so unread messages
    count against ``max_messages``) and *filled* or *dropped* once read, in arrival order.

    Args:
        max_messages: Messages that may wait at once.
        max_chars: Characters that may wait at once; a longer message is always refused.
    """

    def __init__(self, *, max_messages: int, max_chars: int) -> None:
        if max_messages < 1 or max_chars < 1:
            raise ValueError("the chat inbox needs room for at least one message and character")
        self.max_messages = max_messages
        self.max_chars = max_chars
        self._texts: list[str] = []
        self._chars = 0
        self._reserved = 0
        self._identity = ""
        self._info: object = None
        self._participant: object = None
        self._filled = trio.Event()
        self._refused_in_burst = 0
        self._received = 0
        self._refused = 0
        self._delivered_messages = 0
        self._delivered_inputs = 0
        self._ignored = 0

    def statistics(self) -> TextInputStatistics:
        return TextInputStatistics(received=self._received, refused=self._refused,
                                   delivered_messages=self._delivered_messages,
                                   delivered_inputs=self._delivered_inputs,
                                   ignored=self._ignored)

    def ignore(self, identity: str, why: str) -> None:
        """Count a message that is not the user's input."""
        self._ignored += 1
        logger.debug("chat from %s ignored: %s", identity, why)

    def reserve(self, identity: str) -> bool:
        """Make room for a message not read yet; False (logged) when the inbox is full."""
        if len(self._texts) + self._reserved >= self.max_messages:
            self._received += 1
            self._refuse(identity, f"{self.max_messages} messages already wait for the agent")
            return False
        self._reserved += 1
        return True

    def fill(self, identity: str, text: str | None, *, info: object = None,
             participant: object = None) -> None:
        """The text of a reserved message (``None``: it could not be read); ``info`` and
        ``participant`` (LiveKit's stream info and sender) go with the input it joins."""
        self._reserved -= 1
        if text is None or not text.strip():
            self.ignore(identity, "empty message")
            return
        self._received += 1
        if self._chars + len(text) > self.max_chars:
            self._refuse(identity, f"a {len(text)}-character message does not fit "
                                   f"({self._chars} of {self.max_chars} characters wait)")
            return
        self._texts.append(text)
        self._chars += len(text)
        self._identity = identity
        self._info, self._participant = info, participant
        self._filled.set()

    def _refuse(self, identity: str, why: str) -> None:
        self._refused += 1
        self._refused_in_burst += 1
        if self._refused_in_burst == 1:
            logger.warning("chat from %s refused: %s (RoomOptions.text_input_max_messages=%d, "
                           "text_input_max_chars=%d); more are refused until the waiting "
                           "ones are taken", identity, why, self.max_messages, self.max_chars)

    async def take(self) -> TextInputEvent:
        """Wait for messages; return all that wait, as one input.

        Cancellation: a checkpoint; a cancelled call takes nothing.
        """
        await self._filled.wait()
        if self._refused_in_burst > 1:
            logger.warning("chat from %s: %d messages in all were refused while the agent was "
                           "busy", self._identity, self._refused_in_burst)
        self._refused_in_burst = 0
        ev = TextInputEvent(text="\n".join(self._texts), participant_identity=self._identity,
                            info=self._info, participant=self._participant)
        self._delivered_messages += len(self._texts)
        self._delivered_inputs += 1
        self._texts, self._chars = [], 0
        self._filled = trio.Event()
        return ev
