"""A handoff queued behind another, while the agent it leaves starts an AgentTask in its
``on_enter``.

Found by the goodbye properties (a desk's goodbye reply asked for a second transfer to
sales; the first sales awaited ``Consent`` in its ``on_enter``): the second handoff drained
the first sales while ``Consent`` held the floor. Sales's ``on_exit`` ran under the task,
its end cancelled the task from outside (the task's ``on_exit`` could no longer speak), and
the history showed ``consent -> sales`` then ``sales -> sales``.

A handoff leaves the agent that holds the floor when it is taken up, as LiveKit's
``update_agent`` does: here the task, which is replaced (its awaiter gets a ``ToolError``,
its ``on_exit`` says goodbye), then the agent that awaited it, whose goodbye plays too,
before the new agent enters.
"""

from __future__ import annotations

import trio

from agents_trio import Agent, AgentSession, AgentTask, RunContext, ToolError, function_tool
from agents_trio.testing import FakeLLM


class Consent(AgentTask[bool]):
    def __init__(self, journal: list[str]) -> None:
        super().__init__(instructions="Ask for consent.", id="consent")
        self.journal = journal

    async def on_enter(self) -> None:
        self.journal.append("consent.on_enter")
        self.session.generate_reply(instructions="ask for consent")

    async def on_exit(self) -> None:
        try:
            self.session.say("consent says goodbye")
            self.journal.append("consent.on_exit said goodbye")
        except RuntimeError as e:
            self.journal.append(f"consent.on_exit could not speak: {e}")

    @function_tool
    async def agree(self, ctx: RunContext) -> None:
        """The user agrees."""
        self.complete(True)


class Sales(Agent):
    def __init__(self, name: str, journal: list[str]) -> None:
        super().__init__(instructions="You are sales.", id=name)
        self.journal = journal

    async def on_enter(self) -> None:
        self.journal.append(f"{self.id}.on_enter")
        self.session.generate_reply(instructions="greet the customer")
        try:
            self.journal.append(f"{self.id} consent: {await Consent(self.journal)}")
        except ToolError as e:
            self.journal.append(f"{self.id} consent: ToolError {e}")

    async def on_exit(self) -> None:
        self.journal.append(f"{self.id}.on_exit")


class Desk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.", id="desk")


def _handoffs(session: AgentSession) -> list[tuple[str | None, str]]:
    return [(i.old_agent_id, i.new_agent_id) for i in session.history.items
            if i.type == "agent_handoff"]


async def test_a_queued_handoff_replaces_the_task_the_leaving_agent_started(autojump_clock):
    journal: list[str] = []
    first, second = Sales("sales_1", journal), Sales("sales_2", journal)
    async with AgentSession(llm=FakeLLM()) as session:
        await session.start(Desk())
        session.update_agent(first)
        session.update_agent(second)  # queued: taken up once the first one has entered
        await trio.sleep(30)  # the second sales awaits its own Consent by then
        assert _handoffs(session) == [(None, "desk"), ("desk", "sales_1"),
                                      ("sales_1", "consent"), ("consent", "sales_1"),
                                      ("sales_1", "sales_2"), ("sales_2", "consent")], journal
    # the first sales's task was replaced: it said goodbye while it could still speak, its
    # awaiter was told, then the first sales left, before the second one entered
    assert journal[:6] == [
        "sales_1.on_enter", "consent.on_enter", "consent.on_exit said goodbye",
        "sales_1 consent: ToolError AgentTask consent ended: another agent took over",
        "sales_1.on_exit", "sales_2.on_enter"], journal
    said = [i.text_content for i in session.history.items
            if i.type == "message" and i.role == "assistant"]
    assert "consent says goodbye" in said, said


class SlowGoodbyeConsent(Consent):
    """Its ``on_exit`` takes a second before it says goodbye: a close comes meanwhile."""

    async def on_exit(self) -> None:
        await trio.sleep(1.0)
        await super().on_exit()


class PoliteSales(Sales):
    """Says goodbye in ``on_exit``; its consent task takes its time to leave."""

    async def on_enter(self) -> None:
        self.journal.append(f"{self.id}.on_enter")
        try:
            self.journal.append(f"{self.id} consent: {await SlowGoodbyeConsent(self.journal)}")
        except ToolError as e:
            self.journal.append(f"{self.id} consent: ToolError {e}")

    async def on_exit(self) -> None:
        try:
            self.session.say(f"{self.id} says goodbye")
            self.journal.append(f"{self.id}.on_exit said goodbye")
        except RuntimeError as e:
            self.journal.append(f"{self.id}.on_exit could not speak: {e}")


async def test_a_close_while_the_handoff_replaces_the_task_gives_the_floor_back(autojump_clock):
    """The close drops the handoff that was replacing the task: the task is cancelled, the
    agent that awaited it gets the floor back and says its goodbye before the close ends."""
    journal: list[str] = []
    first, second = PoliteSales("sales_1", journal), PoliteSales("sales_2", journal)
    async with AgentSession(llm=FakeLLM(), close_grace=3.0) as session:
        await session.start(Desk())
        session.update_agent(first)
        session.update_agent(second)
        await trio.sleep(0.5)  # the second handoff is draining the consent task
        assert session.current_agent is not first
        await session.aclose()
    assert "sales_2.on_enter" not in journal, journal
    assert "sales_1.on_exit said goodbye" in journal, journal
    assert not [j for j in journal if "could not speak" in j], journal
    said = [i.text_content for i in session.history.items
            if i.type == "message" and i.role == "assistant"]
    assert "sales_1 says goodbye" in said, said


class Other(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="other", id="other")


class Inner(AgentTask[str]):
    def __init__(self) -> None:
        super().__init__(instructions="inner", id="inner")


class Root(Agent):
    """Awaits a task in its ``on_enter``; says goodbye in its ``on_exit``."""

    def __init__(self, journal: list[str]) -> None:
        super().__init__(instructions="root", id="root")
        self.journal = journal

    async def on_enter(self) -> None:
        try:
            await Inner()
        except ToolError as e:
            self.journal.append(f"root: ToolError {e}")

    async def on_exit(self) -> None:
        try:
            self.session.say("root says goodbye")
            self.journal.append("root.on_exit said goodbye")
        except RuntimeError as e:
            self.journal.append(f"root.on_exit could not speak: {e}")


async def test_a_close_right_after_update_agent_replaces_a_task_lets_the_parent_say_goodbye(
        autojump_clock):
    """update_agent() names another agent while a task holds the floor, and the close comes
    before the handoff completes: the new agent never starts, so the floor goes back to the
    agent that awaited the task, whose goodbye plays."""
    journal: list[str] = []
    async with AgentSession(llm=FakeLLM(), close_grace=3.0) as session:
        await session.start(Root(journal))
        await trio.sleep(1.0)
        assert isinstance(session.current_agent, Inner)
        session.update_agent(Other())
        await session.aclose()
    assert journal == ["root: ToolError AgentTask inner is cancelled",
                       "root.on_exit said goodbye"], journal
    said = [i.text_content for i in session.history.items
            if i.type == "message" and i.role == "assistant"]
    assert said == ["root says goodbye"], said


async def test_the_agent_under_a_replaced_task_says_its_goodbye_before_the_next_enters(
        autojump_clock):
    journal: list[str] = []
    first, second = PoliteSales("sales_1", journal), PoliteSales("sales_2", journal)
    async with AgentSession(llm=FakeLLM()) as session:
        await session.start(Desk())
        session.update_agent(first)
        session.update_agent(second)
        await trio.sleep(30)
        said = [(i.text_content, i.interrupted) for i in session.history.items
                if i.type == "message" and i.role == "assistant"]
        assert said == [("consent says goodbye", False), ("sales_1 says goodbye", False)], said
    assert journal[:6] == [
        "sales_1.on_enter", "consent.on_enter", "consent.on_exit said goodbye",
        "sales_1 consent: ToolError AgentTask consent ended: another agent took over",
        "sales_1.on_exit said goodbye", "sales_2.on_enter"], journal


class Stubborn(Sales):
    """Told that its consent task ended, it asks for consent again."""

    async def on_enter(self) -> None:
        self.journal.append(f"{self.id}.on_enter")
        for _ in range(2):
            try:
                self.journal.append(f"{self.id} consent: {await Consent(self.journal)}")
            except ToolError as e:
                self.journal.append(f"{self.id} consent: ToolError {e}")


async def test_an_agent_left_for_a_handoff_starts_no_new_task(autojump_clock):
    """The agent under a replaced task is leaving: a new task it awaits (but from its
    ``on_exit``) is refused at once, rather than taking the floor from the handoff."""
    journal: list[str] = []
    first, second = Stubborn("sales_1", journal), Sales("sales_2", journal)
    async with AgentSession(llm=FakeLLM()) as session:
        await session.start(Desk())
        session.update_agent(first)
        session.update_agent(second)
        await trio.sleep(30)
        assert _handoffs(session)[:5] == [(None, "desk"), ("desk", "sales_1"),
                                          ("sales_1", "consent"), ("consent", "sales_1"),
                                          ("sales_1", "sales_2")], journal
    assert journal[:7] == [
        "sales_1.on_enter", "consent.on_enter", "consent.on_exit said goodbye",
        "sales_1 consent: ToolError AgentTask consent ended: another agent took over",
        "sales_1 consent: ToolError AgentTask consent not started: 'sales_1', which awaited "
        "it, is leaving", "sales_1.on_exit", "sales_2.on_enter"], journal


class SlowDesk(Desk):
    async def on_exit(self) -> None:
        await trio.sleep(1.0)


async def test_the_last_agent_named_stays_current_agent_while_the_first_handoff_drains(
        autojump_clock):
    journal: list[str] = []
    first, second = Sales("sales_1", journal), Sales("sales_2", journal)
    async with AgentSession(llm=FakeLLM()) as session:
        await session.start(SlowDesk())
        session.update_agent(first)
        session.update_agent(second)
        assert session.current_agent is second
        await trio.sleep(0.5)  # the desk's on_exit runs: the first handoff drains it
        assert session.current_agent is second
