"""The hosted job executor on its own (LiveKit's ``JobExecutor`` protocol), on a plain asyncio
loop with an entrypoint that only records: every way a job ends is seen once by ``join`` and
gives a status. Then the pool on its own, attacked: closed while jobs are set up, launched or
running, executors closed during their set-up, set-ups failing, hanging or timing out, and
(Hypothesis) any interleaving of these. The pool with LiveKit's own ``AgentServer`` is in
tests/test_worker.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("livekit.agents", reason="hosted jobs need livekit-agents")

from livekit.agents.ipc.job_executor import JobStatus

from agents_trio.hosted_jobs import HostedJob, HostedJobPool


class Entrypoint:
    def __init__(self, outcome: str) -> None:
        self.outcome = outcome
        self.calls: list[str] = []
        self.cancelled = False

    async def run_hosted(self, info: Any, *, proc: Any, inference_executor: Any) -> None:
        self.calls.append(info.job.id)
        if self.outcome == "raise":
            raise RuntimeError("the entrypoint failed")
        if self.outcome == "wait":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise


def info(job_id: str = "AJ_1") -> Any:
    return SimpleNamespace(job=SimpleNamespace(id=job_id, room=SimpleNamespace(name="room")))


async def launched(entrypoint: Entrypoint, setup: Any = None) -> HostedJob:
    job = HostedJob(entrypoint=entrypoint, setup=setup, inference_executor=None,
                    http_proxy=None, initialize_timeout=5)
    await job.start()
    await job.initialize()
    await job.launch_job(info())
    return job


@pytest.mark.parametrize(("outcome", "status"), [("return", JobStatus.SUCCESS),
                                                 ("raise", JobStatus.FAILED)])
def test_a_job_that_ends_by_itself_is_joined_with_its_status(outcome: str,
                                                             status: JobStatus) -> None:
    async def main() -> None:
        entrypoint = Entrypoint(outcome)
        job = await launched(entrypoint)
        assert job.status is JobStatus.RUNNING and job.running_job is not None
        await asyncio.wait_for(job.join(), 5)
        assert job.status is status and entrypoint.calls == ["AJ_1"]

    asyncio.run(main())


@pytest.mark.parametrize("moment", ["before its first step", "while it runs"])
def test_closing_a_job_at_any_moment_ends_it_once_as_a_shutdown(moment: str) -> None:
    async def main() -> None:
        entrypoint = Entrypoint("wait")
        job = await launched(entrypoint)
        if moment == "while it runs":
            await asyncio.sleep(0)
            assert entrypoint.calls == ["AJ_1"]
        await job.aclose()  # in this task: it cancels before the job's task is stepped
        await asyncio.wait_for(job.join(), 5)
        assert job.status is JobStatus.SUCCESS
        assert entrypoint.cancelled == (moment == "while it runs")
        with pytest.raises(RuntimeError, match="already runs"):
            await job.launch_job(info("AJ_2"))

    asyncio.run(main())


def test_cancelling_the_closer_cancels_only_its_wait() -> None:
    async def main() -> None:
        entrypoint = Entrypoint("wait")
        job = await launched(entrypoint)
        await asyncio.sleep(0)
        closer = asyncio.ensure_future(job.aclose())
        await asyncio.sleep(0)
        closer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closer
        await asyncio.wait_for(job.join(), 5)  # the job still ended
        assert entrypoint.cancelled

    asyncio.run(main())


def test_setup_runs_in_a_worker_thread_and_a_failed_one_leaves_the_job_unlaunchable() -> None:
    threads: list[int] = []

    def setup(proc: Any) -> None:
        threads.append(threading.get_ident())
        raise ValueError("no model")

    async def main() -> None:
        job = HostedJob(entrypoint=Entrypoint("return"), setup=setup, inference_executor=None,
                        http_proxy=None, initialize_timeout=5)
        await job.start()
        with pytest.raises(ValueError, match="no model"):
            await job.initialize()
        assert threads and threads[0] != threading.get_ident()
        with pytest.raises(RuntimeError, match="not initialized"):
            await job.launch_job(info())

    asyncio.run(main())


# -- the pool attacked -------------------------------------------------------------------------


POOL_EVENTS = ("process_created", "process_started", "process_ready", "process_job_launched",
               "process_closed")


def pool(entrypoint: Entrypoint, setup: Any = None, *, num_idle: int = 1,
         initialize_timeout: float = 20) -> tuple[HostedJobPool, dict[str, list[str]]]:
    """A pool and what it told the server, per executor, in order."""
    p = HostedJobPool(entrypoint=entrypoint, setup=setup, inference_executor=None,
                      http_proxy=None, initialize_timeout=initialize_timeout,
                      close_timeout=10, num_idle=num_idle)
    heard: dict[str, list[str]] = {}
    for event in POOL_EVENTS:
        p.on(event, lambda e, event=event: heard.setdefault(e.id, []).append(event))
    return p, heard


class BlockingSetUp:
    """A ``setup_fnc`` that blocks in its thread until released (a model loading)."""

    def __init__(self, fail: str | None = None) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.fail = fail

    def __call__(self, proc: Any) -> None:
        self.entered.set()
        self.release.wait(30)
        if self.fail is not None:
            raise ValueError(self.fail)

    async def until_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, 20)


def test_an_executor_closed_during_its_set_up_is_not_kept_idle_and_the_next_launch_runs(
        ) -> None:
    """LiveKit's termination (``aclose``) of an executor whose set-up is still loading: it
    ends there (reported closed once, never ready after) and is never handed a job; the next
    launch runs on a job set up for it."""
    set_up = BlockingSetUp()

    async def main() -> None:
        entrypoint = Entrypoint("wait")
        p, heard = pool(entrypoint, set_up)
        starting = asyncio.ensure_future(p.start())
        await set_up.until_entered()
        [closed] = p.processes
        await asyncio.wait_for(closed.aclose(), 10)
        assert closed not in p.processes
        set_up.release.set()
        await asyncio.wait_for(starting, 10)
        await asyncio.wait_for(p.launch_job(info()), 10)
        launched = p.get_by_job_id("AJ_1")
        assert launched is not None and launched is not closed
        await asyncio.wait_for(p.aclose(), 10)
        assert launched.status is JobStatus.SUCCESS and entrypoint.calls == ["AJ_1"]
        assert p.processes == []
        assert heard[closed.id][-1] == "process_closed"
        assert heard[closed.id].count("process_closed") == 1
        assert "process_ready" not in heard[closed.id]

    asyncio.run(main())


def test_closing_the_pool_ends_a_launch_that_waits_for_its_set_up() -> None:
    """The pool closes while a launch waits for the set-up of its job: the launch fails at
    once (nothing of it is left waiting once ``aclose`` returned) and its executor is closed,
    never reported ready after."""
    set_up = BlockingSetUp()

    async def main() -> None:
        p, heard = pool(Entrypoint("return"), set_up, num_idle=0)
        await p.start()
        launch = asyncio.ensure_future(p.launch_job(info()))
        await set_up.until_entered()
        try:
            await asyncio.wait_for(p.aclose(), 10)
            with pytest.raises(RuntimeError, match="closed"):
                await asyncio.wait_for(launch, 10)
        finally:
            set_up.release.set()
        assert p.processes == []
        [events] = heard.values()
        assert events[-1] == "process_closed" and "process_ready" not in events

    asyncio.run(main())


def test_a_set_up_abandoned_by_its_timeout_that_fails_later_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    set_up = BlockingSetUp(fail="the model failed to load, late")

    async def main() -> None:
        job = HostedJob(entrypoint=Entrypoint("return"), setup=set_up, inference_executor=None,
                        http_proxy=None, initialize_timeout=0.05)
        await job.start()
        with pytest.raises(TimeoutError):
            await job.initialize()  # the set-up blocks until released: the timeout fires
        set_up.release.set()

        async def logged() -> None:
            while "failed to load, late" not in caplog.text:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(logged(), 10)

    with caplog.at_level(logging.ERROR, logger="agents_trio.hosted_jobs"):
        asyncio.run(main())


def test_a_hung_set_up_does_not_hold_a_thread_of_the_loops_default_executor() -> None:
    """A ``setup_fnc`` that never returns (a model download stuck) times out; its thread
    cannot be stopped, but it must not be one of the loop's default executor's few workers
    (min(32, cores + 4); one here), which the worker's loop needs for DNS lookups and which
    its shutdown joins."""
    set_up = BlockingSetUp()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(max_workers=1))
        job = HostedJob(entrypoint=Entrypoint("return"), setup=set_up, inference_executor=None,
                        http_proxy=None, initialize_timeout=0.05)
        await job.start()
        try:
            with pytest.raises(TimeoutError):
                await job.initialize()
            assert await asyncio.wait_for(loop.run_in_executor(None, int, "7"), 10) == 7
        finally:
            set_up.release.set()

    asyncio.run(main())


def test_the_idle_target_holds_when_a_launch_takes_a_job_the_moment_it_is_set_up() -> None:
    """One idle job wanted: a launch takes it and a replacement is set up; a second launch
    takes the replacement in the very step its set-up ends. A new one must be set up for the
    target to hold (the set-up that just ended must not count as still setting one up)."""
    async def main() -> None:
        p, _ = pool(Entrypoint("wait"), num_idle=1)
        await p.start()
        await p.launch_job(info("AJ_1"))  # takes the idle job; a replacement is being set up
        second = asyncio.ensure_future(p.launch_job(info("AJ_2")))  # runs right after it

        async def spare() -> None:
            while not [e for e in p.processes if e.running_job is None]:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(second, 10)
        await asyncio.wait_for(spare(), 10)
        await asyncio.wait_for(p.aclose(), 10)

    asyncio.run(main())


# -- the pool under any interleaving -----------------------------------------------------------


class Behaving:
    """A hosted entrypoint whose every job does what its id says: ``return``, ``raise``,
    ``wait`` (until cancelled) or ``stubborn`` (waits, and unwinds a while once cancelled)."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.unwound: list[str] = []

    async def run_hosted(self, info: Any, *, proc: Any, inference_executor: Any) -> None:
        job_id = info.job.id
        self.ran.append(job_id)
        behaviour = job_id.split("-")[0]
        try:
            if behaviour == "raise":
                raise RuntimeError(f"{job_id} failed")
            if behaviour in ("wait", "stubborn"):
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    if behaviour == "stubborn":
                        for _ in range(5):
                            await asyncio.sleep(0)
                    raise
        finally:
            self.unwound.append(job_id)


class SetUps:
    """A ``setup_fnc`` whose calls do what the plan says, in turn: ``ok``, ``fail``, or
    ``gate`` (blocks until the gate opens, then passes)."""

    def __init__(self, plan: list[str]) -> None:
        self.plan = plan
        self.calls = 0
        self.lock = threading.Lock()
        self.gate = threading.Event()

    def __call__(self, proc: Any) -> None:
        with self.lock:
            what = self.plan[self.calls % len(self.plan)]
            self.calls += 1
        if what == "fail":
            raise ValueError("the set-up failed")
        if what == "gate":
            self.gate.wait(30)


OPS = st.one_of(
    st.tuples(st.just("launch"), st.sampled_from(["return", "raise", "wait", "stubborn"])),
    st.tuples(st.just("terminate"), st.integers(0, 5)),      # LiveKit's termination of a job
    st.tuples(st.just("close_spare"), st.integers(0, 3)),    # an executor without a job closed
    st.tuples(st.just("cancel_launch"), st.integers(0, 5)),  # a launch given up
    st.tuples(st.just("target"), st.integers(0, 3)),
    st.tuples(st.just("steps"), st.integers(1, 4)),
    st.tuples(st.just("open_gate"), st.just(0)),
    st.tuples(st.just("close_pool"), st.just(0)),
)


@settings(deadline=None, max_examples=60)
@given(ops=st.lists(OPS, max_size=14), plan=st.lists(st.sampled_from(["ok", "fail", "gate"]),
                                                     min_size=1, max_size=4),
       num_idle=st.integers(0, 2), threaded=st.booleans())
def test_the_pool_keeps_its_contract_under_any_interleaving(
        ops: list[tuple[str, int | str]], plan: list[str], num_idle: int,
        threaded: bool) -> None:
    """Whatever the order of launches, terminations, closes of spare executors, launches
    given up, idle targets, set-ups passing, failing or loading, and the pool's close: every
    executor is reported created first and closed exactly once and last, is never listed once
    closed, every launched job ran at most once, unwound, and was RUNNING at its launch and
    then had the status of what it did, every launch ends (failing only with what its set-up
    raised or RuntimeError), and after ``aclose`` nothing is listed and no task is left."""
    setups = SetUps(plan)

    async def main() -> None:
        entrypoint = Behaving()
        p, heard = pool(entrypoint, setups if threaded else None, num_idle=num_idle,
                        initialize_timeout=20)
        listed_closed: list[str] = []
        statuses: dict[str, list[JobStatus]] = {}

        def check_listed(*_: Any) -> None:
            listed_closed.extend(e.id for e in p.processes
                                 if "process_closed" in heard.get(e.id, []))

        def status(executor: HostedJob) -> None:
            if executor.running_job is not None:
                statuses.setdefault(executor.running_job.job.id, []).append(executor.status)

        for event in POOL_EVENTS:
            p.on(event, check_listed)
        p.on("process_job_launched", status)
        p.on("process_closed", status)
        launches: list[asyncio.Task[None]] = []
        closes: list[asyncio.Task[None]] = []
        if not threaded or "gate" not in plan:
            await asyncio.wait_for(p.start(), 10)
        try:
            for n, (op, arg) in enumerate(ops):
                if op == "launch":
                    launches.append(asyncio.ensure_future(p.launch_job(info(f"{arg}-{n}"))))
                elif op == "terminate" and statuses:
                    executor = p.get_by_job_id(sorted(statuses)[int(arg) % len(statuses)])
                    if executor is not None:
                        closes.append(asyncio.ensure_future(executor.aclose()))
                elif op == "close_spare":
                    spares = [e for e in p.processes if e.running_job is None]
                    if spares:
                        closes.append(asyncio.ensure_future(
                            spares[int(arg) % len(spares)].aclose()))
                elif op == "cancel_launch" and launches:
                    launches[int(arg) % len(launches)].cancel()
                elif op == "target":
                    p.set_target_idle_processes(int(arg))
                elif op == "steps":
                    for _ in range(int(arg)):
                        await asyncio.sleep(0)
                elif op == "open_gate":
                    setups.gate.set()
                elif op == "close_pool":
                    closes.append(asyncio.ensure_future(p.aclose()))
            await asyncio.wait_for(p.aclose(), 10)  # set-ups may still be loading
            assert p.processes == []
            if launches or closes:
                done, pending = await asyncio.wait(launches + closes, timeout=10)
                assert not pending
        finally:
            setups.gate.set()
        for task in launches:
            if not task.cancelled() and task.exception() is not None:
                assert isinstance(task.exception(), (RuntimeError, ValueError)), task.exception()
        for task in closes:
            assert task.result() is None
        assert [t for t in asyncio.all_tasks() if t is not asyncio.current_task()] == []
        assert listed_closed == []
        for executor_id, events in heard.items():
            assert events[0] == "process_created", (executor_id, events)
            assert events.count("process_closed") == 1, (executor_id, events)
            assert events[-1] == "process_closed", (executor_id, events)
            assert events.count("process_job_launched") <= 1
        assert len(entrypoint.ran) == len(set(entrypoint.ran))
        assert sorted(entrypoint.unwound) == sorted(entrypoint.ran)
        assert set(statuses) >= set(entrypoint.ran)
        for job_id, seen in statuses.items():
            failed = job_id.startswith("raise") and job_id in entrypoint.ran
            assert seen == [JobStatus.RUNNING,
                            JobStatus.FAILED if failed else JobStatus.SUCCESS], (job_id, seen)

    asyncio.run(main())




class _EndsLikeTrioAsyncio(asyncio.SelectorEventLoop):
    """An asyncio loop whose ``call_soon_threadsafe`` fails once it has closed as
    trio-asyncio's does once it has exited (its Trio token is gone): ``AttributeError``, not
    asyncio's ``RuntimeError``."""

    def call_soon_threadsafe(self, callback: Any, *args: Any, context: Any = None) -> Any:  # noqa: ANN401
        if self.is_closed():
            raise AttributeError("'NoneType' object has no attribute 'run_sync_soon'")
        return super().call_soon_threadsafe(callback, *args, context=context)


def test_a_set_up_that_fails_after_its_trio_asyncio_loop_ended_is_logged_not_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    """The worker's loop is a trio-asyncio one: a set-up abandoned by its timeout that fails
    once the loop has ended met ``AttributeError`` from ``call_soon_threadsafe``, which escaped
    from the set-up's thread as an unhandled thread exception (CI printed it). It must be
    logged instead."""
    set_up = BlockingSetUp(fail="the model failed to load, after the worker ended")
    unhandled: list[BaseException | None] = []
    previous_hook = threading.excepthook
    threading.excepthook = lambda args: unhandled.append(args.exc_value)
    before = set(threading.enumerate())

    async def main() -> None:
        job = HostedJob(entrypoint=Entrypoint("return"), setup=set_up, inference_executor=None,
                        http_proxy=None, initialize_timeout=0.05)
        await job.start()
        with pytest.raises(TimeoutError):
            await job.initialize()

    loop = _EndsLikeTrioAsyncio()
    try:
        with caplog.at_level(logging.ERROR, logger="agents_trio.hosted_jobs"):
            try:
                loop.run_until_complete(main())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()
            [thread] = [t for t in threading.enumerate()
                        if t not in before and t.name.startswith("agents_trio set-up")]
            set_up.release.set()
            thread.join(10)
            assert not thread.is_alive()
    finally:
        threading.excepthook = previous_hook
    assert unhandled == []
    assert "after the worker ended" in caplog.text
