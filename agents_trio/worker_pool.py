"""N worker processes on one machine, supervised: ``python -m agents_trio worker --processes N``.

Each process is a whole LiveKit worker (``python -m agents_trio worker ... --processes 1``): its
own ``AgentServer`` registers with LiveKit, takes jobs onto its own job host (one Trio run) and
reports that run's load; LiveKit's dispatch balances jobs across the processes by that load as
it does across machines. One process per core uses the cores: one Trio run keeps one core busy
at most.

The supervisor:

- starts the N processes, each with its own HTTP health port (``port + i`` when a port is
  given; LiveKit's default otherwise: 8081 + i in ``start``, a free one in ``dev``);
- forwards SIGTERM and SIGINT to all of them (a process being started at that moment gets
  them once it is up): each drains as LiveKit's worker does (no new jobs, running ones
  finish; then closes) and the supervisor exits when all have; a second signal is forwarded
  too (LiveKit's worker then exits at once);
- restarts a process that exits while nothing asked it to (a crash costs the conversations
  of that process, not the machine's capacity), after a delay that doubles from
  ``restart_delay`` up to ``max_restart_delay`` and starts over once a process has run for
  ``healthy_after`` seconds;
- gives up when a process fails ``max_quick_failures`` times in a row without running
  ``healthy_after`` seconds (bad credentials, an entrypoint that cannot import): then it stops
  the others (drain) and exits with status 1 rather than restarting forever.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence

import trio

__all__ = ["WorkerPool"]

logger = logging.getLogger("agents_trio.worker_pool")


@dataclasses.dataclass
class _Slot:
    index: int
    command: list[str]
    process: trio.Process | None = None
    signals_received: int = 0   # by the current process, of the pool's stop signals
    starts: int = 0
    quick_failures: int = 0


class WorkerPool:
    """Run and supervise one worker process per command (see the module docstring).

    Args:
        commands: One command line per process.
        env: The processes' environment (default: this process's).
        restart_delay: Seconds before the first restart of a process that exited.
        max_restart_delay: The longest delay between restarts.
        healthy_after: A process that ran this long resets its delay and failure count.
        max_quick_failures: Consecutive short-lived runs of one process before giving up.
    """

    def __init__(self, commands: Sequence[Sequence[str]], *,
                 env: Mapping[str, str] | None = None, restart_delay: float = 1.0,
                 max_restart_delay: float = 30.0, healthy_after: float = 60.0,
                 max_quick_failures: int = 5) -> None:
        if not commands:
            raise ValueError("a worker pool needs at least one process")
        if restart_delay < 0 or max_restart_delay < restart_delay:
            raise ValueError("need 0 <= restart_delay <= max_restart_delay")
        if max_quick_failures < 1:
            raise ValueError("max_quick_failures must be at least 1")
        self.slots = [_Slot(i, list(c)) for i, c in enumerate(commands)]
        self.env = dict(env) if env is not None else None
        self.restart_delay = restart_delay
        self.max_restart_delay = max_restart_delay
        self.healthy_after = healthy_after
        self.max_quick_failures = max_quick_failures
        self.stopping = False
        self.failed = False
        self._stopped = trio.Event()
        self._signals_sent = 0

    async def run(self) -> int:
        """Run until every process has exited after :meth:`stop` (or a signal); returns the
        exit status (0, or 1 when a process kept failing).

        Cancellation: cancelling kills the processes (SIGKILL) and waits for them.
        """
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._forward_signals)
            async with trio.open_nursery() as slots:
                for slot in self.slots:
                    slots.start_soon(self._supervise, slot)
            nursery.cancel_scope.cancel()
        return 1 if self.failed else 0

    def stop(self) -> None:
        """Ask every process to drain and exit (SIGTERM); a second call repeats the signal
        (LiveKit's worker then exits at once). Must be called in the pool's Trio run."""
        self.stopping = True
        self._stopped.set()
        self._signals_sent += 1
        for slot in self.slots:
            self._signal_owed(slot)

    def _signal_owed(self, slot: _Slot) -> None:
        """Send the slot's process the stop signals the pool sent and it has not had yet
        (SIGTERM, then SIGINT): also a process that was being started when they went out."""
        process = slot.process
        while (process is not None and process.returncode is None
               and slot.signals_received < self._signals_sent):
            slot.signals_received += 1
            process.send_signal(signal.SIGTERM if slot.signals_received == 1
                                else signal.SIGINT)

    async def _forward_signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as received:
            async for signum in received:
                logger.info("signal %s: stopping %d worker processes",
                            signal.Signals(signum).name, len(self.slots))
                self.stop()

    async def _supervise(self, slot: _Slot) -> None:
        delay = self.restart_delay
        while not self.stopping:
            started = trio.current_time()
            slot.starts += 1
            # a session of its own: a terminal's Ctrl+C (sent to the whole foreground group)
            # reaches the supervisor alone, which forwards it once; twice would force-exit
            process = await trio.lowlevel.open_process(
                slot.command, env=self.env, stdin=subprocess.DEVNULL, start_new_session=True)
            slot.process, slot.signals_received = process, 0
            self._signal_owed(slot)  # a stop that came while it was being started
            try:
                status = await process.wait()
            finally:
                if process.returncode is None:  # cancelled: do not leave it behind
                    process.kill()
                    with trio.CancelScope(shield=True):
                        await process.wait()
            if self.stopping:
                return
            ran = trio.current_time() - started
            if ran >= self.healthy_after:
                slot.quick_failures = 0
                delay = self.restart_delay
            else:
                slot.quick_failures += 1
            if slot.quick_failures >= self.max_quick_failures:
                logger.error("worker process %d exited %d times in a row within %.0f s of "
                             "starting (last status %s): stopping", slot.index,
                             slot.quick_failures, self.healthy_after, status)
                self.failed = True
                self.stop()
                return
            logger.warning("worker process %d exited with status %s after %.1f s; "
                           "restarting in %.1f s", slot.index, status, ran, delay)
            with trio.move_on_after(delay):
                await self._stopped.wait()
            delay = min(delay * 2, self.max_restart_delay)


def child_environment(url: str, api_key: str, api_secret: str) -> dict[str, str]:
    """This process's environment with the server and credentials set (they go to the
    children through the environment, not their command lines)."""
    env = dict(os.environ)
    env.update(LIVEKIT_URL=url, LIVEKIT_API_KEY=api_key, LIVEKIT_API_SECRET=api_secret)
    return env
