"""The agents the adversarial property tests play against: a front desk that looks things up,
hands off to sales and back, and asks for details through an AgentTask that can nest another
one. Every hook and tool is ordinary user code; the runner instruments them."""

from __future__ import annotations

from typing import Any

import trio
from hypothesis import strategies as st

from agents_trio import Agent, AgentTask, RunContext, ToolError, function_tool


class Desk(Agent):
    """The front desk. With ``consent``, sales asks for consent in its ``on_enter`` (an
    AgentTask awaited from a hook) and writes how that await ended to ``journal``."""

    def __init__(self, *, consent: bool = False, journal: list[str] | None = None) -> None:
        super().__init__(instructions="You are the front desk.", id="desk")
        self.consent = consent
        self.journal = journal if journal is not None else []

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet the user")

    @function_tool
    async def lookup(self, ctx: RunContext, topic: str) -> str:
        """Look something up.

        Args:
            topic: What to look up
        """
        return f"{topic}: sunny"

    @function_tool
    async def note(self, ctx: RunContext, text: str) -> None:
        """Take a note (no reply needed).

        Args:
            text: The note
        """

    @function_tool
    async def transfer(self, ctx: RunContext) -> Any:
        """Transfer to sales."""
        return Sales(consent=self.consent, journal=self.journal), "transferring you to sales"

    @function_tool
    async def ask_details(self, ctx: RunContext) -> str:
        """Ask the user for details."""
        return f"details: {await Details()}"


class Sales(Agent):
    def __init__(self, *, consent: bool = False, journal: list[str] | None = None) -> None:
        super().__init__(instructions="You are sales.", id="sales")
        self.consent = consent
        self.journal = journal if journal is not None else []

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet the customer")
        if not self.consent:
            return
        try:
            self.journal.append(f"consent: {await Consent()}")
        except ToolError as e:
            self.journal.append(f"consent: ToolError {e}")
        except trio.Cancelled:
            self.journal.append("consent: cancelled")
            raise

    @function_tool
    async def lookup(self, ctx: RunContext, topic: str) -> str:
        """Look a price up.

        Args:
            topic: What to price
        """
        return f"{topic}: 10 euros"

    @function_tool
    async def back(self, ctx: RunContext) -> Any:
        """Back to the front desk."""
        return Desk(consent=self.consent, journal=self.journal)


class Details(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask for the details.", id="details")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask for the details")

    @function_tool
    async def finish(self, ctx: RunContext, value: str) -> None:
        """Record the details.

        Args:
            value: The details
        """
        self.complete(value)

    @function_tool
    async def deeper(self, ctx: RunContext) -> str:
        """Ask a follow-up question."""
        return f"follow-up: {await Deeper()}"


class Deeper(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask a follow-up question.", id="deeper")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask the follow-up question")

    @function_tool
    async def finish(self, ctx: RunContext, value: str) -> None:
        """Record the answer.

        Args:
            value: The answer
        """
        self.complete(value)


class Consent(AgentTask[bool]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask for consent.", id="consent")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask for consent")

    @function_tool
    async def agree(self, ctx: RunContext) -> None:
        """The user agrees."""
        self.complete(True)


TOOLS: dict[str, Any] = {
    "lookup": st.fixed_dictionaries({"topic": st.sampled_from(["weather", "price"])}),
    "note": {"text": "call back"},
    "transfer": {},
    "back": {},
    "ask_details": {},
    "deeper": {},
    "finish": {"value": "42"},
    "agree": {},
}
"""What the LLM may call (the current agent may lack a tool: the runtime answers with an
error output, which is part of the exploration)."""
