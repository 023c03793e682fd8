"""Helpers for timeline tests: record every session event with its script time."""

from __future__ import annotations

from typing import Any

from agents_trio import AgentSession


class Recorder:
    """Records session events and playback events; ``t0`` is set after the run."""

    NAMES = ["agent_state_changed", "user_state_changed", "user_input_transcribed",
             "conversation_item_added", "function_tools_executed", "metrics_collected",
             "speech_created", "agent_false_interruption", "error", "close"]

    def __init__(self, session: AgentSession) -> None:
        self.events: list[tuple[str, Any]] = []
        self.t0 = 0.0
        for name in self.NAMES:
            session.on(name, lambda ev, name=name: self.events.append((name, ev)))
        session.output.audio.on("playback_finished",
                                lambda ev: self.events.append(("playback_finished", ev)))
        session.output.audio.on("playback_started",
                                lambda ev: self.events.append(("playback_started", ev)))

    def of(self, name: str) -> list[Any]:
        return [ev for n, ev in self.events if n == name]

    def t(self, ev: Any) -> float:
        return ev.created_at - self.t0

    def agent_states(self) -> list[tuple[str, float]]:
        return [(ev.new_state, round(self.t(ev), 2)) for ev in self.of("agent_state_changed")]

    def dump(self) -> str:
        lines = []
        for name, ev in self.events:
            if name == "metrics_collected" and ev.metrics.type == "vad_metrics":
                continue
            detail = {k: getattr(ev, k) for k in ev.__struct_fields__
                      if k not in ("created_at", "type", "speech_handle")}
            lines.append(f"{self.t(ev):7.2f} {name} {detail}")
        return "\n".join(lines)
