"""The line loop both remote consoles share: commands, and turns that either wait for their
reply (piped input) or run while the next line is read (a terminal: a line typed during a
reply goes to the host at once, and the host interrupts the agent for it)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio


async def answer_lines(read_line: Callable[[], Awaitable[str | None]],
                       command: Callable[[str], Awaitable[bool]],
                       turn: Callable[[str], Awaitable[None]], *, interrupt: bool,
                       prompt: Callable[[], None]) -> None:
    """Read lines until the end of input or a command returning False; ``/...`` lines are
    commands, others turns. With ``interrupt`` each turn runs in its own task while the next
    line is read (``prompt`` is shown again once its answer was printed), else the next line
    is read once the turn is answered. Returns once every turn in flight was answered.

    Cancellation: stops reading; the turns in flight are cancelled (withdrawn).
    """
    async with trio.open_nursery() as turns:
        while (line := await read_line()) is not None:
            if not line:
                continue
            if line.startswith("/"):
                if not await command(line):
                    break
                continue
            if interrupt:
                turns.start_soon(_answer_then_prompt, turn, line, prompt)
            else:
                await turn(line)


async def _answer_then_prompt(turn: Callable[[str], Awaitable[None]], line: str,
                              prompt: Callable[[], None]) -> None:
    await turn(line)
    prompt()
