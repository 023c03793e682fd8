"""Instructions per modality, and tools grouped in a toolset.

``Instructions`` gives the agent one text for spoken turns and another for typed ones: each
reply renders the instructions for the modality of the turn it answers. The converter's tools
are module-level ``function_tool``s grouped in an ``llm.Toolset`` that the agent is given as
one of its tools. Written in LiveKit Agents' idioms: the file runs on LiveKit Agents when its
``agents_trio`` imports are changed to ``livekit.agents``.

    python examples/two_runtimes/modal_instructions.py console --text
"""

from __future__ import annotations

from agents_trio import Agent, AgentServer, AgentSession, JobContext, cli, function_tool, llm
from agents_trio.beta import Instructions
from providers import session_providers


@function_tool
async def km_to_miles(km: float) -> str:
    """Convert kilometres to miles.

    Args:
        km: The distance in kilometres
    """
    return f"{km * 0.621371:.1f} miles"


@function_tool
async def celsius_to_fahrenheit(celsius: float) -> str:
    """Convert degrees Celsius to Fahrenheit.

    Args:
        celsius: The temperature in degrees Celsius
    """
    return f"{celsius * 9 / 5 + 32:.0f} F"


INSTRUCTIONS = Instructions(
    "You convert units for travellers.",
    audio="You are heard, not read: say numbers in words.",
    text="You are read: write numbers in digits.",
)


CONVERTERS = llm.Toolset(id="converters", tools=[km_to_miles, celsius_to_fahrenheit])


class UnitsAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions=INSTRUCTIONS, tools=[CONVERTERS])


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    session = AgentSession(**session_providers("modal_instructions"))
    await session.start(agent=UnitsAgent(), room=ctx.room)


if __name__ == "__main__":
    cli.run_app(server)
