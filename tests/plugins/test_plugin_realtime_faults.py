"""A LiveKit realtime plugin failing in the middle of a response, through the adapter.

A response's streams are the plugin's: any of them may raise (a dropped connection, a plugin
bug), its ``modalities`` future may fail, the consumer (an agent's
``realtime_audio_output_node``) may close a channel it was given, the server may send a
function call twice. None of it may take the session down: the response ends with what
arrived, the failure is one ``error`` event, the next turn is answered, and each function
call runs once and is answered once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import pytest
import trio
import trio.testing

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

from livekit import rtc  # noqa: E402
from livekit.agents import llm  # noqa: E402
from lk_fakes import RATE, FakePluginRealtimeModel, FakePluginRealtimeSession  # noqa: E402

from agents_trio import Agent, AgentSession, RunContext, function_tool, open_bridge  # noqa: E402
from agents_trio.models import ModelSettings  # noqa: E402
from agents_trio.plugins import RealtimeModelAdapter  # noqa: E402
from agents_trio.testing import FakeAudioOutput  # noqa: E402


class Front(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are the front desk.")
        self.lookups: list[int] = []

    @function_tool
    async def lookup(self, ctx: RunContext, q: int) -> str:
        """Look something up.

        Args:
            q: What to look up
        """
        self.lookups.append(q)
        await trio.sleep(0.5)
        return f"found {q}"


class ClosingNode(Front):
    """A node that takes one frame and closes the channel it was given (``async with``)."""

    async def realtime_audio_output_node(self, audio: AsyncIterable[rtc.AudioFrame],
                                         model_settings: ModelSettings
                                         ) -> AsyncIterator[rtc.AudioFrame]:
        async with audio:  # type: ignore[attr-defined]  # a Trio receive channel
            async for frame in audio:
                yield frame
                return


async def _failing(items: list[Any], error: BaseException) -> AsyncIterator[Any]:
    for item in items:
        await asyncio.sleep(0.05)
        yield item
    raise error


class Boom(RuntimeError):
    pass


def _break(lk: FakePluginRealtimeSession, where: str) -> None:
    """The next response of ``lk`` fails in ``where``; the ones after it are healthy."""
    healthy = lk._generation

    def failing(text: str, *, user_initiated: bool,
                calls: list[llm.FunctionCall] | None = None) -> llm.GenerationCreatedEvent:
        lk._generation = healthy  # type: ignore[method-assign]
        ev = healthy(text, user_initiated=user_initiated, calls=calls)
        if where == "message_stream":
            ev.message_stream = _failing([], Boom(where))
        elif where == "function_stream":
            ev.function_stream = _failing([], Boom(where))
        else:
            async def messages(inner: AsyncIterable[llm.MessageGeneration]
                               ) -> AsyncIterator[llm.MessageGeneration]:
                async for message in inner:
                    if where == "text_stream":
                        message.text_stream = _failing(["half"], Boom(where))
                    elif where == "audio_stream":
                        message.audio_stream = _failing([], Boom(where))
                    else:
                        failed = asyncio.get_running_loop().create_future()
                        failed.set_exception(Boom(where))
                        message.modalities = failed
                    yield message
            ev.message_stream = messages(ev.message_stream)
        return ev

    lk._generation = failing  # type: ignore[method-assign]


def _session(model: FakePluginRealtimeModel) -> tuple[AgentSession, list[BaseException]]:
    session = AgentSession(llm=RealtimeModelAdapter(model))
    session.output.audio = FakeAudioOutput(sample_rate=RATE)
    errors: list[BaseException] = []
    session.on("error", lambda ev: errors.append(ev.error))
    return session, errors


def _assistant_texts(session: AgentSession) -> list[str]:
    return [m.text_content or "" for m in session.history.messages() if m.role == "assistant"]


@pytest.mark.parametrize("where", ["message_stream", "text_stream", "audio_stream",
                                   "function_stream"])
async def test_a_failing_response_stream_is_one_error_and_the_next_turn_is_answered(
        autojump_clock: trio.testing.MockClock, where: str) -> None:
    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        session, errors = _session(model)
        async with session:
            await session.start(Front())
            [lk] = model.sessions
            _break(lk, where)
            with trio.fail_after(30):
                await session.generate_reply(instructions="greet").wait_for_playout()
                await trio.sleep(1.0)
                [error] = errors  # the plugin's failure, once
                assert isinstance(error.__cause__, Boom) and str(error.__cause__) == where
                assert not lk.closed  # the session goes on
                await session.generate_reply(instructions="again").wait_for_playout()
            assert _assistant_texts(session)[-1] == "hello from realtime"
            assert len(errors) == 1
        assert lk.closed
        assert bridge.statistics().asyncio_tasks == 0


async def test_a_failing_modalities_future_plays_the_message_with_both_modalities(
        autojump_clock: trio.testing.MockClock) -> None:
    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        session, errors = _session(model)
        async with session:
            await session.start(Front())
            [lk] = model.sessions
            _break(lk, "modalities")
            with trio.fail_after(30):
                await session.generate_reply(instructions="greet").wait_for_playout()
            assert _assistant_texts(session) == ["hello from realtime"]
            assert errors == [] and not lk.closed
        assert bridge.statistics().asyncio_tasks == 0


async def test_a_node_closing_the_audio_channel_it_was_given_ends_only_its_audio(
        autojump_clock: trio.testing.MockClock) -> None:
    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        session, errors = _session(model)
        async with session:
            await session.start(ClosingNode())
            [lk] = model.sessions
            with trio.fail_after(30):
                await session.generate_reply(instructions="greet").wait_for_playout()
                await trio.sleep(1.0)  # the plugin sends its second frame meanwhile
                await session.generate_reply(instructions="again").wait_for_playout()
            # each reply played its first frame (the transcript is cut where its audio ended)
            texts = _assistant_texts(session)
            assert len(texts) == 2 and all(t.startswith("hello") for t in texts)
            assert errors == [] and not lk.closed
        assert bridge.statistics().asyncio_tasks == 0


async def test_a_function_call_the_server_sends_twice_runs_once_and_is_answered_once(
        autojump_clock: trio.testing.MockClock) -> None:
    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        session, errors = _session(model)
        async with session:
            agent = Front()
            await session.start(agent)
            [lk] = model.sessions
            healthy = lk._generation
            twice = [llm.FunctionCall(call_id="c1", name="lookup", arguments='{"q": 1}'),
                     llm.FunctionCall(call_id="c1", name="lookup", arguments='{"q": 1}')]

            def repeating(text: str, *, user_initiated: bool,
                          calls: list[llm.FunctionCall] | None = None
                          ) -> llm.GenerationCreatedEvent:
                lk._generation = healthy  # type: ignore[method-assign]
                return healthy(text, user_initiated=user_initiated, calls=twice)

            lk._generation = repeating  # type: ignore[method-assign]
            with trio.fail_after(30):
                await session.generate_reply(instructions="greet").wait_for_playout()
            assert agent.lookups == [1]
            items = [(i.type, i.call_id) for i in session.history.items
                     if i.type in ("function_call", "function_call_output")]
            assert items == [("function_call", "c1"), ("function_call_output", "c1")]
            # the outputs sent to the server answer the call once
            pushed = [items for name, items in lk.calls if name == "update_chat_ctx"][-1]
            assert pushed.count("function_call") == pushed.count("function_call_output") == 1
            assert errors == []
        assert bridge.statistics().asyncio_tasks == 0


async def test_a_providers_error_event_keeps_whether_it_is_recoverable(
        autojump_clock: trio.testing.MockClock) -> None:
    """The plugin's ``error`` event says whether the provider session can go on; the error the
    session reports says the same (``recoverable``), and only an unrecoverable one closes."""
    from livekit.agents import APIError as LKAPIError

    from agents_trio import CloseReason

    model = FakePluginRealtimeModel()
    async with open_bridge() as bridge:
        session, errors = _session(model)
        closes: list[object] = []
        session.on("close", lambda ev: closes.append(ev.reason))
        async with session:
            await session.start(Front())
            [lk] = model.sessions

            def error_event(recoverable: bool) -> llm.RealtimeModelError:
                return llm.RealtimeModelError(
                    timestamp=0.0, label="fake", recoverable=recoverable,
                    error=LKAPIError("a hiccup" if recoverable else "gave up",
                                     retryable=recoverable))

            await bridge.run_sync(lk.emit, "error", error_event(True))
            with trio.fail_after(30):
                while not errors:
                    await trio.sleep(0.1)
                assert errors[0].recoverable and not closes
                await session.generate_reply(instructions="again").wait_for_playout()
                await bridge.run_sync(lk.emit, "error", error_event(False))
                while not closes:
                    await trio.sleep(0.1)
        assert [e.recoverable for e in errors] == [True, False]
        assert closes == [CloseReason.ERROR]
