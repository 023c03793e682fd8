"""What every adapter shares: error mapping, closing plugin streams, the bridge to use."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

import trio
from livekit.agents import APIConnectOptions
from livekit.agents import APIConnectionError as LKAPIConnectionError
from livekit.agents import APIError as LKAPIError
from livekit.agents import APIStatusError as LKAPIStatusError
from livekit.agents import APITimeoutError as LKAPITimeoutError

from .._errors import APIConnectionError, APIError, APIStatusError, APITimeoutError
from ..io.bridge import AsyncioBridge
from ..io.bridge_on_demand import find_bridge
from ..nurseries import open_unwrapping_nursery

logger = logging.getLogger("agents_trio.plugins")

CLOSE_GRACE = 5.0

T = TypeVar("T")


def to_api_error(error: BaseException, label: str, *, retryable: bool = False
                 ) -> BaseException:
    """The runtime's error for a provider failure (the original is the ``__cause__``).

    A LiveKit ``APIError`` that reaches the adapter has already been retried by the plugin
    (per its ``conn_options``), so it is not recoverable; neither is an unexpected exception
    inside a plugin stream. LiveKit's ``APIStatusError``, ``APITimeoutError`` and
    ``APIConnectionError`` become this runtime's class of the same name (status code, request
    id and body kept). ``retryable=True`` is for a provider that said the failure is not
    final (a realtime session's recoverable ``error`` event).
    """
    if isinstance(error, APIError):
        return error
    mapped: APIError
    if isinstance(error, LKAPIStatusError):
        mapped = APIStatusError(f"{label}: {error.message} (status {error.status_code})",
                                status_code=error.status_code, request_id=error.request_id,
                                body=error.body, retryable=retryable)
    elif isinstance(error, LKAPITimeoutError):
        mapped = APITimeoutError(f"{label}: {error.message}", retryable=retryable)
    elif isinstance(error, LKAPIConnectionError):
        mapped = APIConnectionError(f"{label}: {error.message}", retryable=retryable)
    elif isinstance(error, LKAPIError):
        mapped = APIError(f"{label}: {error.message}", body=error.body, retryable=retryable)
    else:
        mapped = APIError(f"{label} failed: {error!r}", recoverable=retryable)
    mapped.__cause__ = error
    return mapped


def error_mapper(label: str) -> Callable[[BaseException], BaseException]:
    return lambda error: to_api_error(error, label)


async def resolve_bridge(bridge: AsyncioBridge | None) -> AsyncioBridge:
    """The bridge to run a plugin call on: the adapter's own, the current one, or the one its
    session opens on demand (see ``agents_trio.io.bridge_on_demand``).

    Raises:
        agents_trio.BridgeError: No bridge is open and no session can open one.

    Cancellation: a checkpoint only when the session's bridge opens now.
    """
    return await find_bridge(bridge)


def connect_options(conn_options: APIConnectOptions | None) -> dict[str, Any]:
    return {} if conn_options is None else {"conn_options": conn_options}


async def plugin_items(stream: AsyncIterable[T]) -> AsyncIterator[T]:
    """asyncio-flavoured: the items of a plugin stream, as a bridge pump's source.

    A ``CancelledError`` the stream raises while the pump's task was not cancelled (the
    plugin cancelled itself: it awaited an inner task of its own that it had cancelled) is
    the stream's failure: raised as a ``RuntimeError`` (the ``CancelledError`` its cause), so
    that the channel maps it to the adapter's ``APIError``. Let through, it would end the pump
    as cancelled from the asyncio side: a ``BridgeError`` naming neither the provider nor the
    cause.

    Cancellation: the pump's own cancellation (the block left, the bridge closing) passes.
    """
    items = aiter(stream)
    while True:
        try:
            item = await anext(items)
        except StopAsyncIteration:
            return
        except asyncio.CancelledError as e:
            task = asyncio.current_task()
            # Task.cancelling() is 3.11's: before it, every CancelledError passes, as it did
            cancelling = getattr(task, "cancelling", None)
            if cancelling is None or cancelling():
                raise
            raise RuntimeError("the plugin stream cancelled itself") from e
        yield item


class AsyncClosable(Protocol):
    """A plugin stream or session: closed with ``await aclose()`` on the asyncio side."""

    async def aclose(self) -> None: ...


async def aclose_plugin_stream(bridge: AsyncioBridge, stream: AsyncClosable, label: str
                               ) -> None:
    """Close a plugin stream on the asyncio side, giving its ``aclose`` ``CLOSE_GRACE``
    seconds in all; its errors are logged.

    Cancellation: shielded and bounded by ``CLOSE_GRACE``. An ``aclose`` still running then
    (a plugin waiting in a ``finally`` for a socket that never closes: asyncio cancels a task
    once, so cancelling it does not end that wait either) is cancelled and left to the
    bridge, which cancels what is left on its loop when it closes; leaving does not wait for
    it (waiting for a cancelled ``bridge.run`` would add the bridge's ``cancel_grace``).
    """
    if bridge.closed:
        return
    with trio.CancelScope(shield=True):
        try:
            closed = await bridge.run(_aclose_within, stream, CLOSE_GRACE)
        except Exception as e:
            logger.debug("closing a %s stream failed: %r", label, e)
            return
    if not closed:
        logger.warning("closing a %s stream took more than %.0f s; abandoned", label,
                       CLOSE_GRACE)


async def _aclose_within(stream: AsyncClosable, grace: float) -> bool:
    """asyncio-flavoured: ``await stream.aclose()`` for at most ``grace`` seconds; whether it
    finished. Raises its error. One that does not finish is cancelled and left running: its
    error, if any, is dropped (it was abandoned)."""
    closing = asyncio.get_running_loop().create_task(stream.aclose(),
                                                     name=f"aclose({type(stream).__qualname__})")
    done, _ = await asyncio.wait({closing}, timeout=grace)
    if done:
        closing.result()
        return True
    closing.add_done_callback(_drop_outcome)
    closing.cancel()
    return False


def _drop_outcome(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()


# A nursery for an adapter's helper tasks; a single error escapes unwrapped.
open_nursery = open_unwrapping_nursery


async def await_aio(awaitable: Awaitable[T]) -> T:
    """asyncio-flavoured: await an asyncio awaitable (a future the plugin returned)."""
    return await awaitable
