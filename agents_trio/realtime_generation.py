"""One generation step of a realtime speech: a model response played, tools dispatched.

The step asks the activity's *live* realtime session for a response (or plays one the server
started), plays its messages through the same audio path as the pipeline, and on
interruption tells the session to stop and truncates the message at the played position.
The session is read from the activity when needed and never kept past the step: once the
activity closed its session, nothing in the step can reach it.

The response's streams are received in the scope of a ``RealtimeResponse`` (see
``realtime_response``), separately from playing them, so a response whose streams never end
cannot hold the speech: a reconnect or a newer turn ends the receiving, and so does the stall
deadline, which fails the step with an ``error`` event. Scheduling a step ends the responses
still received for earlier speeches: that is what a newer turn does.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Protocol

import trio

from ._iterators import aclosing
from .generation import FrameQueue, Generation, GenerationHost, Segment
from .models import ModelSettings
from .realtime import RealtimeError, RealtimeUnavailable
from .cancel_tools import with_cancel_tools
from .toolsets import flatten_tools
from .nurseries import Pipe

if TYPE_CHECKING:
    from .chat import FunctionCall
    from .realtime import GenerationCreatedEvent, MessageGeneration
    from .realtime_link import RealtimeLink
    from .realtime_response import RealtimeResponse

logger = logging.getLogger("agents_trio")


class RealtimeGenerationHost(GenerationHost, Protocol):
    """What a realtime step needs from its activity: a generation host with a live link."""

    @property
    def realtime(self) -> RealtimeLink | None: ...


class RealtimeGeneration(Generation):
    """Runs one realtime step for ``handle`` on ``activity``."""

    activity: RealtimeGenerationHost

    async def run(self, tool_nursery: trio.Nursery) -> None:
        """Ask for (or take) the response, wait for the scheduler, play it.

        Cancellation: as ``Generation.run``; the server is also told to stop the response
        and the message is truncated at what the user heard.
        """
        activity, handle = self.activity, self.handle
        await handle.wait_scheduled()
        link = activity.realtime
        assert link is not None
        link.end_responses("a newer turn was scheduled")
        await handle.wait_authorized()
        self.step.authorized_at = trio.current_time()
        try:
            generation = await self._generation()
        except RealtimeUnavailable:
            return  # the agent was handed over, paused or closed: nothing to say
        except RealtimeError as e:
            self.step.error = e
            activity.report_model_error(handle, e, source=activity.llm)
            return
        played: Pipe[Segment] = Pipe()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._receive, generation, played, tool_nursery)
            try:
                if activity.session.output.active_audio is not None:
                    paced: Pipe[Segment] = Pipe()
                    nursery.start_soon(self._pace_transcripts, paced)
                    await self._play_audio(played, paced, nursery)
                else:
                    await self._play_text_segments(played)
            except trio.Cancelled:
                self._stop_server_side()
                raise

    async def _generation(self) -> GenerationCreatedEvent:
        if self.request.generation is not None:
            generation: GenerationCreatedEvent = self.request.generation
            return generation
        link = self.activity.realtime
        assert link is not None
        call = link.call
        await link.wait_synced()  # the agent's latest instructions and tools come first
        if self.request.say_text is not None:
            return await call(lambda rt: rt.say(self.request.say_text))
        if self.request.sync_chat_ctx:
            ctx = self.activity.agent.live_chat_ctx.copy(exclude_instructions=True)
            try:
                await call(lambda rt: rt.update_chat_ctx(ctx))
            except RealtimeUnavailable:
                raise
            except RealtimeError:
                logger.warning("the realtime model refused the chat context update")
        return await call(lambda rt: rt.generate_reply(
            instructions=self.request.instructions, tool_choice=self.request.tool_choice))

    def _stop_server_side(self) -> None:
        """Interrupted: stop the response and cut the message at what the user heard."""
        link = self.activity.realtime
        rt = link.session if link is not None else None
        if link is None or rt is None:
            return
        rt.interrupt()
        if self.step.current_message_id is not None and link.capabilities.message_truncation:
            rt.truncate(message_id=self.step.current_message_id,
                        audio_end_ms=int(self.step.heard_seconds * 1000),
                        audio_transcript=self.step.played_text)

    async def _receive(self, generation: GenerationCreatedEvent,
                       played: Pipe[Segment],
                       tool_nursery: trio.Nursery) -> None:
        """Receive the response's streams until they end, or its scope ends (then the player
        gets the end of every channel and plays what arrived)."""
        link = self.activity.realtime
        assert link is not None
        async with played:
            with link.receiving() as response:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._dispatch_functions, generation.function_stream,
                                       tool_nursery, response)
                    nursery.start_soon(self._messages, generation.message_stream, played,
                                       response)
        if response.stall_error is not None:
            self.step.error = response.stall_error
            self.activity.report_model_error(self.handle, response.stall_error,
                                             source=self.activity.llm)

    async def _messages(self, messages: AsyncIterable[MessageGeneration],
                        played: Pipe[Segment],
                        response: RealtimeResponse) -> None:
        async with trio.open_nursery() as nursery:
            async for message in messages:
                response.progress()
                segment = self._new_segment()
                segment.message_id = message.message_id
                frames_send = segment.frames = FrameQueue()
                played.send_nowait(segment)
                nursery.start_soon(self._collect, message, segment, frames_send, response)

    async def _collect(self, message: MessageGeneration, segment: Segment,
                       frames_send: FrameQueue,
                       response: RealtimeResponse) -> None:
        node = self.activity.agent.realtime_audio_output_node
        async def text() -> None:
            try:
                async for delta in message.text_stream:
                    response.progress()
                    segment.text += delta
                    if segment.node is not None:
                        segment.node.input.send_nowait(delta)
            finally:  # also when the response's scope ended: the text is what arrived
                segment.end_text()

        async def audio() -> None:
            # the model's audio goes through the agent's realtime_audio_output_node
            async with frames_send, aclosing(node(message.audio_stream,
                                                  ModelSettings())) as frames:
                async for frame in frames:
                    response.progress()
                    segment.audio_duration += frame.duration
                    frames_send.send_nowait(frame)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(text)
            nursery.start_soon(audio)

    async def _play_text_segments(self, played: Pipe[Segment]) -> None:
        """Text-only output: each message's text is shown once it is complete (the
        transcript may lag the audio), or, through the agent's transcription node, as the
        node makes it (``_show_segment``)."""
        async for segment in played:
            assert segment.frames is not None
            async for _ in segment.frames:
                pass
            if segment.node is None:
                await segment.text_complete.wait()
            await self._show_segment(segment, _whole(segment))
            if self.step.started_speaking_at is None:  # a message with no text
                self.step.started_speaking_at = trio.current_time()
                self.activity.on_text_playback_started(self.handle)

    async def _dispatch_functions(self, calls: AsyncIterable[FunctionCall],
                                  tool_nursery: trio.Nursery,
                                  response: RealtimeResponse) -> None:
        """Dispatch the response's function calls, each call id once: a call the server
        sends again (same ``call_id``) is the same call, already running or answered."""
        dispatched: set[str] = set()
        async for call in calls:
            response.progress()
            if call.call_id in dispatched:
                logger.warning("the realtime model sent function call %r twice; it runs once",
                               call.call_id)
                continue
            dispatched.add(call.call_id)
            self.activity.dispatch_tool(self.handle, call, self.step,
                                        with_cancel_tools(flatten_tools(self.request.tools)),
                                        tool_nursery)


async def _whole(segment: Segment) -> AsyncIterator[str]:
    """A realtime message's text, complete, as one piece."""
    yield segment.text
