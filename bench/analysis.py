"""From the fakes' timestamps to latencies: turn overhead, interruption, handoff, start/close.

Every latency is a difference of two timestamps of one process's clock. Nominal times come from
the script: the input hands out frame k at ``t0 + (k+1)·20 ms``, so a speech that ends at
``end`` is over at ``t0 + end``; its turn ends at ``t0 + end + min_delay``.
"""

from __future__ import annotations

from typing import Any

from .core import (
    FRAME,
    LLM_TTFT,
    MIN_DELAY,
    TTS_TTFB,
    VAD_END_FRAMES,
    VAD_START_FRAMES,
    Probe,
    percentile,
)

MS = 1000.0

TURN_STAGES = [
    ("delivery", "fake network: the frame completing end of speech is handed out late by"),
    ("input_to_vad", "frame hand-out → the VAD's end-of-speech event"),
    ("vad_to_llm", "VAD end of speech → LLM request, minus the endpointing wait"),
    ("llm", "LLM request → first token, minus ttft"),
    ("token_to_tts", "first token → TTS input"),
    ("tts", "TTS first text → first audio, minus ttfb"),
    ("audio_to_sink", "TTS first audio → sink"),
]
INTERRUPT_STAGES = [
    ("delivery", "fake network: the frame crossing the threshold is handed out late by"),
    ("input_to_vad", "frame hand-out → threshold event (not in the total)"),
    ("clear", "threshold event → clear_buffer (the total)"),
    ("llm_cancelled", "threshold event → LLM stream cancelled (side effect)"),
    ("tts_cancelled", "threshold event → TTS stream cancelled (side effect)"),
]


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {"n": len(values), "p50": percentile(values, 0.50), "p95": percentile(values, 0.95),
            "p99": percentile(values, 0.99), "max": max(values),
            "mean": sum(values) / len(values)}


def session_samples(p: Probe) -> dict[str, Any]:
    """The latencies of one session (ms) and what is missing."""
    out: dict[str, Any] = {"turns": [], "interrupts": [], "missing": []}
    if p.t0 is None:
        out["missing"].append("no audio input")
        return out
    t0 = p.t0
    script = p.script
    for u in script.utterances:
        if u.reply is None:
            continue
        reply = script.replies[u.reply]
        r = reply.index
        if reply.text:
            eot = t0 + u.end + MIN_DELAY
            sink = p.sink_first_frame.get(r)
            if sink is None:
                out["missing"].append(f"no audio for reply {r}")
                continue
            total = sink - eot - LLM_TTFT - TTS_TTFB
            stages = {}
            vad_end = p.vad_end.get(u.index)
            req = p.llm_request.get(r)
            tok = p.llm_first_token.get(r)
            text = p.tts_first_text.get(r)
            audio = p.tts_first_audio.get(r)
            late = p.frame_late.get(f"end:{u.index}")
            if None not in (vad_end, req, tok, text, audio, late):
                vad_nominal = t0 + u.end + VAD_END_FRAMES * FRAME
                stages = {
                    "delivery": late,
                    "input_to_vad": vad_end - vad_nominal - late,
                    "vad_to_llm": req - vad_end - (MIN_DELAY - VAD_END_FRAMES * FRAME),
                    "llm": tok - req - LLM_TTFT,
                    "token_to_tts": text - tok,
                    "tts": audio - text - TTS_TTFB,
                    "audio_to_sink": sink - audio,
                }
            rec = {"reply": r, "total": total * MS, **{k: v * MS for k, v in stages.items()}}
            if stages:
                # without the fakes' own timer lateness: network delivery, LLM ttft, TTS ttfb
                rec["plumbing"] = (total - stages["delivery"] - stages["llm"]
                                   - stages["tts"]) * MS
            out["turns"].append(rec)
    for u in script.utterances:
        if u.interrupts is None:
            continue
        th = p.vad_threshold.get(u.index)
        if th is None:
            out["missing"].append(f"no threshold event for utterance {u.index}")
            continue
        clears = [t for t, _r in p.clears if t >= th]
        if not clears:
            out["missing"].append(f"interruption of reply {u.interrupts} not cleared")
            continue
        frame_out = t0 + u.start + VAD_START_FRAMES * FRAME
        late = p.frame_late.get(f"threshold:{u.index}", 0.0)
        rec = {"total": (clears[0] - th) * MS, "delivery": late * MS,
               "input_to_vad": (th - frame_out - late) * MS}
        r = u.interrupts
        if r in p.llm_cancelled:
            rec["llm_cancelled"] = (p.llm_cancelled[r] - th) * MS
        if r in p.tts_cancelled:
            rec["tts_cancelled"] = (p.tts_cancelled[r] - th) * MS
        out["interrupts"].append(rec)
    has_tool = any(r.tool for r in script.replies)
    if has_tool and p.handoff_supported:
        if p.tool_return is None or p.on_enter_new is None:
            out["missing"].append("no handoff")
        else:
            out["handoff"] = (p.on_enter_new - p.tool_return) * MS
    return out


def summarize(probes: list[Probe]) -> dict[str, Any]:
    turns: list[dict] = []
    interrupts: list[dict] = []
    handoffs: list[float] = []
    starts: list[float] = []
    closes: list[float] = []
    failed: list[dict] = []
    unexpected_llm = 0
    for p in probes:
        s = session_samples(p)
        turns += s["turns"]
        interrupts += s["interrupts"]
        if "handoff" in s:
            handoffs.append(s["handoff"])
        if p.start_latency is not None:
            starts.append(p.start_latency * MS)
        if p.close_latency is not None:
            closes.append(p.close_latency * MS)
        unexpected_llm += len(p.llm_other)
        reasons = ([p.error] if p.error else []) + s["missing"]
        if reasons:
            failed.append({"session": p.index, "reasons": reasons[:4]})
    turn_stages = {k: _stats([t[k] for t in turns if k in t]) for k, _ in TURN_STAGES}
    int_stages = {k: _stats([t[k] for t in interrupts if k in t]) for k, _ in INTERRUPT_STAGES
                  if k != "clear"}
    return {
        "sessions": len(probes),
        "failed_sessions": len(failed),
        "failures": failed[:20],
        "turn_overhead_ms": _stats([t["total"] for t in turns]),
        "turn_plumbing_ms": _stats([t["plumbing"] for t in turns if "plumbing" in t]),
        "turn_stages_ms": turn_stages,
        "interruption_ms": _stats([t["total"] for t in interrupts]),
        "interruption_stages_ms": int_stages,
        "handoff_ms": _stats(handoffs),
        "start_ms": _stats(starts),
        "close_ms": _stats(closes),
        "unexpected_llm_requests": unexpected_llm,
    }
