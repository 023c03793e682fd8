"""A two-agent realtime conversation: handoff to a second agent and transfer back.

    python examples/realtime_handoff.py            # FakeRealtimeModel, virtual time
    OPENAI_API_KEY=... python examples/realtime_handoff.py --real
        # OpenAI Realtime through the LiveKit plugin bridge (needs
        # pip install 'agents-trio[livekit-plugins]' livekit-plugins-openai)

The concierge talks to a speech-to-speech model. "Book a table" awaits a BookingTask (the
concierge pauses: its realtime session closes, the task gets its own), and when the task
completes the concierge resumes with a fresh live session and answers the tool's result. "Wine
please" hands off to the sommelier for good. Runs on FakeRealtimeModel in virtual time; every
session is a child of the activity that uses it, so the printout shows at most one live session
at any moment and none after close.
"""

from __future__ import annotations

import trio
import trio.testing

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, RunContext,
                         function_tool)
from agents_trio.testing import FakeAudioInput, FakeAudioOutput, FakeRealtimeModel


class BookingTask(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Take a table booking: ask for the time.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask for the time")

    @function_tool
    async def confirm_time(self, ctx: RunContext, time: str) -> None:
        """Confirm the booking time.

        Args:
            time: The time of the booking
        """
        self.complete(time)


class Sommelier(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You recommend wine.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="introduce yourself as the sommelier")


class Concierge(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the concierge of a restaurant.")

    @function_tool
    async def book_table(self, ctx: RunContext) -> str:
        """Book a table."""
        time = await BookingTask()
        return f"booked for {time}"

    @function_tool
    async def call_sommelier(self, ctx: RunContext):
        """Hand the guest to the sommelier."""
        return Sommelier()


def fake_model() -> FakeRealtimeModel:
    call = FunctionToolCall
    model = FakeRealtimeModel()
    model.add_response("Book a table", "", function_calls=[call(name="book_table", call_id="")])
    model.add_response("ask for the time", "For what time?", audio_duration=1.0)
    model.add_response("Eight tonight", "", function_calls=[
        call(name="confirm_time", arguments='{"time": "8 pm"}', call_id="")])
    model.add_response("booked for 8 pm", "Your table is booked for 8 pm.", audio_duration=1.5)
    model.add_response("Wine please", "Let me get the sommelier.", audio_duration=1.0,
                       function_calls=[call(name="call_sommelier", call_id="")])
    model.add_response("introduce yourself as the sommelier", "Good evening, I'm the sommelier.",
                       audio_duration=1.5)
    return model


async def main() -> None:
    model = fake_model()
    session = AgentSession(llm=model)
    session.input.audio = FakeAudioInput()
    session.output.audio = FakeAudioOutput()

    def show(ev) -> None:
        item = ev.item
        if item.type == "agent_handoff":
            line = f"handoff {item.old_agent_id} -> {item.new_agent_id}"
        else:
            line = f"{item.role}: {item.text_content}"
        live = ", ".join(s.id for s in model.live_sessions) or "none"
        print(f"{trio.current_time():6.2f}s  {line:<50} live sessions: {live}")

    session.on("conversation_item_added", show)
    async with session:
        await session.start(Concierge())
        for text in ["Book a table", "Eight tonight", "Wine please"]:
            await session.run(user_input=text)
    print(f"after close: {len(model.live_sessions)} live sessions, "
          f"{len(model.sessions)} opened in all, violations: {model.violations or 'none'}")


async def main_real() -> None:
    """The same conversation, typed, against OpenAI Realtime through the plugin bridge."""
    from livekit.plugins import openai

    from agents_trio import open_bridge
    from agents_trio.plugins import adapt

    async with open_bridge():
        session = AgentSession(llm=adapt(openai.realtime.RealtimeModel()))
        session.on("conversation_item_added", lambda ev: print(
            ev.item.type if ev.item.type == "agent_handoff"
            else f"{ev.item.role}: {ev.item.text_content}"))
        async with session:
            await session.start(Concierge())
            for text in ["I'd like to book a table", "Eight tonight", "Could I talk to the "
                         "sommelier about wine?"]:
                await session.run(user_input=text)


if __name__ == "__main__":
    import os
    import sys

    if "--real" in sys.argv:
        if not os.environ.get("OPENAI_API_KEY"):
            sys.exit("--real needs OPENAI_API_KEY")
        trio.run(main_real)
    else:
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
