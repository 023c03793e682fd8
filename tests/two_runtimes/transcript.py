"""LiveKit's session events as the lines ``python AGENT console --text`` prints on agents_trio.

agents_trio's text console prints, as they happen: ``user: …`` and ``agent: …`` when a
message is added (`` [interrupted]`` when cut short), ``  tool: name(arguments) -> output``
when a tool call has been executed, ``  handoff: A -> B`` when an agent takes over (not the
first agent's start). :class:`LiveTranscript` builds the same lines from a LiveKit
``AgentSession``'s events: ``conversation_item_added``, ``function_tools_executed``, and the
handoff items of its history (LiveKit emits no event for those; they are picked up, in
history order, at each event).
"""

from __future__ import annotations

from typing import Any


class LiveTranscript:
    def __init__(self, session: Any) -> None:
        self.session = session
        self.lines: list[str] = []
        self._handoffs_seen: set[str] = set()

    def attach(self) -> None:
        self.session.on("conversation_item_added", self._on_item)
        self.session.on("function_tools_executed", self._on_tools)

    def _catch_up_handoffs(self) -> None:
        for item in self.session.history.items:
            if getattr(item, "type", None) == "agent_handoff" and item.id not in self._handoffs_seen:
                self._handoffs_seen.add(item.id)
                if item.old_agent_id is not None:
                    self.lines.append(f"  handoff: {item.old_agent_id} -> {item.new_agent_id}")

    def _on_item(self, ev: Any) -> None:
        self._catch_up_handoffs()
        item = ev.item
        if getattr(item, "type", None) == "message" and item.role in ("user", "assistant"):
            who = "agent" if item.role == "assistant" else "user"
            mark = " [interrupted]" if item.interrupted else ""
            self.lines.append(f"{who}: {item.text_content or ''}{mark}")

    def _on_tools(self, ev: Any) -> None:
        self._catch_up_handoffs()
        for call, output in zip(ev.function_calls, ev.function_call_outputs):
            if output is None:
                result = "(no output)"
            elif output.is_error:
                result = f"error: {output.output}"
            else:
                result = output.output
            self.lines.append(f"  tool: {call.name}({call.arguments}) -> {result}")
