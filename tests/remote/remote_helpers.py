"""Shared pieces of the remote-session tests: a scripted text agent, hosts, raw clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

from agents_trio import (Agent, AgentSession, APIError, FunctionToolCall, RunContext,
                         SessionHost, function_tool, open_remote_session, open_session_host)
from agents_trio.remote import wire
from agents_trio.testing import FakeActions, FakeLLM


class Weather(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You answer weather questions.")

    @function_tool
    async def get_weather(self, ctx: RunContext, location: str) -> str:
        """Get the weather.

        Args:
            location: The city
        """
        return f"sunny in {location}"


def script(*, fast: bool = False) -> FakeActions:
    """``fast``: no model latency (for tests on the real clock)."""
    t = {"ttft": 0.0, "duration": 0.0} if fast else {}
    a = FakeActions()
    a.add_llm("Let me look.", [FunctionToolCall(name="get_weather",
                                                arguments='{"location": "Paris"}',
                                                call_id="c1")], input="weather in Paris?", **t)
    a.add_llm("It is sunny in Paris.", input="sunny in Paris", **t)
    a.add_llm("Hi there!", input="hello", **t)
    a.add_llm_error(APIError("the model is down"), input="boom", ttft=0.0 if fast else 0.1)
    a.add_llm("a slow answer", input="slow", ttft=5.0, duration=6.0)
    return a


def text_session(*, fast: bool = False, **kwargs: Any) -> AgentSession:
    return AgentSession(llm=FakeLLM(script(fast=fast).llm_responses), **kwargs)


@asynccontextmanager
async def hosted(session: AgentSession | None = None, *, start: bool = True,
                 **options: Any) -> AsyncIterator[SessionHost]:
    """A started session behind a host that serves only the streams given to it."""
    session = session or text_session()
    async with session, open_session_host(session, listeners=[], **options) as host:
        if start:
            await session.start(Weather())
        yield host


def attach(host: SessionHost, nursery: trio.Nursery) -> trio.abc.Stream:
    """A client stream connected to ``host`` through memory (served in ``nursery``)."""
    client, server = trio.testing.memory_stream_pair()
    nursery.start_soon(host.serve_stream, server)
    return client


@asynccontextmanager
async def client_of(host: SessionHost) -> AsyncIterator[Any]:
    async with trio.open_nursery() as nursery:
        async with open_remote_session(attach(host, nursery)) as remote:
            yield remote


class RawClient:
    """Speaks frames by hand, for the bad-input tests."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.reader = wire.FrameReader(stream, max_frame_size=1 << 24)

    async def send(self, message: wire.Message | bytes) -> None:
        data = message if isinstance(message, bytes) else wire.encode_frame(message)
        await self.stream.send_all(data)

    async def receive(self) -> Any:
        """The next message, or None once the host closed the connection."""
        payload = await self.reader.receive()
        return None if payload is None else wire.decode_reply(payload)

    async def receive_all(self) -> list[Any]:
        """Every message until the host closes the connection."""
        out = []
        while (message := await self.receive()) is not None:
            out.append(message)
        return out


def frame_of(payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + payload
