"""What every adapter shares: error mapping, closing plugin streams, the bridge to use."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
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


def to_api_error(error: BaseException, label: str) -> BaseException:
    """The runtime's error for a provider failure (the original is the ``__cause__``).

    A LiveKit ``APIError`` that reaches the adapter has already been retried by the plugin
    (per its ``conn_options``), so it is not recoverable; neither is an unexpected exception
    inside a plugin stream. LiveKit's ``APIStatusError``, ``APITimeoutError`` and
    ``APIConnectionError`` become this runtime's class of the same name (status code, request
    id and body kept).
    """
    if isinstance(error, APIError):
        return error
    mapped: APIError
    if isinstance(error, LKAPIStatusError):
        mapped = APIStatusError(f"{label}: {error.message} (status {error.status_code})",
                                status_code=error.status_code, request_id=error.request_id,
                                body=error.body, retryable=False)
    elif isinstance(error, LKAPITimeoutError):
        mapped = APITimeoutError(f"{label}: {error.message}", retryable=False)
    elif isinstance(error, LKAPIConnectionError):
        mapped = APIConnectionError(f"{label}: {error.message}", retryable=False)
    elif isinstance(error, LKAPIError):
        mapped = APIError(f"{label}: {error.message}", body=error.body, retryable=False)
    else:
        mapped = APIError(f"{label} failed: {error!r}", recoverable=False)
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


class AsyncClosable(Protocol):
    """A plugin stream or session: closed with ``await aclose()`` on the asyncio side."""

    async def aclose(self) -> None: ...


async def aclose_plugin_stream(bridge: AsyncioBridge, stream: AsyncClosable, label: str
                               ) -> None:
    """Close a plugin stream on the asyncio side (shielded, bounded); errors are logged."""
    if bridge.closed:
        return
    with trio.move_on_after(CLOSE_GRACE, shield=True) as scope:
        try:
            await bridge.run(stream.aclose)
        except Exception as e:
            logger.debug("closing a %s stream failed: %r", label, e)
    if scope.cancelled_caught:
        logger.warning("closing a %s stream took more than %.0f s; abandoned", label,
                       CLOSE_GRACE)


# A nursery for an adapter's helper tasks; a single error escapes unwrapped.
open_nursery = open_unwrapping_nursery


async def await_aio(awaitable: Awaitable[T]) -> T:
    """asyncio-flavoured: await an asyncio awaitable (a future the plugin returned)."""
    return await awaitable
