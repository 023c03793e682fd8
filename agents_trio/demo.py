"""An offline demo: a scripted voice conversation on fake models, printed as a live timeline.

    python -m agents_trio demo            # virtual time: the 20-second script runs instantly
    python -m agents_trio demo --realtime # at the pace a user would hear it
"""

from __future__ import annotations

import math
from typing import Any, Protocol, TextIO

import trio
import trio.testing

from .agent import Agent
from .chat import AgentHandoff, ChatMessage
from .events import (ConversationItemAddedEvent, FunctionToolsExecutedEvent,
                     PlaybackFinishedEvent)
from .models import FunctionToolCall
from .run_context import RunContext
from .session import AgentSession
from .testing import FakeActions, create_session, run_session
from .tools import function_tool

STORY = ("Once upon a time, a lighthouse keeper counted the ships that passed his rock, "
         "and every night he sang to them.")


class _Timestamped(Protocol):
    """An event (they all say when they happened)."""

    @property
    def created_at(self) -> float: ...


class WeatherAgent(Agent):
    """A small assistant with one tool."""

    def __init__(self) -> None:
        super().__init__(instructions="You are a friendly voice assistant.")

    async def on_enter(self) -> None:
        """Greet the user. Not a checkpoint: the greeting is scheduled at once, so a
        cancellation never leaves it half-scheduled."""
        self.session.say("Hi! Ask me about the weather, or for a story.")

    @function_tool
    async def get_weather(self, ctx: RunContext[Any], location: str) -> str:
        """Look up the weather.

        Args:
            location: The city to look up

        Note:
            Cancelling it (an interrupted reply) returns nothing; it has nothing to undo.
        """
        await trio.sleep(0.4)
        return f"It is sunny and 22 degrees in {location}."


def demo_script() -> FakeActions:
    a = FakeActions()
    a.add_tts(2.5, input="Hi! Ask me about the weather, or for a story.")
    a.add_user_speech(3.5, 5.0, "What's the weather in Lisbon?")
    a.add_llm("Let me check that for you.", tool_calls=[FunctionToolCall(
        name="get_weather", arguments='{"location": "Lisbon"}', call_id="call_1")])
    a.add_tts(1.5)
    a.add_llm("It is sunny and 22 degrees in Lisbon. Enjoy!",
              input="It is sunny and 22 degrees in Lisbon.")
    a.add_tts(2.5)
    a.add_user_speech(12.0, 13.0, "Tell me a story.")
    a.add_llm(STORY)
    a.add_tts(8.0)
    a.add_user_speech(15.5, 16.3, "Wait, stop.")
    a.add_llm("Sure, I'll stop. Anything else?")
    a.add_tts(1.8)
    return a


class TimelinePrinter:
    """Prints session events as they happen, one line each, in script time."""

    def __init__(self, session: AgentSession, out: TextIO) -> None:
        self.out = out
        self.t0 = 0.0
        self.lines: list[str] = []
        on = session.on
        on("agent_state_changed", lambda ev: self._line(
            ev, "agent", f"{ev.old_state} -> {ev.new_state}"))
        on("user_state_changed", lambda ev: self._line(
            ev, "user", f"{ev.old_state} -> {ev.new_state}"))
        on("user_input_transcribed", lambda ev: self._line(
            ev, "stt", f"{'final  ' if ev.is_final else 'interim'} {ev.transcript!r}"))
        on("conversation_item_added", self._item)
        on("function_tools_executed", self._tools)
        on("agent_false_interruption", lambda ev: self._line(ev, "resume", "false interruption"))
        on("error", lambda ev: self._line(ev, "error", repr(ev.error)))
        on("close", lambda ev: self._line(ev, "close", ev.reason))
        audio = session.output.audio
        assert audio is not None, "create_session gives the session a fake audio output"
        audio.on("playback_finished", self._playback)

    def _line(self, ev: _Timestamped, who: str, text: str) -> None:
        line = f"{ev.created_at - self.t0:7.2f}s  {who:<8} {text}"
        self.lines.append(line)
        print(line, file=self.out, flush=True)

    def _item(self, ev: ConversationItemAddedEvent) -> None:
        item = ev.item
        if isinstance(item, AgentHandoff):
            self._line(ev, "handoff", f"{item.old_agent_id} -> {item.new_agent_id}")
        elif isinstance(item, ChatMessage):
            mark = " [interrupted]" if item.interrupted else ""
            self._line(ev, item.role, f"{item.text_content!r}{mark}")

    def _tools(self, ev: FunctionToolsExecutedEvent) -> None:
        for call, output in ev.zipped():
            result = output.output if output is not None else "<no output>"
            self._line(ev, "tool", f"{call.name}({call.arguments}) -> {result!r}")

    def _playback(self, ev: PlaybackFinishedEvent) -> None:
        what = "interrupted" if ev.interrupted else "finished"
        self._line(ev, "audio", f"playback {what} at {ev.playback_position:.2f}s")


class OrderedPrinter(TimelinePrinter):
    """The timeline in time order: some events are stamped with an earlier time
    than they are reported at (the end of the user's speech is known after the VAD's silence
    window), so lines wait ``HOLD`` seconds and are printed sorted."""

    HOLD = 1.5

    def __init__(self, session: AgentSession, out: TextIO) -> None:
        super().__init__(session, out)
        self.pending: list[tuple[float, int, str]] = []

    def _line(self, ev: _Timestamped, who: str, text: str) -> None:
        self.add(ev.created_at - self.t0, who, text)

    def add(self, t: float, who: str, text: str) -> None:
        order = len(self.lines) + len(self.pending)      # ties keep their order
        self.pending.append((t, order, f"{t:7.2f}s  {who:<8} {text}"))

    def release(self, upto: float = math.inf) -> None:
        self.pending.sort()
        while self.pending and self.pending[0][0] <= upto:
            line = self.pending.pop(0)[2]
            self.lines.append(line)
            print(line, file=self.out, flush=True)

    async def run(self) -> None:
        """Print the lines older than ``HOLD`` every 0.25 s until cancelled (the way it stops);
        the lines still held are printed by ``release()``."""
        while True:
            await trio.sleep(0.25)
            self.release(trio.current_time() - self.t0 - self.HOLD)


async def run_demo(out: TextIO) -> list[str]:
    """Run the scripted weather conversation on fake models, printing its timeline to ``out``;
    returns the printed lines.

    Cancellation: cancelling it closes the session; the lines it holds back for ordering
    are printed before it returns.
    """
    session = create_session(demo_script())
    printer = OrderedPrinter(session, out)
    printer.t0 = trio.current_time()
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(printer.run)
            await run_session(session, WeatherAgent(), drain_delay=2.0)
            nursery.cancel_scope.cancel()
    finally:
        printer.release()
    return printer.lines


def main(*, realtime: bool, out: TextIO) -> list[str]:
    print("agents_trio demo: a scripted conversation on fake models (no keys, no network)",
          file=out)
    print("   time   who      what", file=out)
    if realtime:
        return trio.run(run_demo, out)
    return trio.run(run_demo, out, clock=trio.testing.MockClock(autojump_threshold=0))
