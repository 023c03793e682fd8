"""``python -m bench.voice``: latency of the real offline voice pipeline.

    python -m bench.voice              # 3 runs of the voice demo + the VAD cost; writes
                                       # bench/results/voice.md and voice.json
    python -m bench.voice --runs 1 --no-write

Measures, on real models in real time (espeak-ng, Silero VAD through ``adapt()``,
PocketSphinx in its subprocess, the rule-based LLM):

- end of the user's speech -> first sample of the agent's answer at the output, per turn;
- start of the interrupting speech -> ``clear_buffer`` (barge-in), per run;
- the Trio loop's lag while the pipeline runs;
- Silero VAD throughput through ``adapt()``: frames pushed in a burst (so they cross the
  bridge in batches), wall time per 20 ms frame against the plugin's reported
  ``inference_duration`` (which covers more than the model: Silero's own Python around it and,
  with ``inference_on_loop=False``, its executor round trip). This is not the per-window cost
  in a session, where frames arrive one at a time: ``python -m bench --adapter``
  (bench/adapter_hops.py) measures that, hop by hop.

Needs the ``[voice]`` extra and espeak-ng. These are figures for a report, not timed tests.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import trio

from agents_trio.demo_voice import LINES, VoiceDemo, missing_dependencies

RESULTS = Path(__file__).resolve().parent / "results"


def summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return {"n": len(values), "median": round(statistics.median(values), 3),
            "p90": round(p90, 3), "min": round(ordered[0], 3), "max": round(ordered[-1], 3)}


def run_demo(lags: list[float]) -> dict[str, Any]:
    """One demo run; ``lags`` gets the Trio loop's lag (oversleep of 5 ms sleeps, s)."""
    demo = VoiceDemo(io.StringIO())

    async def probe() -> None:
        while True:
            began = time.perf_counter()
            await trio.sleep(0.005)
            lags.append(time.perf_counter() - began - 0.005)

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(probe)
            await demo.run()
            nursery.cancel_scope.cancel()

    trio.run(main)
    return demo.timeline()


async def vad_cost(seconds_of_speech: int = 3) -> dict[str, float]:
    """Silero through adapt(): wall time per 20 ms frame vs the model's inference time."""
    from livekit.plugins import silero

    from agents_trio import open_bridge
    from agents_trio.io.wav import frame_samples, pcm_frames, resample_pcm
    from agents_trio.models import VADEventType
    from agents_trio.offline import EspeakTTS
    from agents_trio.plugins import adapt

    tts = EspeakTTS()
    clips = []
    for line in LINES * seconds_of_speech:
        frame = await tts.synthesize(line)
        clips += [resample_pcm(frame_samples(frame), frame.sample_rate, 16000),
                  np.zeros(8000, np.int16)]
    frames = pcm_frames(np.concatenate(clips), 16000)
    inference = 0.0
    async with open_bridge():
        vad = adapt(await trio.to_thread.run_sync(silero.VAD.load))
        async with vad.stream() as stream:
            began = time.perf_counter()
            async with trio.open_nursery() as nursery:
                async def feed() -> None:
                    for f in frames:
                        stream.push_frame(f)
                        await trio.sleep(0)
                    stream.end_input()
                nursery.start_soon(feed)
                async for ev in stream:
                    if ev.type == VADEventType.INFERENCE_DONE:
                        inference += ev.inference_duration
            wall = time.perf_counter() - began
    n = len(frames)
    return {"frames": n, "audio_s": round(n * 0.02, 2),
            "wall_per_frame_ms": round(1000 * wall / n, 3),
            "inference_per_frame_ms": round(1000 * inference / n, 3),
            "overhead_per_frame_ms": round(1000 * (wall - inference) / n, 3)}


def report(results: dict[str, Any]) -> str:
    e2e, barge, vad = results["end_of_speech_to_first_audio_s"], results["barge_in_to_clear_s"], \
        results["vad"]
    return "\n".join([
        "# Real offline voice pipeline: latency",
        "",
        f"`python -m bench.voice` — {results['runs']} runs of `demo --voice` in real time "
        f"(espeak-ng TTS, Silero VAD through `adapt()`, PocketSphinx in a subprocess "
        f"through `agents_trio.blocking`, rule-based LLM); {results['machine']}.",
        "",
        "| measure | n | median | p90 | min | max |",
        "|---|---|---|---|---|---|",
        f"| end of speech → first agent audio (s) | {e2e.get('n')} | {e2e.get('median')} | "
        f"{e2e.get('p90')} | {e2e.get('min')} | {e2e.get('max')} |",
        f"| barge-in → cleared (s) | {barge.get('n')} | {barge.get('median')} | "
        f"{barge.get('p90')} | {barge.get('min')} | {barge.get('max')} |",
        "",
        f"Trio loop lag during the runs (oversleep of 5 ms sleeps, {results['loop_lag_ms']['n']} "
        f"samples): median {results['loop_lag_ms']['median']} ms, p99 "
        f"{results['loop_lag_p99_ms']} ms, max {results['loop_lag_ms']['max']} ms "
        "(PocketSphinx decodes in its own process, Silero in the bridge's executor thread).",
        "",
        "End of speech (the end of the user's speech in the played clip, by energy) → first "
        "agent audio includes the VAD's silence window (Silero `min_silence_duration`, 0.55 s) "
        "and the session's endpointing delay (`min_delay`, 0.5 s; the two overlap), "
        "PocketSphinx's final transcript, the LLM and espeak-ng's synthesis of the first "
        "sentence. Barge-in → cleared includes the interruption's minimum duration "
        "(`min_duration`, 0.5 s of speech).",
        "",
        "Silero VAD through `adapt()`, "
        f"{vad['frames']} frames of 20 ms ({vad['audio_s']} s of espeak-ng speech and silence), "
        "pushed as fast as the stream takes them:",
        "",
        "| per 20 ms frame | ms |",
        "|---|---|",
        f"| wall time through `adapt()` | {vad['wall_per_frame_ms']} |",
        f"| Silero's reported `inference_duration` | {vad['inference_per_frame_ms']} |",
        f"| the rest | {vad['overhead_per_frame_ms']} |",
        "",
        ("A burst, batched across the bridge, against a plugin-reported duration that includes "
         "its own stream work: a throughput figure. The per-window cost of frames arriving one "
         "at a time, split by hop, is in `bench/results/adapter.md` (`python -m bench "
         "--adapter`)."),
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.voice")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    missing = missing_dependencies()
    if missing:
        print("bench.voice needs: " + "; ".join(missing))
        return 1
    e2e: list[float] = []
    barge: list[float] = []
    lags: list[float] = []
    for i in range(args.runs):
        timeline = run_demo(lags)
        e2e += timeline["metrics"]["end_of_speech_to_first_audio_s"]
        barge += timeline["metrics"]["barge_in_to_clear_s"]
        print(f"run {i + 1}: {timeline['metrics']}", flush=True)
    results = {"runs": args.runs,
               "machine": (f"Python {platform.python_version()}, {platform.machine()}, "
                           f"{os.cpu_count()} CPUs (not isolated from other jobs)"),
               "end_of_speech_to_first_audio_s": summary(e2e),
               "barge_in_to_clear_s": summary(barge),
               "loop_lag_ms": {k: round(v * 1000, 2) if k != "n" else v
                               for k, v in summary(lags).items()},
               "loop_lag_p99_ms": round(1000 * sorted(lags)[int(0.99 * (len(lags) - 1))], 2),
               "vad": trio.run(vad_cost),
               "raw": {"end_of_speech_to_first_audio_s": e2e, "barge_in_to_clear_s": barge}}
    text = report(results)
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "voice.json").write_text(json.dumps(results, indent=2) + "\n")
        (RESULTS / "voice.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
