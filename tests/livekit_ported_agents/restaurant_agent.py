"""A restaurant front desk handing callers between four agents, ported from LiveKit Agents.

Source: livekit/agents, ``examples/voice_agents/restaurant_agent.py`` (the ``AgentServer``
version). Structure and facts kept: a greeter, a reservation agent, a takeaway agent and a
checkout agent in ``userdata.agents``; transfers are tools returning ``(agent, message)``;
tools shared between agents are module-level ``@function_tool()`` functions given as
``tools=[...]``; ``on_enter`` of every agent copies the last items of the previous agent's
chat context (``copy(exclude_instructions=True, exclude_function_call=False)
.truncate(max_items=6)``), adds a system message with the user data as YAML,
``update_chat_ctx()`` and ``generate_reply(tool_choice="none")``; ``max_tool_steps=5``.

Changed beyond imports and providers:
- the code is rewritten in this project's words, instructions paraphrased (same API calls);
- the checkout agent's card tools are left out (they add nothing the other tools do not test);
- ``load_dotenv()`` and the logger set-up are left out (no keys are needed).
Providers: ``openai.LLM(parallel_tool_calls=False)`` (greeter) and ``openai.LLM()`` (session)
are scripted fakes, ``cartesia.TTS(voice=...)`` / ``deepgram.STT()`` / ``silero.VAD.load()``
fakes (``fakes.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Optional

import fakes
import yaml
from pydantic import Field

from agents_trio import AgentServer, JobContext, cli
from agents_trio.llm import function_tool
from agents_trio.voice import Agent, AgentSession, RunContext

MENU = "Pizza: $10, Salad: $5, Ice Cream: $3, Coffee: $2"


@dataclass
class UserData:
    customer_name: Optional[str] = None
    customer_phone: Optional[str] = None
    reservation_time: Optional[str] = None
    order: Optional[list[str]] = None
    expense: Optional[float] = None
    checked_out: Optional[bool] = None
    agents: dict[str, Agent] = field(default_factory=dict)
    prev_agent: Optional[Agent] = None

    def summarize(self) -> str:
        return yaml.dump({
            "customer_name": self.customer_name or "unknown",
            "customer_phone": self.customer_phone or "unknown",
            "reservation_time": self.reservation_time or "unknown",
            "order": self.order or "unknown",
            "expense": self.expense or "unknown",
            "checked_out": self.checked_out or False,
        })


RunContext_T = RunContext[UserData]


@function_tool()
async def update_name(
    name: Annotated[str, Field(description="The customer's name")],
    context: RunContext_T,
) -> str:
    """Called when the user gives their name."""
    context.userdata.customer_name = name
    return f"The name is updated to {name}"


@function_tool()
async def update_phone(
    phone: Annotated[str, Field(description="The customer's phone number")],
    context: RunContext_T,
) -> str:
    """Called when the user gives their phone number."""
    context.userdata.customer_phone = phone
    return f"The phone number is updated to {phone}"


@function_tool()
async def to_greeter(context: RunContext_T) -> Agent:
    """Called when the user asks for something outside this agent's job."""
    current: BaseAgent = context.session.current_agent
    return await current._transfer_to_agent("greeter", context)


class BaseAgent(Agent):
    async def on_enter(self) -> None:
        userdata: UserData = self.session.userdata
        chat_ctx = self.chat_ctx.copy()
        if isinstance(userdata.prev_agent, Agent):
            recent = userdata.prev_agent.chat_ctx.copy(
                exclude_instructions=True, exclude_function_call=False
            ).truncate(max_items=6)
            known = {item.id for item in chat_ctx.items}
            chat_ctx.items.extend(item for item in recent.items if item.id not in known)
        chat_ctx.add_message(
            role="system",
            content=f"You are {type(self).__name__} agent. Current user data is "
                    f"{userdata.summarize()}",
        )
        await self.update_chat_ctx(chat_ctx)
        self.session.generate_reply(tool_choice="none")

    async def _transfer_to_agent(self, name: str, context: RunContext_T) -> tuple[Agent, str]:
        userdata = context.userdata
        userdata.prev_agent = context.session.current_agent
        return userdata.agents[name], f"Transferring to {name}."


class Greeter(BaseAgent):
    def __init__(self, menu: str) -> None:
        super().__init__(
            instructions=f"You greet callers of a restaurant (menu: {menu}) and send them "
                         "to reservations or takeaway with your tools.",
            llm=fakes.llm("restaurant_greeter"),
            tts=fakes.tts(),
        )
        self.menu = menu

    @function_tool()
    async def to_reservation(self, context: RunContext_T) -> tuple[Agent, str]:
        """Called when the user wants to make or change a reservation."""
        return await self._transfer_to_agent("reservation", context)

    @function_tool()
    async def to_takeaway(self, context: RunContext_T) -> tuple[Agent, str]:
        """Called when the user wants to order takeaway."""
        return await self._transfer_to_agent("takeaway", context)


class Reservation(BaseAgent):
    def __init__(self) -> None:
        super().__init__(
            instructions="You take table reservations: ask for the time, the name and the "
                         "phone number, then confirm.",
            tools=[update_name, update_phone, to_greeter],
            tts=fakes.tts(),
        )

    @function_tool()
    async def update_reservation_time(
        self,
        time: Annotated[str, Field(description="The reservation time")],
        context: RunContext_T,
    ) -> str:
        """Called when the user gives the reservation time."""
        context.userdata.reservation_time = time
        return f"The reservation time is updated to {time}"

    @function_tool()
    async def confirm_reservation(self, context: RunContext_T) -> str | tuple[Agent, str]:
        """Called when the user confirms the reservation."""
        userdata = context.userdata
        if not userdata.customer_name or not userdata.customer_phone:
            return "Please provide your name and phone number first."
        if not userdata.reservation_time:
            return "Please provide reservation time first."
        return await self._transfer_to_agent("greeter", context)


class Takeaway(BaseAgent):
    def __init__(self, menu: str) -> None:
        super().__init__(
            instructions=f"You take takeaway orders (menu: {menu}) and confirm them.",
            tools=[to_greeter],
            tts=fakes.tts(),
        )

    @function_tool()
    async def update_order(
        self,
        items: Annotated[list[str], Field(description="The items of the full order")],
        context: RunContext_T,
    ) -> str:
        """Called when the user creates or changes their order."""
        context.userdata.order = items
        return f"The order is updated to {items}"

    @function_tool()
    async def to_checkout(self, context: RunContext_T) -> str | tuple[Agent, str]:
        """Called when the user confirms the order."""
        if not context.userdata.order:
            return "No takeaway order found. Please make an order first."
        return await self._transfer_to_agent("checkout", context)


class Checkout(BaseAgent):
    def __init__(self, menu: str) -> None:
        super().__init__(
            instructions=f"You confirm the price of the order (menu: {menu}) and take "
                         "the customer's name and phone number.",
            tools=[update_name, update_phone, to_greeter],
            tts=fakes.tts(),
        )

    @function_tool()
    async def confirm_expense(
        self,
        expense: Annotated[float, Field(description="The expense of the order")],
        context: RunContext_T,
    ) -> str:
        """Called when the user confirms the expense."""
        context.userdata.expense = expense
        return f"The expense is confirmed to be {expense}"

    @function_tool()
    async def confirm_checkout(self, context: RunContext_T) -> str | tuple[Agent, str]:
        """Called when the user confirms the checkout."""
        if not context.userdata.expense:
            return "Please confirm the expense first."
        context.userdata.checked_out = True
        return await to_greeter(context)


def build_userdata() -> UserData:
    userdata = UserData()
    userdata.agents.update({
        "greeter": Greeter(MENU),
        "reservation": Reservation(),
        "takeaway": Takeaway(MENU),
        "checkout": Checkout(MENU),
    })
    return userdata


def build_session(userdata: UserData) -> AgentSession[UserData]:
    return AgentSession[UserData](
        userdata=userdata,
        stt=fakes.stt(),
        llm=fakes.llm("restaurant_session"),
        tts=fakes.tts(),
        vad=fakes.vad(),
        max_tool_steps=5,
    )


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    userdata = build_userdata()
    session = build_session(userdata)
    await session.start(agent=userdata.agents["greeter"], room=ctx.room)


fakes.SCRIPTS["restaurant_greeter"] = [
    "Welcome! Would you like a table or takeaway?",       # greeter's on_enter
    fakes.call("to_takeaway"),                             # "Takeaway please."
    "Sure, let me get the takeaway desk.",                 # after the transfer tool's output
    "Thanks for your order! Anything else?",               # greeter's on_enter again
]
fakes.SCRIPTS["restaurant_session"] = [
    "Takeaway here. What would you like?",                 # takeaway's on_enter
    fakes.call("update_order", items=["Pizza", "Coffee"]),  # "A pizza and a coffee."
    "One pizza and one coffee. Shall I check out?",
    fakes.call("to_checkout"),                             # "Yes, check out."
    "Passing you to checkout.",
    "That is 12 dollars, please confirm.",                 # checkout's on_enter
    fakes.call("confirm_expense", expense=12.0),           # "Confirmed, 12 dollars."
    "Expense confirmed.",
    fakes.call("confirm_checkout"),                        # "Check me out."
    "All done, back to the front desk.",
]

if __name__ == "__main__":
    cli.run_app(server)
