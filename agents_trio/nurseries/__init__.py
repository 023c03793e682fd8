"""Small structured-concurrency building blocks (no voice knowledge)."""

from __future__ import annotations

from .end_of_input import EndOfInput
from .fanout import EventFanout, FanoutEvent, FanoutStatistics, Subscription
from .flag import Flag
from .owner import TaskOwner, open_owner
from .pipe import Pipe
from .precise_sleep import sleep_precisely
from .serial import SerialWorker
from .single_wakeup import SingleWakeup
from .slot import LatestSlot
from .speech_queue import PriorityQueue
from .wakeup import Wakeup
from .unwrap import open_unwrapping_nursery, single_leaf, unwrap_single_error

__all__ = [
    "EndOfInput",
    "EventFanout",
    "FanoutEvent",
    "FanoutStatistics",
    "Flag",
    "LatestSlot",
    "Pipe",
    "PriorityQueue",
    "SerialWorker",
    "SingleWakeup",
    "Subscription",
    "TaskOwner",
    "open_owner",
    "open_unwrapping_nursery",
    "single_leaf",
    "sleep_precisely",
    "unwrap_single_error",
    "Wakeup",
]
