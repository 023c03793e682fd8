"""An asyncio bridge opened the first time a LiveKit plugin needs one, owned by a nursery.

Adapted LiveKit plugins (``agents_trio.plugins``) run on an :class:`AsyncioBridge`. Inside a
job (``agents_trio.job``) or an ``async with open_bridge():`` block one is current and they
use it. A session started from a plain ``trio.run`` has none: :class:`BridgeOnDemand` is the
session's answer. The session makes one when it is entered and installs it in the entering
task's context (so every task of the session sees it); the first adapter that finds no current
bridge asks it, and it opens a bridge in a task of the session's nursery. That task owns the
bridge (and the plugins' shared HTTP session, see :mod:`agents_trio.io.plugin_http`) until
the session, its work done, calls :meth:`BridgeOnDemand.close`. A session whose models are all
Trio-native never opens one.

:func:`find_bridge` is the lookup every adapter does: the bridge it was given, else the
current one, else the one on demand, else :class:`BridgeError`.
"""

from __future__ import annotations

import contextvars
import trio

from .bridge import AsyncioBridge, BridgeError, current_bridge, open_bridge
from .plugin_http import PluginHttpSession

__all__ = ["BridgeOnDemand", "find_bridge", "open_bridge_or_none"]

_on_demand: contextvars.ContextVar[BridgeOnDemand | None] = contextvars.ContextVar(
    "agents_trio_bridge_on_demand", default=None)


class BridgeOnDemand:
    """A bridge opened on first use in a task of ``nursery`` and closed by :meth:`close`.

    Args:
        nursery: Where the task owning the bridge runs; it must outlive every use of the
            bridge (the session's nursery).
        cancel_grace: As for :func:`open_bridge`.
    """

    def __init__(self, nursery: trio.Nursery, *, cancel_grace: float = 5.0) -> None:
        self._nursery = nursery
        self._cancel_grace = cancel_grace
        self._scope: trio.CancelScope | None = None  # the owner task's, while it runs
        self._closed = False
        self._lock: trio.Lock | None = None  # made by the first get()
        self._bridge: AsyncioBridge | None = None
        self._http = PluginHttpSession()

    @property
    def open_bridge(self) -> AsyncioBridge | None:
        """The bridge, if it was opened and is not closed yet (nothing is opened here)."""
        bridge = self._bridge
        return bridge if bridge is not None and not bridge.closed else None

    @property
    def opened(self) -> bool:
        """Whether a bridge was opened (by a first use)."""
        return self._bridge is not None

    def install(self) -> contextvars.Token[BridgeOnDemand | None]:
        """Make this the bridge on demand of the calling task's context (and so of the tasks
        it starts from now on); give the token back to :meth:`uninstall`, in the same task."""
        return _on_demand.set(self)

    @staticmethod
    def uninstall(token: contextvars.Token[BridgeOnDemand | None]) -> None:
        """Undo :meth:`install` (in the task that installed it)."""
        _on_demand.reset(token)

    async def get(self) -> AsyncioBridge:
        """The bridge, opened by the first call; the caller's context gets the plugins'
        HTTP session bound (LiveKit's ``http_session()``) when none is.

        Raises:
            BridgeError: :meth:`close` was called, or the bridge failed to open.

        Cancellation: cancelling the first call while the bridge opens cancels its opening
        (the next call tries again); later calls are not blocking.
        """
        if self._lock is None:
            self._lock = trio.Lock()
        async with self._lock:
            if self._closed:
                raise BridgeError("the session's asyncio bridge is closed")
            if self._bridge is None or self._bridge.closed:
                self._bridge = await self._nursery.start(self._own)
        self._http.bind_here()
        return self._bridge

    async def _own(self, *, task_status: trio.TaskStatus[AsyncioBridge]) -> None:
        with trio.CancelScope() as self._scope:
            async with open_bridge(cancel_grace=self._cancel_grace) as bridge:
                try:
                    task_status.started(bridge)
                    await trio.sleep_forever()
                finally:
                    await self._http.aclose(bridge)

    def close(self) -> None:
        """Close the bridge (if one was opened) and refuse to open another. Not blocking: the
        owner task closes it (within the bridge's ``cancel_grace``) and the nursery waits."""
        self._closed = True
        if self._scope is not None:
            self._scope.cancel()


def open_bridge_or_none(bridge: AsyncioBridge | None = None) -> AsyncioBridge | None:
    """As :func:`find_bridge`, without opening anything: ``bridge`` if open, else the
    current bridge, else the caller's session's bridge on demand if it is open; else None."""
    if bridge is not None and not bridge.closed:
        return bridge
    try:
        return current_bridge()
    except BridgeError:
        on_demand = _on_demand.get()
        return None if on_demand is None else on_demand.open_bridge


async def find_bridge(bridge: AsyncioBridge | None = None) -> AsyncioBridge:
    """The bridge an adapter runs on: ``bridge`` if open, else the current bridge, else the
    bridge on demand of the caller's session (opened now if needed).

    Raises:
        BridgeError: None of them exists.

    Cancellation: a checkpoint only when the bridge on demand opens (see
    :meth:`BridgeOnDemand.get`).
    """
    if bridge is not None and not bridge.closed:
        return bridge
    try:
        return current_bridge()
    except BridgeError:
        on_demand = _on_demand.get()
        if on_demand is None:
            raise BridgeError("no asyncio bridge is open: use the model inside an "
                              "AgentSession (it opens one when needed), or wrap the code in "
                              "`async with agents_trio.open_bridge():`") from None
    return await on_demand.get()
