"""Scaling past one machine: LiveKit's agent dispatch runs agents_trio sessions.

LiveKit Agents' own worker (``AgentServer``) registers with the LiveKit server, accepts jobs
and starts a process per job; nothing of that is reimplemented here. What changes is the job's
entrypoint: :class:`TrioJobEntrypoint` runs a Trio entrypoint (``async def entrypoint(ctx:
agents_trio.JobContext)``) in a thread of the job process, with its own trio-asyncio bridge and
its own room connection made from the job's URL and token. LiveKit's asyncio job context never
connects its own room.

    # app.py
    from agents_trio.worker import create_agent_server
    server = create_agent_server("app:entrypoint", agent_name="support")

    $ python -m agents_trio worker app:entrypoint start     # or: python -m livekit.agents start app.py

Lifecycle: when the Trio entrypoint returns (its session closed), the adapter asks LiveKit to
shut the job down. When LiveKit ends the job first (the worker drains, the job is terminated),
it cancels the entrypoint task, and the cancellation reaches the Trio run as a job shutdown:
the session closes with reason ``job_shutdown`` (``on_exit`` runs) and the entrypoint gets
``shutdown_grace`` seconds to return before it is cancelled; the asyncio side waits that long
(plus a margin) for the thread. A room deleted on the server, or any drop of the Trio side's
connection, shuts the job down the same way and ends it the first way.

Needs ``livekit-agents`` (the ``livekit-plugins`` extra).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from livekit.agents import AgentServer
from livekit.agents import JobContext as LiveKitJobContext

from .io.bridge import is_asyncio_cancellation, run_trio_in_thread
from .job import Entrypoint, JobContext, RoomOpener, load_entrypoint, run_job
from .job_process import JobProcess

__all__ = ["TrioJobEntrypoint", "create_agent_server"]

logger = logging.getLogger("agents_trio.worker")

# beyond the entrypoint's grace: the room's disconnect and the bridge's close
_CLOSE_MARGIN = 5.0


class TrioJobEntrypoint:
    """A LiveKit job entrypoint (an asyncio callable) that runs a Trio entrypoint.

    It is picklable when ``entrypoint`` is an import string (``"app:entrypoint"``) or a
    module-level function, as LiveKit's process pool needs.

    Args:
        entrypoint: ``"module:function"``, ``"path/file.py:function"`` or the function.
        shutdown_grace: Seconds the Trio entrypoint gets to return once LiveKit cancels the
            job (its session closes with ``job_shutdown`` at once).
        open_room_fn: How to connect (tests pass a fake room).
    """

    def __init__(self, entrypoint: str | Entrypoint, *, shutdown_grace: float = 10.0,
                 open_room_fn: RoomOpener | None = None) -> None:
        self.entrypoint = entrypoint
        self.shutdown_grace = shutdown_grace
        self.open_room_fn = open_room_fn
        self.__name__ = getattr(entrypoint, "__name__", str(entrypoint))

    def _resolve(self) -> Entrypoint:
        if isinstance(self.entrypoint, str):
            return load_entrypoint(self.entrypoint)
        return self.entrypoint

    def __call__(self, job_ctx: LiveKitJobContext) -> Coroutine[Any, Any, None]:
        return self._run(job_ctx)

    async def _run(self, job_ctx: LiveKitJobContext) -> None:
        """asyncio-flavoured: run the Trio job, then end the LiveKit job."""
        # RunningJobInfo: LiveKit exposes the job's URL and token only here
        info = job_ctx._info  # noqa: SLF001 - LiveKit's JobContext, no public accessor
        entrypoint = self._resolve()
        contexts: list[JobContext] = []
        kwargs: dict[str, Any] = {"url": info.url, "token": info.token,
                                  "job_id": getattr(info.job, "id", None),
                                  "shutdown_grace": self.shutdown_grace,
                                  "on_ready": contexts.append}
        if self.open_room_fn is not None:
            kwargs["open_room_fn"] = self.open_room_fn
        lk_proc = getattr(job_ctx, "proc", None)  # what the server's setup_fnc filled
        if lk_proc is not None:
            kwargs["proc"] = JobProcess.sharing(lk_proc)
        reason = "agents_trio entrypoint finished"
        try:
            await run_trio_in_thread(functools.partial(run_job, entrypoint, **kwargs),
                                     name=f"agents_trio job {kwargs['job_id']}",
                                     cancel_grace=self.shutdown_grace + _CLOSE_MARGIN)
        except BaseException as e:
            reason = ("agents_trio entrypoint cancelled" if is_asyncio_cancellation(e)
                      else f"agents_trio entrypoint failed: {e!r}")
            raise
        finally:
            job_ctx.shutdown(reason=reason)

    def __repr__(self) -> str:
        return f"TrioJobEntrypoint({self.entrypoint!r})"


def create_agent_server(entrypoint: str | Entrypoint, *, agent_name: str = "",
                        on_request: Callable[..., Any] | None = None,
                        **server_options: Any,  # noqa: ANN401 - AgentServer types them
                        ) -> AgentServer:
    """A LiveKit ``AgentServer`` whose jobs run ``entrypoint`` on the Trio runtime.

    Args:
        entrypoint: The Trio entrypoint (see :class:`TrioJobEntrypoint`).
        agent_name: Set it for explicit dispatch (LiveKit's ``agent_name``).
        on_request: LiveKit's job request hook (accept or reject), asyncio-flavoured.
        server_options: Passed to ``AgentServer`` (``ws_url``, ``api_key``, ``api_secret``,
            ``num_idle_processes``, …; URL and keys default to ``LIVEKIT_*``).
    """
    server = AgentServer(**server_options)
    server.rtc_session(TrioJobEntrypoint(entrypoint), agent_name=agent_name,
                       on_request=on_request)
    return server
