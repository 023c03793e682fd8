"""A clinic receptionist: a TaskGroup that verifies intent, identifies the patient and
schedules a visit, one user turn per step.

    python examples/clinic_receptionist.py

Each user turn is one ``session.run()``. A step's tool calls ``complete()``, which sets off a
cascade — the TaskGroup resumes, the next task starts and its ``on_enter`` speaks — and the run
captures all of it before returning, while the next task waits for the user.
"""

from __future__ import annotations

import trio
import trio.testing

from agents_trio import (Agent, AgentSession, AgentTask, FunctionToolCall, RunContext, TaskGroup,
                         TaskGroupResult, function_tool)
from agents_trio.testing import FakeActions, FakeLLM


class VerifyIntent(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Find out why the caller is calling.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask how you can help")

    @function_tool
    async def record_intent(self, ctx: RunContext, intent: str) -> None:
        """Record why the caller is calling.

        Args:
            intent: One of book_visit, cancel_visit, question
        """
        self.complete(intent)


class IdentifyPatient(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Identify the patient by name and date of birth.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask for name and date of birth")

    @function_tool
    async def record_patient(self, ctx: RunContext, name: str, date_of_birth: str) -> None:
        """Record the patient.

        Args:
            name: Full name
            date_of_birth: Date of birth, YYYY-MM-DD
        """
        self.complete(f"{name} ({date_of_birth})")


class ScheduleVisit(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Schedule a visit.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask for a preferred day")

    @function_tool
    async def book(self, ctx: RunContext, day: str) -> None:
        """Book the visit.

        Args:
            day: The day of the visit
        """
        self.complete(f"booked on {day}")


class Receptionist(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the receptionist of a clinic.")
        self.result: TaskGroupResult | None = None

    async def on_enter(self) -> None:
        group = TaskGroup(summarize_chat_ctx=False)
        group.add(VerifyIntent, id="intent", description="why the caller is calling")
        group.add(IdentifyPatient, id="patient", description="who the patient is")
        group.add(ScheduleVisit, id="visit", description="when the visit is")
        self.result = await group
        self.session.generate_reply(instructions="confirm the booking and say goodbye")


def script() -> FakeActions:
    a = FakeActions()
    call = FunctionToolCall
    a.add_llm("Hello, how can I help you today?", input="ask how you can help")
    a.add_llm("", [call(name="record_intent", arguments='{"intent": "book_visit"}',
                        call_id="c1")], input="I'd like to book a visit")
    a.add_llm("May I have your name and date of birth?", input="ask for name and date of birth")
    a.add_llm("", [call(name="record_patient",
                        arguments='{"name": "Ada Lovelace", "date_of_birth": "1815-12-10"}',
                        call_id="c2")], input="Ada Lovelace, born December 10, 1815")
    a.add_llm("Which day would suit you?", input="ask for a preferred day")
    a.add_llm("", [call(name="book", arguments='{"day": "Tuesday"}', call_id="c3")],
              input="Tuesday please")
    a.add_llm("You're booked for Tuesday. Goodbye!",
              input="confirm the booking and say goodbye")
    return a


TURNS = ["I'd like to book a visit", "Ada Lovelace, born December 10, 1815", "Tuesday please"]


async def main() -> None:
    session = AgentSession(llm=FakeLLM(script().llm_responses))
    async with session:
        await session.start(Receptionist())
        for text in TURNS:
            result = await session.run(user_input=text)
            print(f"user: {text}")
            for ev in result.events:
                item = ev.item
                if ev.type == "message":
                    print(f"  agent: {item.text_content}")
                elif ev.type == "agent_handoff":
                    print(f"  handoff -> {type(ev.new_agent).__name__}")
                else:
                    print(f"  {ev.type}: {getattr(item, 'name', '')} "
                          f"{getattr(item, 'arguments', getattr(item, 'output', ''))}")


if __name__ == "__main__":
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
