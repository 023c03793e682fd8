"""A basic agent with tools and typed userdata, written in LiveKit Agents' idioms.

The same file runs on LiveKit Agents when its ``agents_trio`` imports are changed to
``livekit.agents`` (``tests/two_runtimes`` runs it both ways in CI):

    python examples/two_runtimes/weather_tools.py console --text     # type, or pipe lines in
    python examples/two_runtimes/weather_tools.py dev                # serve LiveKit dispatch

Providers come from ``providers.py`` beside it: real plugins when their keys are set,
the scripted fakes of ``agents_trio.testing`` otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agents_trio import Agent, AgentServer, AgentSession, JobContext, RunContext, cli, function_tool
from providers import session_providers

FORECASTS = {"paris": "sunny, 21 degrees", "oslo": "light snow, -3 degrees"}


@dataclass
class Trip:
    cities: list[str] = field(default_factory=list)


class WeatherAgent(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You tell travellers the weather. Keep answers short.")

    @function_tool
    async def lookup_weather(self, context: RunContext[Trip], city: str) -> str:
        """Look up today's weather for a city.

        Args:
            city: The city name, e.g. Paris
        """
        context.userdata.cities.append(city)
        return FORECASTS.get(city.lower(), "no forecast available")

    @function_tool
    async def cities_asked(self, context: RunContext[Trip]) -> str:
        """List the cities the user asked about so far."""
        return ", ".join(context.userdata.cities) or "none"


server = AgentServer()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    session = AgentSession[Trip](userdata=Trip(), **session_providers("weather_tools"))
    await session.start(agent=WeatherAgent(), room=ctx.room)


if __name__ == "__main__":
    cli.run_app(server)
