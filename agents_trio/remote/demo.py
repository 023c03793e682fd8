"""The demo agent behind a host, for the console: ``python -m agents_trio serve --port 8765``.

It is the demo's ``WeatherAgent`` on :class:`DemoLLM`, a rule-based chat model that answers
whatever is typed (no keys, no network): weather questions call the ``get_weather`` tool,
"story" tells one, "break" makes the model fail, "shh" gets no reply, anything else an echo.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO

import trio

from .._errors import APIError
from ..chat import ChatContext, ChatMessage, FunctionCallOutput
from ..demo import STORY, WeatherAgent
from ..models import ChatChunk, FunctionToolCall, ToolChoice
from ..session import AgentSession
from .host import SessionHost

if TYPE_CHECKING:
    from .lk.host import SessionHost as LkSessionHost

_CITY = re.compile(r"\bin ([A-Za-z][\w'\- ]*?)\s*[?.!]*$")


class DemoLLM:
    """A chat model that answers by rules, after ``delay`` seconds (Trio time).

    Attributes:
        calls: How many requests it answered.
    """

    def __init__(self, *, delay: float = 0.05) -> None:
        self.delay = delay
        self.calls = 0
        self._call_ids = itertools.count(1)

    @asynccontextmanager
    async def chat(self, *, chat_ctx: ChatContext, tools: list[Any] | None = None,
                   tool_choice: ToolChoice | None = None
                   ) -> AsyncIterator[AsyncIterator[ChatChunk]]:
        self.calls += 1
        names = {getattr(t, "name", "") for t in tools or []}
        yield self._answer(chat_ctx, can_call="get_weather" in names and tool_choice != "none")

    async def _answer(self, chat_ctx: ChatContext, *, can_call: bool
                      ) -> AsyncIterator[ChatChunk]:
        await trio.sleep(self.delay)
        last = chat_ctx.items[-1] if chat_ctx.items else None
        if isinstance(last, FunctionCallOutput):
            yield ChatChunk(content=f"{last.output} Anything else?")
            return
        text = (last.text_content or "") if isinstance(last, ChatMessage) else ""
        lower = text.lower()
        if "weather" in lower:
            match = _CITY.search(text)
            city = match.group(1).strip() if match else "Lisbon"
            yield ChatChunk(content=f"Let me check the weather in {city}.")
            if can_call:
                yield ChatChunk(tool_calls=[FunctionToolCall(
                    name="get_weather", arguments=f'{{"location": "{city}"}}',
                    call_id=f"call_{next(self._call_ids)}")])
        elif "story" in lower:
            yield ChatChunk(content=STORY)
        elif "break" in lower:
            raise APIError("the demo model is unavailable (you asked it to break)")
        elif "shh" in lower:
            return
        elif text:
            yield ChatChunk(content=f"You said: {text}. Ask me about the weather, or for a story.")


def demo_session(*, delay: float = 0.05) -> AgentSession:
    """A text-only session on :class:`DemoLLM`."""
    return AgentSession(llm=DemoLLM(delay=delay))


async def serve_demo(*, host: str = "127.0.0.1", port: int = 8765, path: str | None = None,
                     out: TextIO | None = None, stop: trio.Event | None = None,
                     protocol: str = "livekit",
                     task_status: trio.TaskStatus[SessionHost | LkSessionHost] = (
                         trio.TASK_STATUS_IGNORED)) -> None:
    """Run the demo agent behind a host until ``stop`` is set (then the session closes and
    every client is told so) or until cancelled; prints where to connect.

    ``protocol``: ``"livekit"`` (LiveKit's ``AgentSessionMessage`` over TCP, the default) or
    ``"msgpack"`` (the home-made protocol; the only one on a Unix socket ``path``).
    """
    if protocol not in ("livekit", "msgpack"):
        raise ValueError(f"unknown protocol {protocol!r} (livekit or msgpack)")
    if path is not None:
        protocol = "msgpack"
    async with demo_session() as session:
        session_host: SessionHost | LkSessionHost
        if protocol == "livekit":
            from .lk.host import SessionHost as LkHost

            session_host = LkHost(session, host=host, port=port)
            await session.start_service(session_host.serve)
        else:
            session_host = await SessionHost(session, host=host, port=port, path=path).start()
        await session.start(WeatherAgent())
        if out is not None:
            print(f"agents_trio: serving the demo agent on {session_host.address}", file=out)
            flag = "" if protocol == "livekit" else " --protocol msgpack"
            print(f"connect with ({protocol} protocol): python -m agents_trio console --connect "
                  f"{session_host.address}{flag}", file=out, flush=True)
        task_status.started(session_host)
        await (stop if stop is not None else trio.Event()).wait()
