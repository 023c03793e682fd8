"""``python -m bench.adapter_hops``: where a VAD window's time goes through ``adapt()``.

    python -m bench.adapter_hops                # lockstep CPU (5 repeats) + the voice session
    python -m bench.adapter_hops --no-session   # lockstep only (no espeak-ng / PocketSphinx)

A LiveKit VAD plugin (Silero) through ``adapt()`` is stamped at every crossing of one 32 ms
inference window (one window is one ``INFERENCE_DONE`` event):

1. **push**: the Trio code calls ``push_frame`` on the adapter's stream (the frame that
   completes the window);
2. **enter**: the plugin stream's ``push_frame`` runs inside the asyncio loop;
3. **model start / end**: the plugin's executor job (Silero's ONNX inference) starts and ends,
   with the job thread's CPU time;
4. **pumped**: the adapter's asyncio pump takes the window's event from the plugin stream;
5. **received**: the Trio consumer gets the event.

Hops: Trio → asyncio push (1→2), the plugin stream excluding the model (2→3 and 4→5: its
Python, the executor hand-off and back, the event tee), the model (3→4), the event back to
Trio (4→5). The stamps use only public surfaces: a wrapping ``VAD`` (its stream proxies
``push_frame`` and iteration) and the loop's ``run_in_executor`` (each job wrapped).

Two measurements:

- **lockstep** (CPU cost): one 32 ms frame at a time, each waited for until its event reached
  Trio, as frames arrive in real time (no batching can hide the hops); per window: the
  process's CPU time, the model's own CPU time (the CPU time of the inference call in the
  thread that ran it), the loop thread's CPU by hop. Five paths, runs interleaved:
  ``agents_trio.offline.SileroVAD`` (the plugin's model run by agents_trio in ``push_frame``,
  no bridge and no plugin stream), the adapter as it is (inference on the loop), the adapter with ``inference_on_loop=False`` (the plugin's
  executor, as before), and the same plugin and driver under plain asyncio (LiveKit's own
  path, no bridge), with its executor and with its inference on the loop (the plugin's own
  floor: what its stream costs with neither bridge nor thread). Medians of the runs, with
  their range.
- **session** (wall time inside a running session): the offline voice demo (Silero through
  ``adapt()``, PocketSphinx, espeak-ng, real time) with the VAD stamped; per-window wall time
  of each hop, median and p95, with everything else the session does going on. Also the
  pipeline's end of speech → first agent audio and barge-in → audio cleared. The same with
  the plugin's executor, and with ``agents_trio.offline.SileroVAD`` in place of the plugin.

The machine is shared: wall times are noisy, CPU times less so; the spread across repeats is
reported. Figures for a report, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from livekit import rtc
from livekit.agents import vad as lk_vad

RESULTS = Path(__file__).resolve().parent / "results"
RATE = 16000
WINDOW_S = 0.032          # Silero's inference window at 16 kHz (512 samples)
HOPS = ("push", "stream_before_model", "model", "stream_after_model", "back_to_trio")
SIDES = {
    "native": "agents_trio `offline.SileroVAD` (the plugin's model, run in `push_frame`)",
    "trio": "agents_trio `adapt()` (inference on the loop, the default)",
    "trio_executor": "agents_trio `adapt()`, `inference_on_loop=False` (the plugin's executor)",
    "asyncio": "LiveKit's own path: plain asyncio, the plugin's executor",
    "asyncio_on_loop": "plain asyncio, inference on the loop (the plugin's own floor)",
}


# -- stamps -------------------------------------------------------------------------------------
def _now() -> tuple[float, float]:
    return time.perf_counter(), time.thread_time()


@dataclasses.dataclass
class HopRecorder:
    """The stamps of one plugin stream (see the module docstring)."""

    window_s: float
    pushed: list[tuple[float, float, float]] = dataclasses.field(default_factory=list)
    entered: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    jobs: list[tuple[float, float, float]] = dataclasses.field(default_factory=list)
    pumped: list[tuple[float, float]] = dataclasses.field(default_factory=list)
    received: list[tuple[float, float]] = dataclasses.field(default_factory=list)

    def windows(self) -> list[dict[str, float]]:
        """Per window: each hop's wall time and the loop thread's CPU time (seconds)."""
        triggers: list[int] = []
        elapsed = 0.0
        for i, (_, _, duration) in enumerate(self.pushed):
            elapsed += duration
            while elapsed >= (len(triggers) + 1) * self.window_s - 1e-9:
                triggers.append(i)
        n = min(len(triggers), len(self.jobs), len(self.pumped), len(self.received))
        out = []
        for k in range(n):
            i = triggers[k]
            if i >= len(self.entered):
                break
            push_t, push_c, _ = self.pushed[i]
            enter_t, enter_c = self.entered[i]
            start, end, model_cpu = self.jobs[k]
            pump_t, pump_c = self.pumped[k]
            recv_t, recv_c = self.received[k]
            out.append({
                "push": enter_t - push_t, "stream_before_model": start - enter_t,
                "model": end - start, "stream_after_model": pump_t - end,
                "back_to_trio": recv_t - pump_t, "total": recv_t - push_t,
                "model_cpu": model_cpu,
                "cpu_push": enter_c - push_c, "cpu_stream": pump_c - enter_c,
                "cpu_back": recv_c - pump_c, "cpu_loop_thread": recv_c - push_c,
            })
        return out


class _StampedPluginStream:
    """Proxies a LiveKit ``VADStream`` (asyncio side), stamping ``push_frame`` and events."""

    def __init__(self, inner: lk_vad.VADStream, recorder: HopRecorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        self._recorder.entered.append(_now())
        self._inner.push_frame(frame)

    def flush(self) -> None:
        self._inner.flush()

    def end_input(self) -> None:
        self._inner.end_input()

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _StampedPluginStream:
        return self

    async def __anext__(self) -> lk_vad.VADEvent:
        event = await self._inner.__anext__()
        if event.type == lk_vad.VADEventType.INFERENCE_DONE:
            self._recorder.pumped.append(_now())
        return event


class StampedVAD(lk_vad.VAD):
    """A LiveKit VAD whose streams are stamped; ``next_recorder`` gets the next stream's."""

    def __init__(self, inner: lk_vad.VAD) -> None:
        super().__init__(capabilities=inner.capabilities)
        self.inner = inner
        self.next_recorder: HopRecorder | None = None

    def stream(self) -> lk_vad.VADStream:
        recorder = self.next_recorder or HopRecorder(self.capabilities.update_interval)
        self.next_recorder = None
        return _StampedPluginStream(self.inner.stream(), recorder)  # type: ignore[return-value]


def stamp_executor_jobs(loop: asyncio.AbstractEventLoop,
                        sink: Callable[[], HopRecorder | None]) -> None:
    """Wrap every job the ``loop`` hands to an executor: start, end, the thread's CPU."""
    run_in_executor = loop.run_in_executor

    def stamped(executor: Any, fn: Callable[..., Any], *args: Any) -> Any:
        recorder = sink()
        if recorder is None:
            return run_in_executor(executor, fn, *args)

        def job(*a: Any) -> Any:
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                return fn(*a)
            finally:
                recorder.jobs.append((start, time.perf_counter(), time.thread_time() - cpu))
        return run_in_executor(executor, job, *args)

    setattr(loop, "run_in_executor", stamped)


class _StampedTrioStream:
    def __init__(self, inner: Any, recorder: HopRecorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def push_frame(self, frame: rtc.AudioFrame) -> None:
        now = _now()
        self._recorder.pushed.append((now[0], now[1], frame.samples_per_channel
                                      / frame.sample_rate))
        self._inner.push_frame(frame)

    def end_input(self) -> None:
        self._inner.end_input()

    def __aiter__(self) -> _StampedTrioStream:
        return self

    async def __anext__(self) -> Any:
        event = await self._inner.__anext__()
        if getattr(event.type, "value", None) == "inference_done":
            self._recorder.received.append(_now())
        return event


class StampedTrioVAD:
    """The Trio side: wraps ``adapt(StampedVAD(...))`` and stamps pushes and received events."""

    def __init__(self, adapter: Any, plugin: StampedVAD) -> None:
        self._adapter = adapter
        self._plugin = plugin
        self.recorders: list[HopRecorder] = []

    @property
    def label(self) -> str:
        return str(self._adapter.label)

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[_StampedTrioStream]:
        recorder = HopRecorder(self._plugin.capabilities.update_interval)
        self.recorders.append(recorder)
        self._plugin.next_recorder = recorder
        async with self._adapter.stream() as inner:
            yield _StampedTrioStream(inner, recorder)

    def current(self) -> HopRecorder | None:
        return self.recorders[-1] if self.recorders else None


# -- audio --------------------------------------------------------------------------------------
def speech_like_frames(n: int, *, frame_s: float = WINDOW_S, seed: int = 0
                       ) -> list[rtc.AudioFrame]:
    """``n`` frames of a tone switching on and off every ~1.7 s, with noise (Silero sees
    speech starting and ending, so every kind of event occurs)."""
    step = int(RATE * frame_s)
    t = np.arange(n * step) / RATE
    gate = np.sin(2 * np.pi * 0.3 * t) > 0
    rng = np.random.default_rng(seed)
    sig = (3000 * np.sin(2 * np.pi * 220 * t) * gate + rng.normal(0, 50, t.size))
    pcm = sig.astype(np.int16)
    return [rtc.AudioFrame(pcm[i * step:(i + 1) * step].tobytes(), RATE, 1, step)
            for i in range(n)]


def load_silero() -> lk_vad.VAD:
    from livekit.plugins import silero
    return silero.VAD.load()


# -- lockstep: CPU per window ------------------------------------------------------------------
async def _lockstep(stream: Any, frames: list[rtc.AudioFrame]) -> float:
    """Push each frame and wait for its window's event; returns the process CPU spent."""
    events = stream.__aiter__()
    cpu = time.process_time()
    for frame in frames:
        stream.push_frame(frame)
        while True:
            event = await events.__anext__()
            if getattr(event.type, "value", None) == "inference_done":
                break
    return time.process_time() - cpu


async def lockstep_trio(plugin: lk_vad.VAD, frames: list[rtc.AudioFrame], warmup: int,
                        on_loop: bool = True) -> dict[str, Any]:
    from agents_trio import open_bridge
    from agents_trio.plugins import VADAdapter

    stamped = StampedVAD(plugin)
    async with open_bridge() as bridge:
        vad = StampedTrioVAD(VADAdapter(stamped, inference_on_loop=on_loop), stamped)
        stamp_executor_jobs(bridge.loop, vad.current)
        async with vad.stream() as stream:
            await _lockstep(stream, frames[:warmup])
            before = bridge.statistics()
            cpu = await _lockstep(stream, frames[warmup:])
            after = bridge.statistics()
    hops = {name: (getattr(after, name) - getattr(before, name)) / (len(frames) - warmup)
            for name in ("callbacks", "calls", "sync_calls", "trio_wakeups",
                         "asyncio_wakeups")}
    return _lockstep_summary(vad.recorders[-1], cpu, len(frames) - warmup, warmup) | {
        "bridge_counters_per_window": hops}


def _jobs_on_asyncio_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Default-executor jobs run as loop callbacks (what the adapter does through the bridge),
    for the reference: the plugin's own cost without its thread round trip."""
    run_in_executor = loop.run_in_executor

    def on_loop(executor: Any, fn: Callable[..., Any], *args: Any) -> Any:
        if executor is not None:
            return run_in_executor(executor, fn, *args)
        future = loop.create_future()

        def run() -> None:
            if not future.cancelled():
                try:
                    future.set_result(fn(*args))
                except Exception as e:  # noqa: BLE001
                    future.set_exception(e)
        loop.call_soon(run)
        return future

    setattr(loop, "run_in_executor", on_loop)


def lockstep_asyncio(plugin: lk_vad.VAD, frames: list[rtc.AudioFrame], warmup: int,
                     on_loop: bool = False) -> dict[str, Any]:
    """The same plugin and driver under plain asyncio (LiveKit's own path, no bridge)."""
    recorder = HopRecorder(plugin.capabilities.update_interval)

    async def main() -> float:
        if on_loop:
            _jobs_on_asyncio_loop(asyncio.get_running_loop())
        stamp_executor_jobs(asyncio.get_running_loop(), lambda: recorder)
        stamped = StampedVAD(plugin)
        stamped.next_recorder = recorder
        plugin_stream = stamped.stream()
        stream = _StampedTrioStream(plugin_stream, recorder)  # push and enter: one call
        try:
            await _lockstep(stream, frames[:warmup])
            return await _lockstep(stream, frames[warmup:])
        finally:
            await plugin_stream.aclose()

    cpu = asyncio.run(main())
    return _lockstep_summary(recorder, cpu, len(frames) - warmup, warmup)


class _StampedModel:
    """The plugin's ``OnnxModel`` with each call stamped (start, end, the thread's CPU)."""

    def __init__(self, inner: Any, recorder: HopRecorder) -> None:
        self._inner = inner
        self._recorder = recorder
        self.sample_rate = inner.sample_rate
        self.window_size_samples = inner.window_size_samples

    def reset(self) -> None:
        self._inner.reset()

    def __call__(self, x: np.ndarray) -> float:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return float(self._inner(x))
        finally:
            self._recorder.jobs.append((start, time.perf_counter(), time.thread_time() - cpu))


def lockstep_native(frames: list[rtc.AudioFrame], warmup: int) -> dict[str, Any]:
    """``agents_trio.offline.SileroVAD``'s stream with the same frames: the events come back
    from ``push_frame``, so push and back are nothing and “stream” is its own per-window code."""
    from livekit.plugins.silero import onnx_model

    from agents_trio.offline import SileroVADOptions, SileroVADStream

    recorder = HopRecorder(WINDOW_S)
    model = _StampedModel(onnx_model.OnnxModel(
        onnx_session=onnx_model.new_inference_session(True), sample_rate=RATE), recorder)
    options = SileroVADOptions(  # silero.VAD.load()'s defaults
        min_speech_duration=0.05, min_silence_duration=0.55, prefix_padding_duration=0.5,
        max_buffered_speech=60.0, activation_threshold=0.5, deactivation_threshold=0.35,
        sample_rate=RATE)

    async def main() -> float:
        stream = SileroVADStream(options, model)

        def run(batch: list[rtc.AudioFrame]) -> float:
            cpu = time.process_time()
            for frame in batch:
                now = _now()
                recorder.pushed.append((now[0], now[1], frame.samples_per_channel
                                        / frame.sample_rate))
                recorder.entered.append(now)
                for event in stream.push_frame(frame):
                    if event.type.value == "inference_done":
                        done = _now()
                        recorder.pumped.append(done)
                        recorder.received.append(done)
            return time.process_time() - cpu

        run(frames[:warmup])
        return run(frames[warmup:])

    cpu = trio.run(main)
    return _lockstep_summary(recorder, cpu, len(frames) - warmup, warmup)


def _lockstep_summary(recorder: HopRecorder, cpu: float, n: int, warmup: int
                      ) -> dict[str, Any]:
    windows = recorder.windows()[warmup:]
    model_cpu = sum(w["model_cpu"] for w in windows) / max(1, len(windows))
    per_window = cpu / n
    return {
        "windows": len(windows),
        "cpu_per_window_ms": 1000 * per_window,
        "model_cpu_per_window_ms": 1000 * model_cpu,
        "beyond_model_ms": 1000 * (per_window - model_cpu),
        "loop_thread_cpu_ms": {k: 1000 * statistics.median(w[k] for w in windows)
                               for k in ("cpu_push", "cpu_stream", "cpu_back",
                                         "cpu_loop_thread")} if windows else {},
        "wall_ms": _percentiles(windows),
    }


def _percentiles(windows: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    out = {}
    for key in (*HOPS, "total"):
        values = sorted(w[key] for w in windows)
        if values:
            out[key] = {"p50": 1000 * statistics.median(values),
                        "p95": 1000 * values[min(len(values) - 1, int(0.95 * len(values)))]}
    return out


def lockstep(repeats: int, windows: int, warmup: int = 50) -> dict[str, Any]:
    plugin = load_silero()
    frames = speech_like_frames(windows + warmup)
    runs: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for _ in range(repeats):   # interleaved, so that a disturbance hits every side alike
        runs["native"].append(lockstep_native(frames, warmup))
        runs["trio"].append(trio.run(lockstep_trio, plugin, frames, warmup, True))
        runs["trio_executor"].append(trio.run(lockstep_trio, plugin, frames, warmup, False))
        runs["asyncio"].append(lockstep_asyncio(plugin, frames, warmup, False))
        runs["asyncio_on_loop"].append(lockstep_asyncio(plugin, frames, warmup, True))
    return {"repeats": repeats, "windows": windows, "runs": runs,
            "summary": {side: _across(rs) for side, rs in runs.items()}}


def _across(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and range across repeats of the per-window figures."""
    out: dict[str, Any] = {}
    for key in ("cpu_per_window_ms", "model_cpu_per_window_ms", "beyond_model_ms"):
        values = [r[key] for r in runs]
        out[key] = {"median": statistics.median(values), "min": min(values),
                    "max": max(values)}
    for key in ("cpu_push", "cpu_stream", "cpu_back", "cpu_loop_thread"):
        out[key] = statistics.median(r["loop_thread_cpu_ms"][key] for r in runs)
    out["wall_ms"] = {hop: {p: statistics.median(r["wall_ms"][hop][p] for r in runs)
                            for p in ("p50", "p95")} for hop in (*HOPS, "total")}
    if "bridge_counters_per_window" in runs[0]:
        out["bridge_counters_per_window"] = runs[-1]["bridge_counters_per_window"]
    return out


# -- inside the voice session -----------------------------------------------------------------
@contextmanager
def _stamped_demo_vad(found: list[StampedTrioVAD], on_loop: bool = True) -> Iterator[None]:
    """While active, the voice demo's ``adapt(silero.VAD.load())`` is stamped (and runs its
    inference on the loop or in the plugin's executor, as ``on_loop`` says)."""
    from livekit.plugins import silero

    import agents_trio.plugins as plugins
    from agents_trio.io.bridge import current_bridge

    load, adapt = silero.VAD.load, plugins.adapt

    def stamped_load(*args: Any, **kwargs: Any) -> lk_vad.VAD:
        return StampedVAD(load(*args, **kwargs))

    def stamped_adapt(model: Any, **kwargs: Any) -> Any:
        if not isinstance(model, StampedVAD):
            return adapt(model, **kwargs)
        vad = StampedTrioVAD(plugins.VADAdapter(model, bridge=kwargs.get("bridge"),
                                                inference_on_loop=on_loop), model)
        stamp_executor_jobs(current_bridge().loop, vad.current)
        found.append(vad)
        return vad

    silero.VAD.load = stamped_load  # type: ignore[method-assign]
    plugins.adapt = stamped_adapt  # type: ignore[assignment]
    try:
        yield
    finally:
        silero.VAD.load = load  # type: ignore[method-assign]
        plugins.adapt = adapt


class _StampedNativeStream:
    """``SileroVADStream`` with each push and each window's event stamped."""

    def __init__(self, inner: Any, recorder: HopRecorder) -> None:
        self._inner = inner
        self._recorder = recorder

    def push_frame(self, frame: rtc.AudioFrame) -> Any:
        now = _now()
        self._recorder.pushed.append((now[0], now[1], frame.samples_per_channel
                                      / frame.sample_rate))
        self._recorder.entered.append(now)
        events = self._inner.push_frame(frame)
        for event in events:
            if event.type.value == "inference_done":
                done = _now()
                self._recorder.pumped.append(done)
                self._recorder.received.append(done)
        return events

    def end_input(self) -> None:
        self._inner.end_input()

    def __aiter__(self) -> Any:
        return self._inner.__aiter__()


class StampedNativeVAD:
    """``agents_trio.offline.SileroVAD`` (``silero.VAD.load()``'s defaults) with its streams
    stamped: what ``silero.VAD.load`` returns to the demo in the native session runs."""

    model_kind = "vad"

    def __init__(self) -> None:
        from livekit.plugins.silero import onnx_model

        from agents_trio.offline import SileroVADOptions

        self._onnx = onnx_model
        self._session = onnx_model.new_inference_session(True)
        self.options = SileroVADOptions(
            min_speech_duration=0.05, min_silence_duration=0.55, prefix_padding_duration=0.5,
            max_buffered_speech=60.0, activation_threshold=0.5, deactivation_threshold=0.35,
            sample_rate=RATE)
        self.recorders: list[HopRecorder] = []

    @asynccontextmanager
    async def stream(self) -> AsyncIterator[_StampedNativeStream]:
        from agents_trio.offline import SileroVADStream

        recorder = HopRecorder(WINDOW_S)
        self.recorders.append(recorder)
        model = _StampedModel(self._onnx.OnnxModel(onnx_session=self._session,
                                                   sample_rate=RATE), recorder)
        inner = SileroVADStream(self.options, model)
        try:
            yield _StampedNativeStream(inner, recorder)
        finally:
            inner.end_input()


@contextmanager
def _native_demo_vad(found: list[StampedNativeVAD]) -> Iterator[None]:
    """While active, the voice demo's ``silero.VAD.load()`` gives a stamped native VAD, which
    ``adapt()`` passes through (it is a Trio model)."""
    from livekit.plugins import silero

    load = silero.VAD.load

    def native_load(*args: Any, **kwargs: Any) -> Any:
        vad = StampedNativeVAD()
        found.append(vad)
        return vad

    silero.VAD.load = native_load  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        silero.VAD.load = load  # type: ignore[method-assign]


def session(runs: int, on_loop: bool = True, native: bool = False) -> dict[str, Any]:
    import io

    from agents_trio.demo_voice import VoiceDemo

    windows: list[dict[str, float]] = []
    e2e: list[float] = []
    barge: list[float] = []
    for _ in range(runs):
        found: list[Any] = []
        demo = VoiceDemo(io.StringIO())
        with (_native_demo_vad(found) if native else _stamped_demo_vad(found, on_loop)):
            trio.run(demo.run)
        for vad in found:
            for recorder in vad.recorders:
                windows += recorder.windows()[5:]
        metrics = demo.timeline()["metrics"]
        e2e += metrics["end_of_speech_to_first_audio_s"]
        barge += metrics["barge_in_to_clear_s"]
    return {"runs": runs, "windows": len(windows), "wall_ms": _percentiles(windows),
            "loop_thread_cpu_ms": {k: 1000 * statistics.median(w[k] for w in windows)
                                   for k in ("cpu_push", "cpu_stream", "cpu_back",
                                             "cpu_loop_thread")} if windows else {},
            "model_cpu_ms": (1000 * statistics.median(w["model_cpu"] for w in windows)
                             if windows else None),
            "end_of_speech_to_first_audio_s": _seconds(e2e),
            "barge_in_to_clear_s": _seconds(barge)}


def _seconds(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {"n": len(values), "p50": statistics.median(values),
            "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
            "min": ordered[0], "max": ordered[-1]}


def measure(*, repeats: int = 5, windows: int = 600, session_runs: int = 1,
            with_session: bool = True) -> dict[str, Any]:
    import os
    import platform

    results: dict[str, Any] = {
        "machine": (f"Python {platform.python_version()}, {platform.machine()}, "
                    f"{os.cpu_count()} CPUs shared with other jobs"),
        "load_before": round(os.getloadavg()[0], 2),
        "lockstep": lockstep(repeats, windows)}
    if with_session:
        from agents_trio.demo_voice import missing_dependencies
        missing = missing_dependencies()
        if missing:
            results["session"] = {"skipped": "; ".join(missing)}
        else:
            results["session"] = session(session_runs, on_loop=True)
            results["session_executor"] = session(session_runs, on_loop=False)
            results["session_native"] = session(session_runs, native=True)
    results["load_after"] = round(os.getloadavg()[0], 2)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.adapter_hops")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--windows", type=int, default=600)
    parser.add_argument("--session-runs", type=int, default=1)
    parser.add_argument("--no-session", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--out", type=Path, default=RESULTS, help="results directory")
    args = parser.parse_args(argv)
    results = measure(repeats=args.repeats, windows=args.windows,
                      session_runs=args.session_runs, with_session=not args.no_session)
    from .report import adapter_markdown
    text = adapter_markdown(results)
    print(text)
    if not args.no_write:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "adapter.json").write_text(json.dumps(results, indent=1) + "\n")
        (args.out / "adapter.md").write_text(text)
    return 0


if __name__ == "__main__":
    threading.current_thread().name = "bench.adapter_hops"
    raise SystemExit(main())
