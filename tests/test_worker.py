"""Worker mode without a server: the job entrypoint adapter, driven by a fake LiveKit job
context on a plain asyncio loop (like LiveKit's job process), runs the Trio entrypoint in its
own thread with its own bridge and room. Registration with a real server is tested in
tests/test_livekit_server.py (needs LIVEKIT_URL)."""

from __future__ import annotations

import asyncio
import pickle
import socket
import threading
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from livekit import rtc

pytest.importorskip("livekit.agents", reason="worker mode needs livekit-agents")

from agents_trio import Agent, AgentSession
from agents_trio.io.room import RoomConnectError
from agents_trio.job import JobContext
from agents_trio.job_host import JobHost
from agents_trio.testing import FakeRemoteParticipant, open_fake_room
from agents_trio.worker import TrioJobEntrypoint, create_agent_server


class FakeLiveKitJobContext:
    """The part of ``livekit.agents.JobContext`` the adapter uses."""

    def __init__(self, url: str = "wss://fake", token: str = "t") -> None:
        self._info = SimpleNamespace(url=url, token=token, job=SimpleNamespace(id="AJ_test"))
        self.shutdowns: list[str] = []

    def shutdown(self, reason: str = "") -> None:
        self.shutdowns.append(reason)


def run_asyncio(coro: Any) -> Any:
    loop = asyncio.SelectorEventLoop()  # a plain asyncio loop, as in LiveKit's job process
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, 30))
    finally:
        loop.close()


class Recorder(Agent):
    exits: list[str] = []

    def __init__(self) -> None:
        super().__init__(instructions="hi")

    async def on_exit(self) -> None:
        Recorder.exits.append(trio.lowlevel.current_trio_token().__class__.__name__)


results: dict[str, Any] = {}


async def leaving_participant(ctx: JobContext) -> None:
    user = FakeRemoteParticipant("user")
    ctx.bridge.call_soon(ctx.room.join, user)
    await ctx.wait_for_participant()

    session = AgentSession()
    listening = trio.Event()
    session.on("agent_state_changed",
               lambda ev: listening.set() if ev.new_state == "listening" else None)

    async def leave() -> None:
        await listening.wait()  # linked and started: the leave ends the session
        ctx.bridge.call_soon(ctx.room.leave, user, rtc.DisconnectReason.CLIENT_INITIATED)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(leave)
        results["reason"] = await ctx.run_session(session, Recorder())
    results["job_id"] = ctx.job_id


def test_a_dispatched_job_runs_the_trio_entrypoint_and_ends_the_job() -> None:
    job = FakeLiveKitJobContext()
    run_asyncio(TrioJobEntrypoint(leaving_participant, open_room_fn=open_fake_room)(job))
    assert results["reason"] == "participant_disconnected"
    assert results["job_id"] == "AJ_test"
    assert job.shutdowns == ["agents_trio entrypoint finished"]


async def session_forever(ctx: JobContext) -> None:
    await ctx.run_session(AgentSession(), Recorder())


def test_livekit_cancelling_the_job_closes_the_trio_session() -> None:
    Recorder.exits.clear()
    job = FakeLiveKitJobContext()

    async def main() -> None:
        task = asyncio.ensure_future(
            TrioJobEntrypoint(session_forever, open_room_fn=open_fake_room)(job))
        await asyncio.sleep(0.3)
        task.cancel()  # what LiveKit does when the job must end
        with pytest.raises(asyncio.CancelledError):
            await task

    run_asyncio(main())
    assert Recorder.exits == ["TrioToken"]  # on_exit ran, on the Trio thread
    assert job.shutdowns == ["agents_trio entrypoint cancelled"]


announce: dict[str, Any] = {}


async def session_announced(ctx: JobContext) -> None:
    """Tells the asyncio side (thread-safely) once the session listens; records its close."""
    session = AgentSession()
    session.on("close", lambda ev: results.__setitem__("close_reason", ev.reason))

    def on_state(ev: Any) -> None:
        if ev.new_state == "listening":
            announce["loop"].call_soon_threadsafe(announce["listening"].set)

    session.on("agent_state_changed", on_state)
    await ctx.run_session(session, Recorder())


def test_livekit_cancelling_the_job_closes_the_session_with_job_shutdown() -> None:
    """Issue 15, item 21: it closed with ``user_initiated``."""
    results.pop("close_reason", None)
    job = FakeLiveKitJobContext()

    async def main() -> None:
        announce["loop"] = asyncio.get_running_loop()
        announce["listening"] = asyncio.Event()
        task = asyncio.ensure_future(
            TrioJobEntrypoint(session_announced, open_room_fn=open_fake_room)(job))
        await announce["listening"].wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run_asyncio(main())
    assert results["close_reason"] == "job_shutdown"
    assert job.shutdowns == ["agents_trio entrypoint cancelled"]


def test_a_job_that_cannot_connect_fails_with_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    job = FakeLiveKitJobContext(url=f"ws://127.0.0.1:{port}")
    with pytest.raises(RoomConnectError, match="unreachable"):
        run_asyncio(TrioJobEntrypoint(session_forever)(job))
    assert len(job.shutdowns) == 1 and "RoomConnectError" in job.shutdowns[0]


def test_the_entrypoint_adapter_pickles_for_the_process_pool() -> None:
    entry = TrioJobEntrypoint("examples/livekit_agent.py:entrypoint")
    clone = pickle.loads(pickle.dumps(entry))
    assert clone.entrypoint == entry.entrypoint
    assert pickle.loads(pickle.dumps(TrioJobEntrypoint(session_forever))).entrypoint is (
        session_forever)


def test_create_agent_server_registers_the_trio_entrypoint() -> None:
    server = create_agent_server("app:entrypoint", agent_name="support", ws_url="wss://x",
                                 api_key="k", api_secret="s")
    assert isinstance(server._entrypoint_fnc, TrioJobEntrypoint)
    assert server._entrypoint_fnc.entrypoint == "app:entrypoint"
    assert server._agent_name == "support"


# -- LiveKit's own AgentServer, packing jobs on one job host -----------------------------------
class JobLog:
    """What the Trio entrypoints of one test did, shared with the test's asyncio loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fail_index: int | None = None) -> None:
        self.loop = loop
        self.fail_index = fail_index
        self.started: list[dict[str, Any]] = []
        self.closed: dict[str, str] = {}
        self.changed = asyncio.Event()

    def record(self, **fields: Any) -> dict[str, Any]:
        entry = dict(fields)
        self.started.append(entry)
        self.loop.call_soon_threadsafe(self.changed.set)
        return entry

    def close(self, job_id: str, reason: str) -> None:
        self.closed[job_id] = reason
        self.loop.call_soon_threadsafe(self.changed.set)

    async def until(self, predicate: Any) -> None:
        """Wait (positive witness: re-checked whenever an entrypoint records something)."""
        while not predicate():
            self.changed.clear()
            await self.changed.wait()

    def leave_all(self) -> None:
        """Every user leaves its room (from the test's thread, through the host's run)."""
        for entry in self.started:
            if "user" in entry:
                ctx = entry["ctx"]
                entry["token"].run_sync_soon(ctx.bridge.call_soon, ctx.room.leave, entry["user"],
                                             rtc.DisconnectReason.CLIENT_INITIATED)


LOG: dict[str, JobLog] = {}


async def packed_conversation(ctx: JobContext) -> None:
    log = LOG["current"]
    index = len(log.started)
    entry = log.record(job_id=ctx.job_id, token=trio.lowlevel.current_trio_token(),
                       thread=threading.get_ident(), bridge=ctx.bridge, ctx=ctx,
                       set_up=ctx.proc.userdata.get("set_up"))
    if index == log.fail_index:
        raise RuntimeError("this job fails")
    user = FakeRemoteParticipant("user")
    ctx.bridge.call_soon(ctx.room.join, user)
    await ctx.wait_for_participant()
    session = AgentSession()
    session.on("close", lambda ev: log.close(str(ctx.job_id), ev.reason))

    def on_state(ev: Any) -> None:
        if ev.new_state == "listening":  # started: a shutdown now closes it
            entry["listening"] = True
            log.loop.call_soon_threadsafe(log.changed.set)

    session.on("agent_state_changed", on_state)
    entry["user"] = user
    await ctx.run_session(session, Recorder())


def packed_server(host: JobHost, **options: Any) -> Any:
    return create_agent_server(packed_conversation, job_host=host, open_room_fn=open_fake_room,
                               num_idle_processes=2, port=0, shutdown_grace=2.0,
                               ws_url="ws://fake", api_key="key", api_secret="secret-of-32-bytes-for-the-jwt-hmac",
                               **options)


def job_threads() -> int:
    """LiveKit's job threads alive (its THREAD executor names them so)."""
    return sum(t.name == "job_thread_runner" for t in threading.enumerate())


EXECUTORS = {"hosted": {}, "livekit-thread": {"job_executor_type": "thread"}}


async def started_server(server: Any) -> asyncio.Task[None]:
    up = asyncio.Event()
    server.on("worker_started", lambda: up.set())
    task = asyncio.ensure_future(server.run(unregistered=True))
    await up.wait()
    return task


async def until_jobs(server: Any, count: int) -> None:
    while len(server.active_jobs) != count:  # LiveKit's own job table
        await asyncio.sleep(0.02)


@pytest.mark.parametrize("executor", EXECUTORS)
def test_agent_server_packs_many_jobs_on_one_trio_run_and_one_failing_does_not_matter(
        executor: str) -> None:
    from livekit.agents import JobExecutorType

    options = {k: JobExecutorType(v) for k, v in EXECUTORS[executor].items()}
    host = JobHost(name="packed jobs")

    async def main() -> None:
        log = LOG["current"] = JobLog(asyncio.get_running_loop(), fail_index=2)
        server = packed_server(host, **options)
        run = await started_server(server)
        try:
            for i in range(6):
                await server.simulate_job(f"room-{i}", fake_job=True)
            await log.until(lambda: sum("listening" in e for e in log.started) == 5)
            # LiveKit's THREAD executor: a thread per job (and per idle one); hosted: none
            assert (job_threads() >= 5) == (executor == "livekit-thread")
            # one Trio run and one bridge for all six jobs, in the host's thread
            assert {e["token"] for e in log.started} == {host.run_token}
            assert {e["thread"] for e in log.started} == {host._thread.ident}
            assert len({id(e["bridge"]) for e in log.started}) == 1
            assert len({e["job_id"] for e in log.started}) == 6
            # the failed job ended its LiveKit job; the five others run on
            await asyncio.wait_for(until_jobs(server, 5), 10)
            assert host.jobs_running == 5 and log.closed == {}
            # draining waits for the running jobs, which end when their users leave
            drain = asyncio.ensure_future(server.drain(timeout=30))
            while not server.draining:
                await asyncio.sleep(0.01)
            assert not drain.done()
            log.leave_all()
            await drain
            assert sorted(log.closed.values()) == ["participant_disconnected"] * 5
            assert server.active_jobs == [] and host.jobs_running == 0
        finally:
            await server.aclose()
            await run

    try:
        run_asyncio_long(main())
    finally:
        host.close(10)


def run_asyncio_long(coro: Any, timeout: float = 60) -> Any:
    loop = asyncio.SelectorEventLoop()
    try:
        return loop.run_until_complete(asyncio.wait_for(coro, timeout))
    finally:
        loop.close()


def test_closing_the_agent_server_shuts_running_jobs_down_with_job_shutdown() -> None:
    """LiveKit's shutdown of a job still running (the worker closing after its drain, or a
    termination): LiveKit waits its 15 s for the entrypoint, then cancels it, and the Trio
    sessions close with ``job_shutdown`` within their grace."""
    host = JobHost(name="packed jobs")

    async def main() -> None:
        log = LOG["current"] = JobLog(asyncio.get_running_loop())
        server = packed_server(host)
        run = await started_server(server)
        try:
            for i in range(3):
                await server.simulate_job(f"room-{i}", fake_job=True)
            await log.until(lambda: sum("listening" in e for e in log.started) == 3)
        finally:
            await server.aclose()
            await run
        assert sorted(log.closed.values()) == ["job_shutdown"] * 3
        assert host.jobs_running == 0 and not host.closed

    try:
        run_asyncio_long(main())
    finally:
        host.close(10)


def job_statuses(server: Any) -> dict[str, list[str]]:
    """The job status updates the server sent so far (an unregistered server queues them)."""
    from livekit.agents.utils.aio.channel import ChanEmpty
    from livekit.protocol import agent

    statuses: dict[str, list[str]] = {}
    while True:
        try:
            msg = server._msg_chan.recv_nowait()
        except ChanEmpty:
            return statuses
        if msg.WhichOneof("message") == "update_job":
            statuses.setdefault(msg.update_job.job_id, []).append(
                agent.JobStatus.Name(msg.update_job.status))


def test_hosted_jobs_are_set_up_ahead_each_with_its_process_and_report_their_status(
        ) -> None:
    """LiveKit's pool contract, hosted: ``num_idle_processes`` jobs set up ahead (the
    server's setup runs in a worker thread, each job with its own ``JobProcess``), topped up
    after each launch; the server hears of each job's start and end (a job that raised:
    failed; one that finished or was shut down: success)."""
    host = JobHost(name="hosted jobs")
    setups: list[int] = []

    def setup(proc: Any) -> None:
        proc.userdata["set_up"] = len(setups)
        setups.append(threading.get_ident())

    async def main() -> None:
        log = LOG["current"] = JobLog(asyncio.get_running_loop(), fail_index=1)
        server = packed_server(host, setup_fnc=setup)
        run = await started_server(server)
        try:
            assert len(setups) == 2 and threading.get_ident() not in setups
            for i in range(3):
                await server.simulate_job(f"room-{i}", fake_job=True)
            await log.until(lambda: sum("listening" in e for e in log.started) == 2)
            # each job got a process set up for it alone (the third its own set-up, which
            # may end after the two top-ups started before it); two more are ready for the next
            assert len({e["set_up"] for e in log.started}) == 3
            assert {e["set_up"] for e in log.started} <= set(range(5))
            await asyncio.wait_for(until_jobs(server, 2), 10)
            while len(setups) < 5:
                await asyncio.sleep(0.01)
            failed = log.started[1]["job_id"]
            log.leave_all()
            await server.drain(timeout=30)
            statuses = job_statuses(server)
            assert statuses[failed] == ["JS_RUNNING", "JS_FAILED"]
            assert sorted(statuses) == sorted(e["job_id"] for e in log.started)
            assert all(s == ["JS_RUNNING", "JS_SUCCESS"]
                       for job_id, s in statuses.items() if job_id != failed)
            assert server.active_jobs == [] and job_threads() == 0
        finally:
            await server.aclose()
            await run
        assert len(setups) == 5  # no job is set up once the server closes

    try:
        run_asyncio_long(main())
    finally:
        host.close(10)


def test_a_hosted_job_whose_setup_fails_is_not_launched_and_the_next_one_is(
        caplog: pytest.LogCaptureFixture) -> None:
    host = JobHost(name="hosted jobs")
    broken = [True]

    def setup(proc: Any) -> None:
        if broken[0]:
            raise ValueError("the model did not load")
        proc.userdata["set_up"] = "yes"

    async def main() -> None:
        log = LOG["current"] = JobLog(asyncio.get_running_loop())
        server = packed_server(host, setup_fnc=setup)
        run = await started_server(server)
        try:
            # the idle set-ups failed (logged); the job's own set-up fails: it is not run
            with pytest.raises(ValueError, match="did not load"):
                await server.simulate_job("room-0", fake_job=True)
            assert server.active_jobs == [] and log.started == []
            broken[0] = False
            await server.simulate_job("room-1", fake_job=True)
            await log.until(lambda: any("listening" in e for e in log.started))
            assert [e["set_up"] for e in log.started] == ["yes"]
            log.leave_all()
            await server.drain(timeout=30)
        finally:
            await server.aclose()
            await run

    try:
        run_asyncio_long(main())
    finally:
        host.close(10)
    assert "setting up a hosted job failed" in caplog.text


def test_closing_the_server_while_hosted_jobs_are_set_up_and_starting_leaves_nothing(
        ) -> None:
    """The server closes while jobs start and idle ones are still being set up (slow
    set-ups): every started session closes with ``job_shutdown``, every executor is gone,
    no job runs on the host, and nothing is set up after the close."""
    host = JobHost(name="hosted jobs")
    setups: list[str] = []
    calls: list[int] = []
    two_top_ups_loading = threading.Event()
    loaded = threading.Event()

    def setup(proc: Any) -> None:
        calls.append(len(calls))
        if len(calls) > 2:  # the two idle jobs set up at start pass; the top-ups load a model
            if len(calls) == 4:
                two_top_ups_loading.set()
            loaded.wait(20)  # in the set-up's worker thread, until the test lets it finish
        setups.append("done")

    async def main() -> None:
        log = LOG["current"] = JobLog(asyncio.get_running_loop())
        server = packed_server(host, setup_fnc=setup)
        run = await started_server(server)
        pool = server._proc_pool
        starting: list[asyncio.Future[Any]] = []
        try:
            for i in range(2):  # they take the idle jobs
                await server.simulate_job(f"room-{i}", fake_job=True)
            await log.until(lambda: sum("listening" in e for e in log.started) == 2)
            # two more wait for their own set-up, which is loading
            starting = [asyncio.ensure_future(server.simulate_job(f"room-{i}", fake_job=True))
                        for i in (2, 3)]
            assert await asyncio.to_thread(two_top_ups_loading.wait, 20)
        finally:
            closing = asyncio.ensure_future(server.aclose())
            await asyncio.sleep(0)  # the close has begun while the set-ups load
            loaded.set()
            await asyncio.wait_for(closing, 20)
            await run
            await asyncio.gather(*starting, return_exceptions=True)
        assert pool.processes == [] and host.jobs_running == 0
        assert set(log.closed.values()) <= {"job_shutdown"}
        assert set(log.closed) >= {e["job_id"] for e in log.started if "listening" in e}
        assert any("listening" in e for e in log.started)  # the close found sessions running
        done = len(setups)
        await asyncio.sleep(0.5)
        assert len(setups) <= done + 2  # the set-ups already in their threads, no new one

    try:
        run_asyncio_long(main())
    finally:
        host.close(10)


def test_create_agent_server_packs_jobs_and_reports_the_hosts_load() -> None:
    from livekit.agents import JobExecutorType

    from agents_trio.job_host import job_host_load
    from agents_trio.worker import PrepareJobThread

    from agents_trio.worker import PackedAgentServer

    calls: list[str] = []
    server = create_agent_server("app:entrypoint", ws_url="wss://x", api_key="k",
                                 api_secret="s", setup_fnc=lambda proc: calls.append("setup"))
    assert isinstance(server, PackedAgentServer)  # hosted jobs: no thread per job
    assert server._job_executor_type is JobExecutorType.THREAD  # jobs share the process
    assert server.load_fnc is job_host_load
    assert isinstance(server.setup_fnc, PrepareJobThread)
    host = JobHost()
    try:
        own = create_agent_server("app:entrypoint", job_host=host, ws_url="wss://x",
                                  api_key="k", api_secret="s")
        assert own.load_fnc == host.load
        assert isinstance(own._entrypoint_fnc, TrioJobEntrypoint)
        assert own._entrypoint_fnc.job_host is host
        explicit = create_agent_server("app:entrypoint", ws_url="wss://x", api_key="k",
                                       api_secret="s", job_executor_type=JobExecutorType.PROCESS)
        assert explicit._job_executor_type is JobExecutorType.PROCESS
        assert not isinstance(explicit, PackedAgentServer)
        with pytest.raises(TypeError, match="job_executor_type"):
            PackedAgentServer(own._entrypoint_fnc, job_executor_type=JobExecutorType.THREAD)
    finally:
        host.close()
    assert pickle.loads(pickle.dumps(PrepareJobThread())).setup is None


def test_livekit_cancelling_one_packed_job_shuts_down_that_job_alone() -> None:
    """Two jobs on one host, each awaited by its own asyncio task as LiveKit's job threads do:
    cancelling one closes its session with ``job_shutdown``; the other runs on."""
    host = JobHost(name="packed jobs")
    host.start()

    async def main() -> None:
        log = LOG["current"] = JobLog(asyncio.get_running_loop())
        jobs = [FakeLiveKitJobContext() for _ in range(2)]
        for i, job in enumerate(jobs):
            job._info.job.id = f"AJ_{i}"
        tasks = [asyncio.ensure_future(TrioJobEntrypoint(
            packed_conversation, open_room_fn=open_fake_room, shutdown_grace=2.0,
            job_host=host)(job)) for job in jobs]
        await log.until(lambda: sum("listening" in e for e in log.started) == 2)
        tasks[0].cancel()
        with pytest.raises(asyncio.CancelledError):
            await tasks[0]
        assert log.closed == {"AJ_0": "job_shutdown"}
        assert jobs[0].shutdowns == ["agents_trio entrypoint cancelled"]
        assert not tasks[1].done() and host.jobs_running == 1
        log.leave_all()
        await tasks[1]
        assert log.closed["AJ_1"] == "participant_disconnected"
        assert jobs[1].shutdowns == ["agents_trio entrypoint finished"]

    try:
        run_asyncio_long(main())
    finally:
        host.close(10)


def test_a_file_entrypoint_is_imported_once_for_all_the_jobs_of_a_process(tmp_path: Any) -> None:
    app = tmp_path / "counting_app.py"
    app.write_text("import builtins\n"
                   "builtins.agents_trio_app_imports = "
                   "getattr(builtins, 'agents_trio_app_imports', 0) + 1\n"
                   "async def entrypoint(ctx):\n"
                   "    return None\n")
    import builtins
    host = JobHost()
    host.start()
    try:
        spec = f"{app}:entrypoint"
        for _ in range(3):
            run_asyncio(TrioJobEntrypoint(spec, open_room_fn=open_fake_room,
                                          job_host=host)(FakeLiveKitJobContext()))
        assert builtins.agents_trio_app_imports == 1  # type: ignore[attr-defined]
    finally:
        host.close(10)


def test_a_hosted_job_that_fails_at_once_is_reported_running_then_failed_once() -> None:
    """A job whose entrypoint fails before it ever waits (its module does not import): the
    server reports it running at its launch and failed at its end, once each (not failed
    twice: the status it reads for the launch must not be the job's end, come first)."""
    host = JobHost(name="hosted jobs")

    async def main() -> None:
        server = create_agent_server("agents_trio_no_such_app_module:entrypoint",
                                     job_host=host, open_room_fn=open_fake_room,
                                     num_idle_processes=1, port=0, ws_url="ws://fake",
                                     api_key="key",
                                     api_secret="secret-of-32-bytes-for-the-jwt-hmac")
        run = await started_server(server)
        try:
            await server.simulate_job("room-0", fake_job=True)
            await server.drain(timeout=30)
            await asyncio.gather(*server._job_lifecycle_tasks)  # the status updates queued
            [(_, statuses)] = job_statuses(server).items()
            assert statuses == ["JS_RUNNING", "JS_FAILED"]
            assert server.active_jobs == []
        finally:
            await server.aclose()
            await run

    try:
        run_asyncio_long(main())
    finally:
        host.close(10)
