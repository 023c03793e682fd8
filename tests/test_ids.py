"""Ids: random hex digits without a system call each, distinct across forked processes."""

from __future__ import annotations

import os
import sys
import warnings

import pytest

from agents_trio._ids import random_hex, short_id
from agents_trio.chat import new_item_id


def test_ids_have_their_shape_and_do_not_repeat() -> None:
    ids = {short_id("speech") for _ in range(5000)}
    assert len(ids) == 5000
    assert all(len(i) == len("speech_") + 12 and int(i[7:], 16) >= 0 for i in ids)
    assert all(len(random_hex(n)) == n for n in (1, 4, 12, 32))
    items = [new_item_id() for _ in range(100)]
    assert items == sorted(items)   # creation order, for ties in time


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform != "linux", reason="fork")
def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    read, write = os.pipe()
    with warnings.catch_warnings():   # 3.12+ warns about forking a process with threads;
        warnings.simplefilter("ignore", DeprecationWarning)   # the child only writes and exits
        pid = os.fork()
    if pid == 0:   # the child: its next ids, to the parent
        os.close(read)
        os.write(write, " ".join(random_hex(12) for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    parent = {random_hex(12) for _ in range(8)}
    with os.fdopen(read) as f:
        child = set(f.read().split())
    os.waitpid(pid, 0)
    assert len(child) == 8
    assert not parent & child
