"""Running LiveKit's own asyncio code (its RemoteSession, SessionHost, AgentSession) from a
Trio test: in a worker thread with an event loop of its own."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

T = TypeVar("T")


async def run_asyncio(fn: Callable[[], Awaitable[T]]) -> T:
    """Run ``fn()`` in a thread on its own asyncio loop; the Trio side waits for it."""
    return await trio.to_thread.run_sync(lambda: asyncio.run(fn()))  # type: ignore[arg-type]


class Gate:
    """A flag the Trio side sets and an asyncio coroutine in another thread awaits."""

    def __init__(self) -> None:
        self._flag = threading.Event()

    def set(self) -> None:
        self._flag.set()

    async def wait(self) -> None:
        while not self._flag.is_set():
            await asyncio.sleep(0.01)


def lk_remote_session(port: int) -> Any:
    from livekit.agents.voice.remote_session import RemoteSession, TcpSessionTransport
    return RemoteSession(TcpSessionTransport("127.0.0.1", port))

