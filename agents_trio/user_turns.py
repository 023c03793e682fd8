"""UserTurns: the completed user turns of one activity, handled one after another.

Turns arrive from the session's recognition through a channel with one consumer, so a newer
turn never cancels an older one (reference §3.3-3.4): it waits, and the older turn's reply is
dropped (its user message kept) if a newer turn is already queued when it is ready.
"""

from __future__ import annotations

import logging
from typing import Protocol

import trio

from ._errors import StopResponse
from .chat import ChatItem, ChatMessage
from .events import EOUMetrics
from .interruption import words
from .nurseries import SerialWorker, Wakeup
from .preemptive import PreemptiveGeneration, PreemptiveHost, PreemptiveTurn
from .recognition import EndOfTurnInfo
from .speech_handle import SpeechHandle
from .turn_metrics import user_message_metrics



class TurnHost(PreemptiveHost, Protocol):
    """What the user-turn worker needs from its activity."""

    @property
    def preemptive(self) -> PreemptiveGeneration: ...

    @property
    def server_turn_detection(self) -> bool: ...

    @property
    def stt(self) -> object: ...

    def commit_item(self, item: ChatItem, handle: SpeechHandle | None = None) -> None: ...

    def interrupt_background_speeches(self) -> None: ...

    def schedule(self, handle: SpeechHandle, *, force: bool = False) -> None: ...

logger = logging.getLogger("agents_trio")


class UserTurns:
    """The turns of an activity, handled one after another by a worker of its nursery (a
    task only while a turn waits or is being handled)."""

    def __init__(self, activity: TurnHost) -> None:
        self._activity = activity
        self._turns = SerialWorker(self._handle, name="agents_trio.user_turns.UserTurns.handle")
        self._unhandled = 0   # turns accepted and not handled yet
        self._handled = Wakeup()

    def bind(self, nursery: trio.Nursery) -> None:
        """Handle turns in ``nursery`` (the activity's), in order, from now on.

        Cancellation: not a checkpoint. Cancelling ``nursery`` drops the turn being handled
        (its reply not scheduled); the preemptive reply it owned is left to the activity's
        cancellation.
        """
        self._turns.bind(nursery)

    def block(self) -> None:
        """No more turns (a handoff was requested or the agent drains)."""
        self._turns.close()

    @property
    def open(self) -> bool:
        """Turns are taken: no handoff was requested and the agent does not drain."""
        return not self._turns.closed

    @property
    def newer_turn_waiting(self) -> bool:
        return self._turns.waiting > 0

    def on_end_of_turn(self, info: EndOfTurnInfo) -> bool:
        """Accept a completed turn; False keeps the turn open (not enough words yet)."""
        activity = self._activity
        if not activity.accepts_turns:
            self._hold(info, f"the agent {activity.agent.id!r} is not accepting turns")
            return True
        if activity.server_turn_detection:
            return True  # the realtime server detects turns and answers them itself
        min_words = activity.options.interruption.min_words
        current = activity.current_speech
        if (min_words > 0 and current is not None and current.allow_interruptions
                and not current.interrupted and len(words(info.new_transcript)) < min_words):
            return False
        try:
            self._turns.submit(info)
            self._unhandled += 1
        except trio.ClosedResourceError:
            activity.preemptive.discard()
            self._hold(info, f"the agent {activity.agent.id!r} is leaving")
        return True

    def _hold(self, info: EndOfTurnInfo, why: str) -> None:
        """A turn that ended while this agent leaves the floor (a handoff, its task
        returning, the close): the session holds it for the next agent that takes the
        floor, which answers it (LiveKit drops it). While the session closes it is not
        answered, but what the user said is recorded: the close commits no other copy."""
        session = self._activity.session
        if session.closing:
            logger.warning("user turn not answered: the session is closing")
            self.commit_unanswered(info)
        else:
            logger.info("user turn held for the next agent: %s", why)
            session.hold_user_turn(info)

    def commit_unanswered(self, info: EndOfTurnInfo) -> None:
        """Record what the user said in a turn nobody answers."""
        if info.new_transcript:
            self._activity.commit_item(self._message(info))

    async def _handle(self, info: EndOfTurnInfo) -> None:
        try:
            await self._completed(info)
        except Exception:
            # a failing turn must not take the session down with it
            logger.exception("handling the user turn failed")
        finally:
            self._unhandled -= 1
            self._handled.notify()

    @property
    def handling(self) -> bool:
        """An accepted turn is not handled yet."""
        return self._unhandled > 0

    async def wait_handled(self) -> None:
        """Wait until every accepted turn has been handled (its reply scheduled, or not).

        Cancellation: a checkpoint only.
        """
        while self._unhandled > 0:
            await self._handled.wait()

    async def _completed(self, info: EndOfTurnInfo) -> None:
        activity = self._activity
        activity.preemptive.reset_attempts()
        activity.interrupt_background_speeches()
        with activity.preemptive.turn() as preemptive:
            await self._answer(info, preemptive)

    def _message(self, info: EndOfTurnInfo) -> ChatMessage:
        return ChatMessage(role="user", content=[info.new_transcript],
                           transcript_confidence=info.transcript_confidence,
                           metrics=user_message_metrics(info, self._activity.stt))

    async def _answer(self, info: EndOfTurnInfo, preemptive: PreemptiveTurn) -> None:
        """Answer the turn (with the preemptive reply when it is still valid), or return
        without a reply (the preemptive one is then discarded)."""
        activity = self._activity
        if info.skip_reply:
            # committed by hand without a reply: the words are recorded, nothing answers
            if info.new_transcript:
                activity.commit_item(self._message(info))
            return
        current = activity.current_speech
        if current is not None and not current.done():
            if not current.allow_interruptions:
                logger.info("skipping reply to the user turn: the current speech cannot be "
                            "interrupted")
                return
            current.interrupt()
            await current.wait_for_generation()
        # made with the copy, no checkpoint between: the message sorts after every item of
        # the context it is answered in (an input committed while the interrupted speech
        # finished would otherwise sort after it, and this turn's reply would answer it)
        message = self._message(info)
        turn_ctx = activity.agent.live_chat_ctx.copy()
        hook_started = trio.current_time()
        try:
            await activity.agent.on_user_turn_completed(turn_ctx, message)
        except StopResponse:
            return
        except Exception:
            logger.exception("error in on_user_turn_completed")
            return
        hook_delay = trio.current_time() - hook_started
        message.metrics["on_user_turn_completed_delay"] = hook_delay
        if not activity.accepts_turns or not self.open:
            # drain (a handoff or close) began while this turn waited, perhaps with its
            # on_exit still running (the agent runs until it returns): not answered here
            # (reference 3.3 drops it); the next agent answers it, or the close records it
            self._hold(info, f"the agent {activity.agent.id!r} is draining")
            return
        handle = preemptive.take(info.new_transcript, turn_ctx, message)
        if handle is None:
            handle = activity.generate_reply(user_message=message, chat_ctx=turn_ctx,
                                             schedule=False, input_modality="audio")
        activity.session.emit_metrics(EOUMetrics(
            speech_id=handle.id, end_of_utterance_delay=info.end_of_turn_delay,
            transcription_delay=info.transcription_delay,
            on_user_turn_completed_delay=hook_delay))
        if self.newer_turn_waiting and handle.allow_interruptions:
            # a newer turn is already waiting: this reply is dropped, its message kept. One
            # that disallows interruptions plays, as in LiveKit (where interrupting it fails
            # once it is scheduled); interrupting it here raised, and the reply, never
            # scheduled, held the agent's drain forever
            handle.interrupt()
        activity.schedule(handle)
