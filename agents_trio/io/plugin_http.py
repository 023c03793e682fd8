"""The shared HTTP session LiveKit plugins take from their job (``utils.http_session()``).

LiveKit Agents binds one per job process; many plugins (Deepgram, Cartesia, ElevenLabs, the
inference gateway's STT and TTS) fail without it. :class:`PluginHttpSession` binds one lazily
made session in the context of each task that asks (``bind_here``), unless that context has
one already, and closes it on the bridge at the end. Without livekit-agents installed it does
nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

from .bridge import AsyncioBridge

logger = logging.getLogger("agents_trio.plugins")

CLOSE_TIMEOUT = 5.0


class PluginHttpSession:
    """One HTTP session for the plugins run by one owner (a session's bridge on demand)."""

    def __init__(self) -> None:
        self._factory: Callable[[], Any] | None = None

    def bind_here(self) -> None:
        """Bind the session in the caller's context if no plugin HTTP session is bound there.
        Not blocking; the aiohttp session itself is made by its first user, in the loop."""
        try:
            from livekit.agents.utils import http_context
        except ImportError:
            return
        # LiveKit binds it with an asyncio-side context manager that the Trio side would not
        # see; binding it in a Trio task's context needs the module's private names.
        var = http_context._ContextVar  # noqa: SLF001 - see above
        if var.get(None) is not None:
            return
        if self._factory is None:
            self._factory = http_context._new_session_ctx()  # noqa: SLF001 - see above
        else:
            var.set(self._factory)

    async def aclose(self, bridge: AsyncioBridge) -> None:
        """Close the HTTP session (if one was bound) on ``bridge``.

        Cancellation: shielded, at most ``CLOSE_TIMEOUT`` seconds; a failure is logged.
        """
        factory, self._factory = self._factory, None
        if factory is None:
            return
        _unbind(factory)
        if bridge.closed:
            return
        with trio.move_on_after(CLOSE_TIMEOUT, shield=True):
            try:
                await bridge.run(_close_session, factory)
            except Exception as e:
                logger.debug("closing the plugins' HTTP session failed: %r", e)


def _unbind(factory: Callable[[], Any]) -> None:
    """Unbind ``factory`` from the caller's context if it is the one bound there."""
    from livekit.agents.utils import http_context
    var = http_context._ContextVar  # noqa: SLF001 - see bind_here
    if var.get(None) is factory:
        var.set(None)


async def _close_session(factory: Callable[[], Any]) -> None:
    """asyncio-flavoured: close the session the factory made (making it if it made none)."""
    await factory().close()
