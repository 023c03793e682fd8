"""The cyclic collector's policy for a process of many sessions (``agents_trio.collector``) and
the job host that applies it while it runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from agents_trio import tune_collector_for_sessions
from agents_trio.collector import SESSION_HOST_YOUNG_THRESHOLD
from agents_trio.job_host import JobHost


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[tuple[int, int, int]]:
    """Each test starts from CPython's defaults and leaves the process's thresholds as found."""
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield before
    finally:
        gc.set_threshold(*before)


def test_the_young_threshold_is_raised_and_the_older_ones_kept() -> None:
    gc.set_threshold(700, 12, 15)
    assert tune_collector_for_sessions() == (700, 12, 15)
    assert gc.get_threshold() == (SESSION_HOST_YOUNG_THRESHOLD, 12, 15)
    assert tune_collector_for_sessions(8000) == (SESSION_HOST_YOUNG_THRESHOLD, 12, 15)
    assert gc.get_threshold() == (8000, 12, 15)


@pytest.mark.parametrize("set_by_the_process", [(20000, 10, 10), (0, 10, 10)])
def test_a_higher_threshold_or_a_collector_turned_off_is_kept(
        set_by_the_process: tuple[int, int, int]) -> None:
    gc.set_threshold(*set_by_the_process)
    assert tune_collector_for_sessions() == set_by_the_process
    assert gc.get_threshold() == set_by_the_process


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "5000"])
def test_a_threshold_that_is_not_a_positive_integer_is_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="young_threshold"):
        tune_collector_for_sessions(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gc_young_threshold"):
        JobHost(gc_young_threshold=bad)  # type: ignore[arg-type]
    assert gc.get_threshold() == (700, 10, 10)


def test_the_job_host_raises_the_threshold_while_it_runs() -> None:
    host = JobHost(name="collector test", gc_young_threshold=6000)
    assert gc.get_threshold() == (700, 10, 10)  # construction changes nothing
    host.start()
    try:
        assert gc.get_threshold() == (6000, 10, 10)
    finally:
        host.close(10)
    assert host.closed and gc.get_threshold() == (700, 10, 10)


def test_the_job_host_leaves_a_threshold_changed_while_it_ran() -> None:
    host = JobHost(name="collector test")
    host.start()
    try:
        gc.set_threshold(9000, 10, 10)  # the application's own choice, made later
    finally:
        host.close(10)
    assert gc.get_threshold() == (9000, 10, 10)


def test_a_job_host_told_to_leave_the_collector_alone_does() -> None:
    host = JobHost(name="collector test", gc_young_threshold=None)
    host.start()
    try:
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        host.close(10)
    assert gc.get_threshold() == (700, 10, 10)
