"""A LiveKit-style agent whose session uses LiveKit's turn-detector plugin model, as LiveKit's
basic example does (``turn_detection=MultilingualModel()`` built in the entrypoint). Test
data: the model's runner is the fake one (no model files here); ``HF_HUB_CACHE`` must point
at files written by ``write_fake_turn_detector_files``."""

import livekit.agents as lk
from livekit.plugins.turn_detector.multilingual import MultilingualModel

from agents_trio import Agent, AgentServer, AgentSession, JobContext, cli
from agents_trio.testing.livekit_fakes import FakePluginLLM, use_fake_turn_detector_runners

use_fake_turn_detector_runners()

server = AgentServer()


class Kelly(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="Your name is Kelly.")

    async def on_enter(self) -> None:
        self.session.generate_reply()


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    executor = lk.get_job_context().inference_executor
    session = AgentSession(
        llm=FakePluginLLM({"": "Hi, I'm Kelly.", "Hello": "Hello to you."}, default="Sure."),
        turn_detection=MultilingualModel())
    print(f"  [executor: {type(executor).__name__}]", flush=True)
    await session.start(agent=Kelly(), room=ctx.room)


if __name__ == "__main__":
    cli.run_app(server)
