"""Two agents and a handoff between them, sharing the caller's details through userdata.

A receptionist takes the caller's name, then hands the call to a billing agent, which
greets the caller by name when it takes over. Written in LiveKit Agents' idioms: the file
runs on LiveKit Agents when its ``agents_trio`` imports are changed to ``livekit.agents``.

    python examples/two_runtimes/front_desk_handoff.py console --text
"""

from __future__ import annotations

from dataclasses import dataclass

from agents_trio import Agent, AgentServer, AgentSession, JobContext, RunContext, cli, function_tool
from providers import session_providers


@dataclass
class Caller:
    name: str | None = None


class Receptionist(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk. Ask the caller's name, then "
                                      "send billing questions to the billing desk.")

    @function_tool
    async def record_name(self, context: RunContext[Caller], name: str) -> str:
        """Remember the caller's name.

        Args:
            name: The caller's first name
        """
        context.userdata.name = name
        return f"name recorded: {name}"

    @function_tool
    async def transfer_to_billing(self, context: RunContext[Caller]) -> tuple[Agent, str]:
        """Hand the caller to the billing desk."""
        return BillingDesk(), "transferring to billing"


class BillingDesk(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the billing desk. Answer invoice questions.")

    async def on_enter(self) -> None:
        caller: Caller = self.session.userdata
        await self.session.say(f"Billing desk here. Hello {caller.name}!",
                               add_to_chat_ctx=True)

    @function_tool
    async def invoice_total(self, context: RunContext[Caller], month: str) -> str:
        """Look up the caller's invoice total for a month.

        Args:
            month: The month, e.g. March
        """
        return f"{context.userdata.name}'s invoice for {month}: 42 euros"


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    session = AgentSession[Caller](userdata=Caller(), **session_providers("front_desk_handoff"))
    await session.start(agent=Receptionist(), room=ctx.room)


if __name__ == "__main__":
    cli.run_app(server)
