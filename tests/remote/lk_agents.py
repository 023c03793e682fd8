"""LiveKit's own AgentSession with a fake LLM built on LiveKit's base classes (asyncio code,
run in a thread by the interop tests)."""

from __future__ import annotations

from typing import Any

from livekit.agents import (DEFAULT_API_CONNECT_OPTIONS, NOT_GIVEN, Agent, AgentSession,
                            APIConnectOptions, RunContext, function_tool, llm)

REPLIES: dict[str, Any] = {
    "weather in Paris?": ("get_weather", '{"location": "Paris"}'),
    "sunny in Paris": "It is sunny in Paris.",
    "hello": "Hi there!",
}


class FakeLKLLM(llm.LLM):
    def chat(self, *, chat_ctx: llm.ChatContext, tools: Any = None,
             conn_options: APIConnectOptions = DEFAULT_API_CONNECT_OPTIONS,
             parallel_tool_calls: Any = NOT_GIVEN, tool_choice: Any = NOT_GIVEN,
             extra_kwargs: Any = NOT_GIVEN) -> llm.LLMStream:
        return FakeLKStream(self, chat_ctx=chat_ctx, tools=tools or [],
                            conn_options=conn_options)


class FakeLKStream(llm.LLMStream):
    async def _run(self) -> None:
        last = self._chat_ctx.items[-1]
        key = (last.text_content if last.type == "message" else
               last.output if last.type == "function_call_output" else "")
        reply = REPLIES.get(key or "", "I do not know.")
        if isinstance(reply, tuple):
            self._event_ch.send_nowait(llm.ChatChunk(id="r1", delta=llm.ChoiceDelta(
                role="assistant", tool_calls=[llm.FunctionToolCall(
                    name=reply[0], arguments=reply[1], call_id="lk_c1")])))
            return
        self._event_ch.send_nowait(llm.ChatChunk(id="r1", delta=llm.ChoiceDelta(
            role="assistant", content=reply)))


class LkWeather(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are LiveKit's weather agent.")

    @function_tool
    async def get_weather(self, ctx: RunContext, location: str) -> str:
        """Get the weather.

        Args:
            location: The city
        """
        return f"sunny in {location}"


def lk_weather_session() -> tuple[AgentSession, LkWeather]:
    """Call inside the thread's asyncio loop."""
    return AgentSession(llm=FakeLKLLM()), LkWeather()
