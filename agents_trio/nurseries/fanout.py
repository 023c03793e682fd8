"""Synchronous event fan-out to callbacks and async subscribers."""

from __future__ import annotations

import logging
import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar, overload

import trio

__all__ = ["EventFanout", "FanoutEvent", "FanoutStatistics", "Subscription"]

logger = logging.getLogger("agents_trio")

Callback = Callable[[Any], Any]
CallbackT = TypeVar("CallbackT", bound=Callable[[Any], object])


class FanoutEvent(NamedTuple):
    """What a subscriber receives: the emitted ``name`` and ``event``."""

    name: str
    event: Any


@dataclass(frozen=True)
class FanoutStatistics:
    """Counts of registered callbacks (all names) and live subscribers."""

    callbacks: int
    subscribers: int


class _Feed:
    """The fan-out's end of one subscription: emitted events go in here."""

    def __init__(self, send: trio.MemorySendChannel[FanoutEvent]) -> None:
        self.send = send
        self.dropped = 0

    def push(self, item: FanoutEvent) -> None:
        try:
            self.send.send_nowait(item)
        except trio.WouldBlock:
            self.dropped += 1
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass

    def end(self) -> None:
        self.send.close()


class Subscription:
    """Receives every event emitted after it was created, as :class:`FanoutEvent`.

    Both an async context manager and an async iterator. Iteration stops
    cleanly once the fanout is closed (after buffered events are drained) or
    the subscription is closed. If the buffer is full, :meth:`EventFanout.emit`
    does not block: the event is dropped for this subscriber only and counted
    in :attr:`dropped`.

    An unreferenced subscription is unsubscribed automatically (the fanout
    holds it weakly), so ``async for ev in fanout.events(): ... break`` needs
    no explicit close.

    Attributes:
        dropped: Number of events dropped because the buffer was full.
    """

    def __init__(self, receive: trio.MemoryReceiveChannel[FanoutEvent], feed: _Feed,
                 unsubscribe: Callable[[Subscription], object]) -> None:
        self._receive = receive
        self._feed = feed
        self._unsubscribe = unsubscribe

    @property
    def dropped(self) -> int:
        """Number of events dropped because the buffer was full."""
        return self._feed.dropped

    def close(self) -> None:
        """Unsubscribe and discard buffered events. Idempotent."""
        self._unsubscribe(self)
        self._feed.end()
        self._receive.close()

    async def aclose(self) -> None:
        """Like :meth:`close`.

        Cancellation:
            A checkpoint; the subscription is closed even if cancelled.
        """
        self.close()
        await trio.lowlevel.checkpoint()

    async def __aenter__(self) -> Subscription:
        """The subscription itself (subscribed already when it was created).

        Cancellation: not a checkpoint.
        """
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        """Like :meth:`aclose`.

        Cancellation: a checkpoint; the subscription is closed even if cancelled.
        """
        await self.aclose()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> FanoutEvent:
        """Wait for the next event.

        Cancellation:
            A checkpoint; a cancelled wait loses no event.
        """
        try:
            return await self._receive.receive()
        except (trio.EndOfChannel, trio.ClosedResourceError):
            raise StopAsyncIteration from None


class EventFanout:
    """Calls named callbacks and feeds subscribers, synchronously on :meth:`emit`."""

    def __init__(self) -> None:
        self._callbacks: dict[str, list[Callback]] = {}
        # each subscription's feed, held as long as the subscription is referenced elsewhere;
        # made by the first subscription (most fan-outs only ever have callbacks)
        self._feeds: weakref.WeakKeyDictionary[Subscription, _Feed] | None = None
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    @overload
    def on(self, name: str, callback: CallbackT) -> CallbackT: ...

    @overload
    def on(self, name: str, callback: None = None) -> Callable[[CallbackT], CallbackT]: ...

    def on(self, name: str, callback: CallbackT | None = None
           ) -> CallbackT | Callable[[CallbackT], CallbackT]:
        """Register ``callback`` for ``name``; without one, return a decorator. A callback
        already registered for ``name`` stays registered once (as LiveKit's emitter keeps
        them), in its first place.

        Returns:
            ``callback`` itself, or a decorator registering and returning it.
        """
        if callback is None:
            def register(cb: CallbackT) -> CallbackT:
                return self.on(name, cb)
            return register
        callbacks = self._callbacks.setdefault(name, [])
        if callback not in callbacks:
            callbacks.append(callback)
        return callback

    def off(self, name: str, callback: Callback) -> None:
        """Unregister ``callback`` for ``name``, if present."""
        callbacks = self._callbacks.get(name, [])
        if callback in callbacks:
            callbacks.remove(callback)
        if not callbacks:
            self._callbacks.pop(name, None)

    def emit(self, name: str, event: object) -> None:
        """Feed subscribers, then call ``name``'s callbacks in registration order.

        A raising callback is logged and skipped. Registrations changed during
        an emit take effect from the next emit. Ignored once closed.

        Subscribers are fed before any callback runs (feeding runs no code of theirs): who
        receives the event is decided when the emit begins, so a subscription a callback
        makes starts with the next event, and an emit a callback makes (or a close) comes
        after this event in every subscriber's buffer.
        """
        if self._closed:
            return
        if self._feeds:
            item = FanoutEvent(name, event)
            for feed in list(self._feeds.values()):
                feed.push(item)
        for callback in list(self._callbacks.get(name, ())):
            try:
                callback(event)
            except Exception:
                logger.exception("callback %r for event %r raised", callback, name)

    def wanted(self, name: str) -> bool:
        """Whether an event ``name`` emitted now would reach anyone (a callback for it or a
        subscriber): an event costly to build need not be built for no one."""
        return not self._closed and (bool(self._callbacks.get(name)) or bool(self._feeds))

    def subscribe(self, *, max_buffer: float = math.inf) -> Subscription:
        """Subscribe to all events emitted from now on.

        Use as ``async with fanout.subscribe() as events: async for ev in events:``.

        Args:
            max_buffer: Events buffered before further ones are dropped.
        """
        send, receive = trio.open_memory_channel[FanoutEvent](max_buffer)
        feed = _Feed(send)
        subscription = Subscription(receive, feed, self._unsubscribe)
        if self._closed:
            feed.end()
        else:
            if self._feeds is None:
                self._feeds = weakref.WeakKeyDictionary()
            self._feeds[subscription] = feed
        return subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        if self._feeds is not None:
            self._feeds.pop(subscription, None)

    def events(self, *, max_buffer: float = math.inf) -> Subscription:
        """Shorthand for ``async for ev in fanout.events():``; see :meth:`subscribe`."""
        return self.subscribe(max_buffer=max_buffer)

    def close(self) -> None:
        """End all subscriptions, drop all callbacks, ignore later emits. Idempotent."""
        self._closed = True
        feeds, self._feeds = self._feeds, None
        for feed in list(feeds.values()) if feeds is not None else ():
            feed.end()
        self._callbacks.clear()

    def statistics(self) -> FanoutStatistics:
        """Current registration counts."""
        return FanoutStatistics(
            callbacks=sum(len(cbs) for cbs in self._callbacks.values()),
            subscribers=len(self._feeds) if self._feeds is not None else 0,
        )
