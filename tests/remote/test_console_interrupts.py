"""A line typed at a remote console while the agent replies interrupts the reply, as typed
chat does in a LiveKit room and as the local terminal console does: both consoles (the
msgpack one and the LiveKit-protocol one) keep reading while a turn is in flight, and both
hosts interrupt the agent when a turn arrives, not when it comes up in their queue. Piped
input (``interrupt=False``) keeps answering lines one after another."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable

import pytest
import trio

from agents_trio.chat import ChatMessage
from agents_trio.remote.console import run_console
from lk_helpers import lk_attach, lk_hosted
from remote_helpers import attach, hosted, text_session

pytest.importorskip("livekit.protocol")


def _typed(*script: tuple[float, str]) -> Callable[[], Awaitable[str | None]]:
    """Lines typed ``delay`` seconds after the previous one was read; then the end of input
    once every reply had the time to finish."""
    queue = list(script)

    async def next_line() -> str | None:
        if not queue:
            await trio.sleep(30)
            return None
        delay, text = queue.pop(0)
        await trio.sleep(delay)
        return text

    return next_line


def _assistant_messages(session: object) -> list[ChatMessage]:
    return [item for item in session.history.items  # type: ignore[attr-defined]
            if isinstance(item, ChatMessage) and item.role == "assistant"]


# "slow" answers "a slow answer" after 5 s, streamed until 6 s; "hello" answers "Hi there!"
SCRIPT = ((0.0, "slow"), (5.5, "hello"))


async def test_a_line_typed_during_a_reply_interrupts_it(autojump_clock) -> None:
    out = io.StringIO()
    session = text_session()
    async with hosted(session) as host, trio.open_nursery() as nursery:
        status = await run_console(attach(host, nursery), lines=_typed(*SCRIPT), out=out,
                                   interrupt=True)
        replies = _assistant_messages(session)
    assert status == 0
    assert [m.interrupted for m in replies] == [True, False]
    assert replies[-1].text_content == "Hi there!"
    text = out.getvalue()
    assert "[interrupted]" in text and "agent> Hi there!" in text


async def test_piped_lines_wait_for_each_reply(autojump_clock) -> None:
    out = io.StringIO()
    session = text_session()
    async with hosted(session) as host, trio.open_nursery() as nursery:
        status = await run_console(attach(host, nursery), lines=_typed(*SCRIPT), out=out,
                                   interrupt=False)
        replies = _assistant_messages(session)
    assert status == 0
    assert [(m.text_content, m.interrupted) for m in replies] == [
        ("a slow answer", False), ("Hi there!", False)]


async def test_the_livekit_protocol_console_interrupts_too(autojump_clock) -> None:
    from agents_trio.remote.lk.console import run_lk_console
    out = io.StringIO()
    session = text_session()
    async with lk_hosted(session) as host, trio.open_nursery() as nursery:
        status = await run_lk_console(lk_attach(host, nursery), lines=_typed(*SCRIPT),
                                      out=out, interrupt=True)
        replies = _assistant_messages(session)
    assert status == 0
    assert [m.interrupted for m in replies] == [True, False]
    assert "[interrupted]" in out.getvalue() and "agent> Hi there!" in out.getvalue()
