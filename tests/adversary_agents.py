"""The agents the adversarial property tests play against: a front desk that looks things up,
hands off to sales and back, and asks for details through an AgentTask that can nest another
one. Every hook and tool is ordinary user code; the runner instruments them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import trio
from hypothesis import strategies as st

from agents_trio import Agent, AgentTask, RunContext, SpeechHandle, ToolError, function_tool

GoodbyeMode = Literal["say", "reply", "both"]


@dataclass
class Farewell:
    """One goodbye an ``on_exit`` said: its words (``say``) or None (a generated reply), its
    handle (None when saying it raised ``error``)."""

    agent_id: str
    kind: Literal["say", "reply"]
    at: float
    words: str | None = None
    handle: SpeechHandle | None = None
    error: BaseException | None = None


@dataclass
class Farewells:
    """How the agents say goodbye in ``on_exit`` (``mode``; None: they do not), what they
    said, and when one of their tools asked for the close."""

    mode: GoodbyeMode | None = None
    said: list[Farewell] = field(default_factory=list)
    close_requests: list[float] = field(default_factory=list)

    def goodbye(self, agent: Agent) -> None:
        """Say goodbye as ``agent`` (from its ``on_exit``)."""
        if self.mode in ("say", "both"):
            words = f"goodbye from {agent.id}, and thank you for calling ({len(self.said)})."
            self._speak(agent, "say", lambda: agent.session.say(words), words)
        if self.mode in ("reply", "both"):
            self._speak(agent, "reply", lambda: agent.session.generate_reply(
                instructions=f"say goodbye as {agent.id}"), None)

    def _speak(self, agent: Agent, kind: Literal["say", "reply"], speak: Any,
               words: str | None) -> None:
        farewell = Farewell(agent_id=agent.id, kind=kind, at=trio.current_time(), words=words)
        self.said.append(farewell)
        try:
            farewell.handle = speak()
        except RuntimeError as e:  # the agent can no longer speak: recorded, checked
            farewell.error = e


SILENT = Farewells()


class Polite:
    """The ``on_exit`` of the agents below: their goodbye, if they have one."""

    farewells: Farewells

    async def on_exit(self) -> None:
        self.farewells.goodbye(self)  # type: ignore[arg-type]


class CloseTools:
    """Tools that close the session from inside it, as a hang-up tool would."""

    farewells: Farewells

    @function_tool
    async def hang_up(self, ctx: RunContext) -> str:
        """End the call now."""
        self.farewells.close_requests.append(trio.current_time())
        ctx.session.shutdown(drain=False)
        return "hanging up"

    @function_tool
    async def leave(self, ctx: RunContext) -> str:
        """Close the session and wait for it."""
        self.farewells.close_requests.append(trio.current_time())
        await ctx.session.aclose()
        return "left"  # not reached: the close cancels the tool that awaits it


class Desk(Polite, CloseTools, Agent):
    """The front desk. With ``consent``, sales asks for consent in its ``on_enter`` (an
    AgentTask awaited from a hook) and writes how that await ended to ``journal``. With
    ``farewells``, every agent and task says goodbye in ``on_exit`` as it says, and the desk
    and the details task may close the session from a tool (``hang_up``, ``leave``)."""

    def __init__(self, *, consent: bool = False, journal: list[str] | None = None,
                 farewells: Farewells = SILENT) -> None:
        super().__init__(instructions="You are the front desk.", id="desk")
        self.consent = consent
        self.journal = journal if journal is not None else []
        self.farewells = farewells

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
        return (Sales(consent=self.consent, journal=self.journal, farewells=self.farewells),
                "transferring you to sales")

    @function_tool
    async def ask_details(self, ctx: RunContext) -> str:
        """Ask the user for details."""
        return f"details: {await Details(self.farewells)}"


class Sales(Polite, Agent):
    def __init__(self, *, consent: bool = False, journal: list[str] | None = None,
                 farewells: Farewells = SILENT) -> None:
        super().__init__(instructions="You are sales.", id="sales")
        self.consent = consent
        self.journal = journal if journal is not None else []
        self.farewells = farewells

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="greet the customer")
        if not self.consent:
            return
        try:
            self.journal.append(f"consent: {await Consent(self.farewells)}")
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
        return Desk(consent=self.consent, journal=self.journal, farewells=self.farewells)


class _Escalate:
    """A task's tool that hands off from inside the task (the task is replaced)."""

    farewells: Farewells

    @function_tool
    async def escalate(self, ctx: RunContext) -> Any:
        """Hand the caller over to sales."""
        return Sales(farewells=self.farewells), "escalating to sales"


class Details(Polite, CloseTools, _Escalate, AgentTask[str]):
    def __init__(self, farewells: Farewells = SILENT) -> None:
        super().__init__(instructions="Ask for the details.", id="details")
        self.farewells = farewells

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
        return f"follow-up: {await Deeper(self.farewells)}"


class Deeper(Polite, AgentTask[str]):
    def __init__(self, farewells: Farewells = SILENT) -> None:
        super().__init__(instructions="Ask a follow-up question.", id="deeper")
        self.farewells = farewells

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="ask the follow-up question")

    @function_tool
    async def finish(self, ctx: RunContext, value: str) -> None:
        """Record the answer.

        Args:
            value: The answer
        """
        self.complete(value)


class Consent(Polite, _Escalate, AgentTask[bool]):
    def __init__(self, farewells: Farewells = SILENT) -> None:
        super().__init__(instructions="Ask for consent.", id="consent")
        self.farewells = farewells

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
    "escalate": {},
}
"""What the LLM may call (the current agent may lack a tool: the runtime answers with an
error output, which is part of the exploration)."""

CLOSE_TOOLS: dict[str, Any] = {"hang_up": {}, "leave": {}}
"""The tools that close the session from inside it (the desk's and the details task's)."""
