"""Plumbing both benchmark sides share: the fake network, frame delivery, the recording the
fake models and agents do. Imports no runtime: each side passes its own clock, sleep and event
type in (``trio_side`` Trio's, ``asyncio_side`` asyncio's), so both record the same way.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable
from typing import Any

from . import core
from .core import FRAME, IN_RATE, IN_SAMPLES, REPLY_BASE, TTS_TTFB, Probe, in_bytes, out_bytes


class Network:
    """The fake network: one task hands every registered input its frames when they are due,
    through the input's queue or channel, the way a transport delivers frames. It sleeps until
    the next due frame (frames due in the same wake-up go out together) and idles without
    inputs. ``new_event``, ``sleep_until`` and ``now`` are the runtime's."""

    def __init__(self, new_event: Callable[[], Any], sleep_until: Callable[[float], Any],
                 now: Callable[[], float]) -> None:
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = itertools.count()
        self.delivered = 0
        self._new_event = new_event
        self._sleep_until = sleep_until
        self._now = now
        self._wake = new_event()
        self._origin: float | None = None

    def time_zero(self, t: float, phase: float) -> float:
        """An input's time 0 when it is first read at ``t``: the first instant from ``t`` on
        at ``phase`` of the network's 20 ms grid, whose origin is the first input's time 0.

        Every runtime's inputs then get their frames on the same phases, set by the sessions'
        schedule (``core.frame_phase``), not by how long each runtime took to start reading:
        sessions started a multiple of 20 ms apart get their frames in the same wake-ups on
        every runtime, where the first read's jitter used to split them into two or more
        groups on some runs and not on others (twice the wake-ups, and CPU, at N = 10)."""
        if self._origin is None:
            self._origin = t - phase
        base = self._origin + phase
        return base + max(0, math.ceil((t - base) / FRAME - 1e-9)) * FRAME

    def register(self, inp: Any) -> None:
        heapq.heappush(self._heap, (inp.frames.due(), next(self._seq), inp))
        self._wake.set()

    async def run(self) -> None:
        heap = self._heap
        now = self._now
        sleep_until = self._sleep_until
        while True:
            if not heap:
                self._wake = self._new_event()
                await self._wake.wait()
                continue
            await sleep_until(min(heap[0][0], now() + FRAME))
            t = now()
            while heap and heap[0][0] <= t:
                inp = heapq.heappop(heap)[2]
                if inp.deliver_due(t):
                    heapq.heappush(heap, (inp.frames.due(), next(self._seq), inp))


class PacedFrames:
    """Mixin for a side's paced input: subclasses set ``probe``, ``network``, ``started``,
    ``frames``, ``closed``, ``_put`` (the queue's non-blocking put) and ``_AudioFrame``."""

    probe: Probe
    _AudioFrame: Any

    def _first_pull(self, t: float) -> None:
        """On the first frame pulled: time zero (on the probe's phase of the network's
        grid), and the network starts delivering."""
        self.probe.t0 = self.network.time_zero(t, self.probe.frame_phase)
        self.network.register(self)
        self.started.set()

    def deliver_due(self, t: float) -> bool:
        """Queue the frames due at ``t``; False once closed."""
        if self.closed:
            return False
        frames = self.frames
        while frames.due() <= t:
            value = frames.next_value(t)
            self.network.delivered += 1
            self._put(self._AudioFrame(in_bytes(value), IN_RATE, 1, IN_SAMPLES))
        return True

    def close(self) -> None:
        self.closed = True


class IdleInput(PacedFrames):
    """An input that nobody listens to: the fake network makes and hands out its frames, which
    are dropped. Inputs like these, with no session, measure what the fake network itself
    costs a runtime's process (its frames and its wake-ups): the floor of the CPU figure."""

    def __init__(self, probe: Probe, network: Any, audio_frame: Any, started: Any) -> None:
        self.probe = probe
        self.network = network
        self.frames = core.InputFrames(probe)
        self.closed = False
        self.started = started
        self._AudioFrame = audio_frame
        self._put = _drop

    def start(self, t: float) -> None:
        """Time zero: the network delivers from now on."""
        self._first_pull(t)


def _drop(frame: Any) -> None:
    del frame


async def run_network_only(probes: list[Probe], network: Any, *, spread: float,
                           now: Callable[[], float], sleep_until: Callable[[float], Any],
                           new_event: Callable[[], Any], audio_frame: Any) -> None:
    """The fake network alone: one ``IdleInput`` per probe, started on the sessions' schedule
    (over ``spread`` seconds) and closed after its script's ``close_at``, with no session."""
    t_start = now()
    n = len(probes)
    inputs = []
    for i, probe in enumerate(probes):
        await sleep_until(t_start + (spread * i / n if n else 0.0))
        inp = IdleInput(probe, network, audio_frame, new_event())
        probe.started_at = now()
        inp.start(probe.started_at)
        inputs.append(inp)
    for inp in inputs:   # started in order, so they end in order
        assert inp.probe.t0 is not None
        await sleep_until(inp.probe.t0 + inp.probe.script.close_at)
        inp.close()
        inp.probe.ended_at = now()


def sink_first_frame(probe: Probe, value: int, t: float) -> int:
    """The sink's first frame of a reply at ``t``: record it once per reply; the reply index."""
    r = value - REPLY_BASE
    if r not in probe.sink_first_frame:
        probe.sink_first_frame[r] = t
    return r


def llm_begin(probe: Probe, chat_items: Any, now: Callable[[], float]) -> tuple[Any, float]:
    """The fake LLM's request: the scripted reply (None, recorded as other, when the context
    has none) and the request time."""
    text, tool_after = core.last_user_text(chat_items)
    return llm_begin_text(probe, text, tool_after, now)


def llm_begin_text(probe: Probe, text: str | None, tool_after: bool,
                   now: Callable[[], float]) -> tuple[Any, float]:
    """``llm_begin`` for a runtime whose context is not a list of LiveKit-shaped items:
    ``text`` is the last user message, ``tool_after`` whether a tool output follows it."""
    reply = None if tool_after or text is None else probe.script.reply_for(text)
    if reply is None:
        probe.llm_other.append(f"{text!r} tool_after={tool_after}")
        return None, 0.0
    r = reply.index
    started = now()
    probe.llm_request[r] = started
    probe.current_reply = r
    return reply, started


def tts_first_text(probe: Probe, tts: core.TtsCore, now: Callable[[], float]) -> tuple[int, bytes]:
    """The fake TTS's first text of a reply: record it, schedule the first audio; the reply
    index and its frame bytes."""
    r = probe.current_reply
    first = probe.tts_first_text[r] = now()
    tts.first_audio = first + TTS_TTFB
    return r, out_bytes(REPLY_BASE + r)


class BillingAgent:
    """Mixin for a side's billing agent (before the runtime's ``Agent`` in the bases); the
    subclass sets ``_now``."""

    _now: Callable[[], float]

    def __init__(self, probe: Probe) -> None:
        super().__init__(instructions="You are the billing agent.")
        self.probe = probe

    async def on_enter(self) -> None:
        self.probe.on_enter_new = self._now()


def unused_tools(function_tool: Callable[..., Any], n: int) -> list[Any]:
    """``n`` tools the script never calls, made with the runtime's ``function_tool``."""
    tools = []
    for i in range(n):
        async def unused() -> None:
            """A tool the scripted conversation never calls."""
        tools.append(function_tool(unused, name=f"tool_{i}", description=f"Unused tool {i}."))
    return tools


def earlier_messages(chat_ctx: Any, history: int) -> Any:
    """``chat_ctx`` with ``history`` earlier user/assistant messages added."""
    for i in range(history):
        chat_ctx.add_message(role="user" if i % 2 == 0 else "assistant",
                             content=f"earlier message {i}")
    return chat_ctx


class FrontDeskAgent:
    """Mixin for a side's front-desk agent; the subclass declares the ``transfer_to_billing``
    tool with its runtime's decorator and returns ``self._transfer()``; it sets ``_now``,
    ``_Billing``, and ``_ChatContext`` and ``_function_tool`` (the runtime's), with which
    ``history`` earlier messages and ``extra_tools`` unused tools are added (the sweep of turn
    cost against the context's size)."""

    _now: Callable[[], float]
    _Billing: Any
    _ChatContext: Any
    _function_tool: Callable[..., Any]

    def __init__(self, probe: Probe, *, history: int = 0, extra_tools: int = 0) -> None:
        more: dict[str, Any] = {}
        if history:
            more["chat_ctx"] = earlier_messages(self._ChatContext(), history)
        if extra_tools:
            more["tools"] = unused_tools(self._function_tool, extra_tools)
        super().__init__(instructions="You are the front desk of a small company.", **more)
        self.probe = probe

    def _transfer(self) -> Any:
        probe = self.probe
        if probe.script.handoff_by_update:
            self.session.update_agent(self._Billing(probe))
            probe.tool_return = self._now()
            return None
        agent = self._Billing(probe)
        probe.tool_return = self._now()
        return agent
