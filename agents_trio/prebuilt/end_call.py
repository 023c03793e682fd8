"""EndCallTool: a tool the model calls to hang up (LiveKit's ``beta.EndCallTool``).

Calling ``end_call`` returns ``end_instructions`` to the model (by default "say goodbye to
the user"), so the model's reply to the tool is the goodbye; that reply belongs to the same
speech, and once the speech is done the session shuts down (drained, reason
``USER_INITIATED``). With ``end_instructions=None`` no reply is asked for and the session
shuts down when the calling speech ends. With a realtime model that answers tool outputs by
itself (``auto_tool_reply_generation``), the session shuts down once the next speech (that
answer) is done.

When the session closes inside a job, the job is shut down with the session's close reason.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ..events import CloseEvent, SpeechCreatedEvent
from ..job import get_job_context
from ..realtime import is_realtime_model
from ..run_context import RunContext
from ..speech_args import check_callable, check_flag, check_str
from ..speech_handle import SpeechHandle
from ..tools import ToolFlag, function_tool
from ..toolsets import Toolset

logger = logging.getLogger("agents_trio")

END_CALL_DESCRIPTION = """
Hangs up: ends the call and disconnects at once.

Call it when the user has clearly finished (for example "that's all, goodbye").

Do not call it when the user wants to pause, be put on hold or be transferred, or when
what they want is unclear.

Nothing can follow it: the user cannot be reached afterwards. Do not write any other text
or answer when you call it.
"""


class EndCallTool(Toolset):
    """The toolset of the ``end_call`` tool; give it in an agent's ``tools``.

    Args:
        extra_description: Appended to the tool's description.
        delete_room: Delete the room once the job has shut down (as LiveKit: a shutdown
            callback awaits ``ctx.delete_room()``), which disconnects everyone in it, SIP
            callers included; skipped in the console.
        end_instructions: The tool's output, from which the model writes its goodbye; None
            asks for no reply (the session ends with the calling speech).
        ignore_on_enter: Hide the tool while the agent greets (``on_enter``).
        on_tool_called: Awaited when the tool is called, with a :class:`ToolCalledEvent`.
        on_tool_completed: Awaited before the tool returns, with a
            :class:`ToolCompletedEvent` whose ``output`` it may change.
    """

    def __init__(self, *, extra_description: str = "", delete_room: bool = True,
                 end_instructions: str | None = "say goodbye to the user",
                 ignore_on_enter: bool = False,
                 on_tool_called: Callable[[Toolset.ToolCalledEvent], Awaitable[None]]
                 | None = None,
                 on_tool_completed: Callable[[Toolset.ToolCompletedEvent], Awaitable[None]]
                 | None = None
                 ) -> None:
        # checked here: the tool would fail when called, and the call would not end
        check_str("extra_description", extra_description)
        check_flag("delete_room", delete_room)
        check_flag("ignore_on_enter", ignore_on_enter)
        check_str("end_instructions", end_instructions, allow_none=True)
        check_callable("on_tool_called", on_tool_called, allow_none=True)
        check_callable("on_tool_completed", on_tool_completed, allow_none=True)

        async def end_call(ctx: RunContext[Any]) -> Any:  # noqa: ANN401 - the model's output
            return await self._end_call(ctx)

        tool = function_tool(end_call, name="end_call",
                             description=f"{END_CALL_DESCRIPTION}\n{extra_description}",
                             flags=ToolFlag.IGNORE_ON_ENTER if ignore_on_enter
                             else ToolFlag.NONE)
        super().__init__(id="end_call", tools=[tool])
        self.delete_room = delete_room
        self._end_instructions = end_instructions
        self._on_tool_called = on_tool_called
        self._on_tool_completed = on_tool_completed

    async def _end_call(self, ctx: RunContext[Any]) -> Any:  # noqa: ANN401 - the output
        logger.debug("end_call tool called")
        session = ctx.session
        llm = session.current_agent.llm
        if not is_realtime_model(llm):
            llm = session.llm
        auto_reply = is_realtime_model(llm) and llm.capabilities.auto_tool_reply_generation
        if self._on_tool_called is not None:
            await self._on_tool_called(Toolset.ToolCalledEvent(ctx=ctx, arguments={}))
        completed = Toolset.ToolCompletedEvent(ctx=ctx, output=self._end_instructions)
        if self._on_tool_completed is not None:
            await self._on_tool_completed(completed)
        output = completed.output

        def shut_down(_: object = None) -> None:
            session.shutdown()

        def after_the_answer(ev: SpeechCreatedEvent) -> None:
            session.off("speech_created", after_the_answer)
            handle: SpeechHandle = ev.speech_handle
            handle.add_done_callback(shut_down)

        def on_speech_done(_: SpeechHandle) -> None:
            if auto_reply and output is not None:
                # the realtime model answers the tool output in a speech of its own
                session.on("speech_created", after_the_answer)
            else:
                # the reply to the tool output is a step of this same speech
                shut_down()

        def on_close(ev: CloseEvent) -> None:
            session.off("close", on_close)
            session.off("speech_created", after_the_answer)
            job = get_job_context(required=False)
            if job is None:
                return
            if self.delete_room:
                async def delete_the_room() -> None:
                    logger.info("deleting the room because the user ended the call")
                    await job.delete_room()

                job.add_shutdown_callback(delete_the_room)
            job.shutdown(ev.reason)

        ctx.speech_handle.add_done_callback(on_speech_done)
        session.on("close", on_close)
        return output
