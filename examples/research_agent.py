"""An assistant with nested AgentTasks, a slow task and a slow tool — and what closing it does.

    python examples/research_agent.py

The assistant has three tools: ``research_topic`` awaits a ResearchTask, whose ``go_deeper``
tool awaits a DeepResearchTask; ``start_slow_task`` awaits a SlowTask that works for 30 s;
``lookup_weather`` calls a weather service that takes 30 s. Closing the session at any moment
unwinds the tasks innermost first: every ``on_exit`` whose ``on_enter`` ran runs once, the tool
awaiting a cancelled task gets an error output, the slow tool is cancelled (its ``finally``
runs), and ``close`` is the last event. The demo below closes while the deep research runs.
"""

from __future__ import annotations

import trio
import trio.testing

from agents_trio import Agent, AgentSession, AgentTask, FunctionToolCall, RunContext, function_tool
from agents_trio.testing import FakeActions, FakeLLM


class Journal:
    """Where the agents write what happened (the tests read it)."""

    def __init__(self) -> None:
        self.entries: list[str] = []

    def __call__(self, entry: str) -> None:
        self.entries.append(entry)


class DeepResearchTask(AgentTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(instructions="Dig deeper into the topic with the user.")
        self.journal = journal

    async def on_enter(self) -> None:
        self.journal("deep.on_enter")
        self.session.generate_reply(instructions="ask what to dig into")

    async def on_exit(self) -> None:
        self.journal("deep.on_exit")

    @function_tool
    async def summarize(self, ctx: RunContext, findings: str) -> None:
        """Finish the deep research.

        Args:
            findings: What was found
        """
        self.complete(findings)


class ResearchTask(AgentTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(instructions="Research a topic with the user.")
        self.journal = journal

    async def on_enter(self) -> None:
        self.journal("research.on_enter")
        self.session.generate_reply(instructions="ask which aspect to research")

    async def on_exit(self) -> None:
        self.journal("research.on_exit")

    @function_tool
    async def go_deeper(self, ctx: RunContext) -> str:
        """Research one aspect in depth."""
        try:
            findings = await DeepResearchTask(self.journal)
        finally:
            self.journal("go_deeper.returned")
        return f"deep findings: {findings}"

    @function_tool
    async def finish_research(self, ctx: RunContext, summary: str) -> None:
        """Finish the research.

        Args:
            summary: The summary
        """
        self.complete(summary)


class SlowTask(AgentTask[str]):
    def __init__(self, journal: Journal) -> None:
        super().__init__(instructions="Work on something slow.")
        self.journal = journal

    async def on_enter(self) -> None:
        self.journal("slow.on_enter")
        try:
            await trio.sleep(30)
            self.complete("slow work done")
        finally:
            self.journal("slow.work_ended")

    async def on_exit(self) -> None:
        self.journal("slow.on_exit")


class Assistant(Agent):
    def __init__(self, journal: Journal) -> None:
        super().__init__(instructions="You are a research assistant.")
        self.journal = journal

    async def on_enter(self) -> None:
        self.journal("assistant.on_enter")

    async def on_exit(self) -> None:
        self.journal("assistant.on_exit")

    @function_tool
    async def research_topic(self, ctx: RunContext, topic: str) -> str:
        """Research a topic.

        Args:
            topic: The topic
        """
        try:
            summary = await ResearchTask(self.journal)
        except Exception as e:
            self.journal(f"research_topic.error: {e}")
            raise
        return f"research summary: {summary}"

    @function_tool
    async def start_slow_task(self, ctx: RunContext) -> str:
        """Start a slow task."""
        return await SlowTask(self.journal)

    @function_tool
    async def lookup_weather(self, ctx: RunContext, city: str) -> str:
        """Look up the weather (the service takes 30 s).

        Args:
            city: The city
        """
        try:
            await trio.sleep(30)
            return f"sunny in {city}"
        finally:
            self.journal("lookup_weather.finally")


def script() -> FakeActions:
    """What the fake LLM answers to each user input and instruction."""
    a = FakeActions()
    call = FunctionToolCall
    a.add_llm("", [call(name="research_topic", arguments='{"topic": "tides"}', call_id="r1")],
              input="research tides")
    a.add_llm("Which aspect?", input="ask which aspect to research")
    a.add_llm("", [call(name="go_deeper", arguments="{}", call_id="g1")], input="go deeper")
    a.add_llm("What should I dig into?", input="ask what to dig into")
    a.add_llm("", [call(name="start_slow_task", arguments="{}", call_id="s1")],
              input="start the slow task")
    a.add_llm("", [call(name="lookup_weather", arguments='{"city": "Oslo"}', call_id="w1")],
              input="weather in Oslo")
    return a


def create(journal: Journal) -> tuple[AgentSession, Assistant]:
    return AgentSession(llm=FakeLLM(script().llm_responses)), Assistant(journal)


async def main() -> None:
    journal = Journal()
    session, assistant = create(journal)
    session.on("function_tools_executed", lambda ev: journal(
        "tools: " + ", ".join(f"{c.name} -> {o.output!r}" for c, o in ev.zipped())))
    session.on("close", lambda ev: journal(f"close ({ev.reason})"))
    async with session:
        await session.start(assistant)
        await session.run(user_input="research tides")
        await session.run(user_input="go deeper")
        print("current agent:", type(session.current_agent).__name__)
        await session.aclose()
    for entry in journal.entries:
        print(entry)


if __name__ == "__main__":
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
