"""Scenarios played against an agent file written the LiveKit way (an ``AgentServer`` with an
``@server.rtc_session`` entrypoint, ``WorkerOptions``, or an ``entrypoint`` function).

    python -m agents_trio simulate scenarios.json --agent my_agent.py
    # or, in scenarios.json: {"agent": "my_agent.py", "scenarios": [...]}

The file is imported (not as ``__main__``: its ``cli.run_app`` does not run), its prewarm runs
once, and for each scenario its entrypoint runs as a local job (``ctx.room`` is a stand-in
named ``console``, as in console mode); the first session the entrypoint starts is the one
the scenario talks to, by text (it gets no audio I/O). When the scenario is over the job shuts
down (the session closes with ``job_shutdown``; the shutdown callbacks run).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import trio

from .simulate import LocalDriver, Scenario, ScenarioError, ScenarioResult, run_scenario

if TYPE_CHECKING:
    from livekit import rtc

    from ..io.bridge import AsyncioBridge
    from ..io.room_options import RoomOptions
    from ..job import JobContext
    from ..job_process import JobProcess
    from ..session import AgentSession

__all__ = ["AgentFile", "load_agent_file", "open_agent_file_driver", "run_scenarios_on_file"]

Entrypoint = Callable[["JobContext"], Awaitable[object]]


class AgentFile:
    """An imported agent file: its entrypoint and its prewarmed process."""

    def __init__(self, path: str, entrypoint: Entrypoint, proc: JobProcess) -> None:
        self.path = path
        self.entrypoint = entrypoint
        self.proc = proc


def load_agent_file(path: str) -> AgentFile:
    """Import the agent file at ``path`` and prewarm its process.

    Raises:
        ScenarioError: The file cannot be imported, or has no ``AgentServer`` with an
            entrypoint, ``WorkerOptions`` or ``entrypoint`` function.
    """
    from ..job_process import JobProcess
    from ..server import AgentServer
    from ..worker_options import WorkerOptions

    where = os.path.abspath(path)
    name = f"_agents_trio_simulated_{abs(hash(where))}"
    spec = importlib.util.spec_from_file_location(name, where)
    if spec is None or spec.loader is None or not os.path.isfile(where):
        raise ScenarioError(f"cannot load the agent file {path!r}: no such Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise ScenarioError(f"importing the agent file {path!r} failed: {e!r}") from e
    values = list(vars(module).values())
    servers = [v.server() for v in values if isinstance(v, WorkerOptions)]
    servers += [v for v in values if isinstance(v, AgentServer)]
    for server in servers:
        try:
            entrypoint = server.entrypoint
        except RuntimeError:
            continue   # a server with no entrypoint registered
        return AgentFile(path, entrypoint, server.prewarm())
    function = getattr(module, "entrypoint", None)
    if callable(function):
        return AgentFile(path, function, JobProcess())
    raise ScenarioError(f"the agent file {path!r} has no AgentServer with an rtc_session "
                        "entrypoint, no WorkerOptions and no `entrypoint` function")


def _simulation_context(bridge: AsyncioBridge, proc: JobProcess) -> Any:  # noqa: ANN401
    from ..console import ConsoleRoom
    from ..job import JobContext

    class SimulationJobContext(JobContext):
        """A local job whose first session is handed to the scenario (no I/O: text turns)."""

        def __init__(self) -> None:
            super().__init__(bridge, ConsoleRoom(),  # type: ignore[arg-type]
                             job_id="simulate", proc=proc)
            self.first_session: AgentSession | None = None
            self.settled = trio.Event()   # the first session runs, or the entrypoint ended

        def _open_session_io(self, session: AgentSession, room: rtc.Room | None,
                             room_options: RoomOptions | None
                             ) -> AbstractAsyncContextManager[object]:
            return _no_io()

        def _serve_session(self, session: AgentSession, room: rtc.Room | None
                           ) -> AbstractAsyncContextManager[object]:
            if self.first_session is None:
                self.first_session = session
                self.settled.set()
            return _no_io()

    return SimulationJobContext()


@asynccontextmanager
async def _no_io() -> AsyncIterator[None]:
    yield


@asynccontextmanager
async def open_agent_file_driver(agent: AgentFile) -> AsyncIterator[LocalDriver]:
    """Run the agent file's entrypoint as a local job and drive the first session it starts.

    Raises:
        ScenarioError: The entrypoint returned (or failed) without starting a session.

    Cancellation: leaving or cancelling the block shuts the job down (its sessions close, its
    shutdown callbacks run).
    """
    from ..io.bridge import open_bridge
    from ..job import acting_for_job, open_plugin_http_context
    from ..nurseries import open_unwrapping_nursery

    async with open_bridge() as bridge, open_plugin_http_context(bridge):
        ctx = _simulation_context(bridge, agent.proc)
        failure: list[BaseException] = []

        async def run_job() -> None:
            try:
                await ctx.run_entrypoint(agent.entrypoint)
            except Exception as e:   # reported as the scenario's error below
                failure.append(e)
            finally:
                ctx.settled.set()
                await ctx.run_shutdown_callbacks()

        async with open_unwrapping_nursery() as nursery:
            nursery.start_soon(run_job)
            await ctx.settled.wait()
            if ctx.first_session is None:
                why = f": {failure[0]!r}" if failure else ""
                raise ScenarioError(f"the entrypoint of {agent.path!r} started no session{why}")
            try:
                with acting_for_job(ctx):   # the tools see the job, as in the entrypoint
                    yield LocalDriver(ctx.first_session)
            finally:
                ctx.shutdown("simulation over")


async def run_scenarios_on_file(scenarios: list[Scenario], agent: AgentFile
                                ) -> list[ScenarioResult]:
    """Play each scenario against a fresh job of the agent file.

    Raises:
        ScenarioError: An entrypoint started no session.

    Cancellation: stops at the scenario in flight (its job shuts down); the results so far
    are lost.
    """
    results = []
    for scenario in scenarios:
        async with open_agent_file_driver(agent) as driver:
            results.append(await run_scenario(scenario, driver))
    return results
