"""The job host attacked: jobs that return, fail, hang or outlive their cancellation, callers
cancelled at any moment, from two LiveKit-like job threads at once, and the host closed at any
point of it (before it starts, while it starts, between submissions, while jobs run).

Whatever the interleaving, each caller hears of its job exactly once and what it hears fits
what the job did, every job that began has unwound by the time the host is closed, no job
begins after its host refused it, and the host's thread ends within the close's grace.

These run real threads (the host's run and the callers' asyncio loops are in threads of their
own), so the interleavings are the machine's; Hypothesis draws the plans."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_trio.job_host import JobHost, JobHostError

BEHAVIOURS = ("value", "error", "hang", "stubborn")
CLOSE_GRACE = 10.0  # seconds the test gives close() to end the host's thread


class Boom(Exception):
    pass


@dataclass
class Plan:
    behaviour: str        # value | error | hang (until cancelled) | stubborn (slow to unwind)
    cancel_after: float | None   # the caller cancels its wait after this many seconds
    thread: int           # which of the two job threads submits it


@dataclass
class Record:
    began: list[int] = field(default_factory=list)
    began_in_closing_host: list[int] = field(default_factory=list)
    unwound: list[int] = field(default_factory=list)
    heard: dict[int, list[str]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hear(self, index: int, what: str) -> None:
        with self.lock:
            self.heard.setdefault(index, []).append(what)


async def job_body(index: int, behaviour: str, record: Record) -> str:
    record.began.append(index)   # the host's thread: one writer
    host_nursery = trio.lowlevel.current_task().parent_nursery
    assert host_nursery is not None
    if host_nursery.cancel_scope.cancel_called:
        record.began_in_closing_host.append(index)
    try:
        await trio.sleep(0.001)
        if behaviour == "value":
            return f"job {index}"
        if behaviour == "error":
            raise Boom(index)
        await trio.sleep_forever()
    finally:
        if behaviour == "stubborn":
            with trio.CancelScope(shield=True):
                await trio.sleep(0.02)
        record.unwound.append(index)
    raise AssertionError("unreachable")


def caller_thread(host: JobHost, plans: list[tuple[int, Plan]], record: Record) -> None:
    async def one(index: int, plan: Plan) -> None:
        call = asyncio.ensure_future(host.run(job_body, index, plan.behaviour, record,
                                              name=f"job {index}", cancel_grace=5.0))
        if plan.cancel_after is not None:
            await asyncio.sleep(plan.cancel_after)
            call.cancel()
        try:
            value = await call
        except asyncio.CancelledError:
            record.hear(index, "cancelled")
        except JobHostError:
            record.hear(index, "closed")
        except Boom:
            record.hear(index, "error")
        else:
            record.hear(index, "none" if value is None else "value")

    async def main() -> None:
        await asyncio.gather(*(one(i, p) for i, p in plans))

    loop = asyncio.SelectorEventLoop()  # a plain asyncio loop, as in LiveKit's job threads
    try:
        loop.run_until_complete(asyncio.wait_for(main(), 30))
    finally:
        loop.close()


def allowed(plan: Plan) -> set[str]:
    """What a caller may hear: its job's own ending, or the host's close (which ends a job it
    ran or refuses one), or its own cancellation."""
    heard = {"closed"}
    if plan.behaviour == "value":
        heard.add("value")
    elif plan.behaviour == "error":
        heard.add("error")
    if plan.cancel_after is not None:
        heard.add("cancelled")
    return heard


plans_strategy = st.lists(
    st.builds(Plan, behaviour=st.sampled_from(BEHAVIOURS),
              cancel_after=st.none() | st.sampled_from([0.0, 0.002, 0.01, 0.03]),
              thread=st.integers(0, 1)),
    min_size=1, max_size=6)


CLOSES = {  # when the host is closed: (started first, seconds after the callers begin)
    "never": None, "before start": None,
    "while starting": (False, 0.0), "while starting, a little later": (False, 0.003),
    "at once": (True, 0.0), "soon": (True, 0.005), "later": (True, 0.05)}


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(plans=plans_strategy, close_at=st.sampled_from(sorted(CLOSES)))
def test_every_caller_hears_once_and_every_job_unwinds(plans: list[Plan], close_at: str
                                                       ) -> None:
    for plan in plans:  # a hanging job that nobody cancels ends only by the close
        if close_at == "never" and plan.behaviour in ("hang", "stubborn"):
            plan.cancel_after = plan.cancel_after if plan.cancel_after is not None else 0.01
    host = JobHost(name="attacked host", gc_young_threshold=None)
    record = Record()
    closing = CLOSES[close_at]
    if close_at == "before start":
        host.close()
    elif closing is None or closing[0]:
        host.start()
    # else the first caller's run() starts it, while the close comes
    threads = [threading.Thread(target=caller_thread, daemon=True,
                                args=(host, [(i, p) for i, p in enumerate(plans)
                                             if p.thread == t], record))
               for t in (0, 1)]
    closer: threading.Timer | None = None
    if closing is not None:
        closer = threading.Timer(closing[1], host.close, args=(CLOSE_GRACE,))
    for t in threads:
        t.start()
    if closer is not None:
        closer.start()
    for t in threads:
        t.join(40)
        assert not t.is_alive(), "a caller never heard of its job"
    if closer is not None:
        closer.join(CLOSE_GRACE + 5)
        # one close() ends the host, whenever it came: not asked twice here
        assert host.closed, "the host's thread outlived its close"
    else:
        host.close(CLOSE_GRACE)
        assert host.closed, "the host's thread outlived its close"

    # each caller heard exactly once, and something its job could have said
    assert sorted(record.heard) == list(range(len(plans))), record.heard
    for index, plan in enumerate(plans):
        assert len(record.heard[index]) == 1, (index, record.heard[index])
        assert record.heard[index][0] in allowed(plan), (index, plan, record.heard[index])
    # every job that began unwound, once; a closing host begins no job
    assert sorted(record.began) == sorted(set(record.began))
    assert sorted(record.unwound) == sorted(record.began)
    assert record.began_in_closing_host == []
    assert host.jobs_running == 0
    if close_at == "before start":
        assert record.began == []
        assert all(h == ["closed"] for h in record.heard.values())
