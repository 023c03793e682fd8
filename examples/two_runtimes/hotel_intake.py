"""A check-in that collects details with a TaskGroup: LiveKit's prebuilt ``GetEmailTask``,
then an ``AgentTask`` of our own. A tool runs the group: the agent pauses while the tasks
talk to the guest, and the tool's output (the booking) comes back to it.

Written in LiveKit Agents' idioms: the file runs on LiveKit Agents when its ``agents_trio``
imports are changed to ``livekit.agents``.

    python examples/two_runtimes/hotel_intake.py console --text
"""

from __future__ import annotations

from agents_trio import Agent, AgentServer, AgentSession, AgentTask, JobContext, cli, function_tool
from agents_trio.beta.workflows import GetEmailTask, TaskGroup
from providers import session_providers


class NightsTask(AgentTask[int]):
    def __init__(self) -> None:
        super().__init__(instructions="Ask how many nights the guest will stay.")

    async def on_enter(self) -> None:
        self.session.generate_reply(instructions="Ask how many nights the guest will stay.")

    @function_tool
    async def record_nights(self, nights: int) -> None:
        """Record the length of the stay.

        Args:
            nights: How many nights, at least 1
        """
        self.complete(nights)


class Reception(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You check hotel guests in.")

    @function_tool
    async def check_in(self) -> str:
        """Check the guest in: collects their email address and the length of their stay."""
        group = TaskGroup(summarize_chat_ctx=False)
        group.add(lambda: GetEmailTask(), id="email",
                  description="Collects the guest's email address")
        group.add(lambda: NightsTask(), id="nights", description="Collects the length of stay")
        results = await group
        email = results.task_results["email"].email_address
        nights = results.task_results["nights"]
        return f"booked for {nights} nights, confirmation sent to {email}"


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    session = AgentSession(**session_providers("hotel_intake"))
    await session.start(agent=Reception(), room=ctx.room)


if __name__ == "__main__":
    cli.run_app(server)
