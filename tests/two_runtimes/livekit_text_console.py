"""Run an agent file on LiveKit Agents' own text console, without a terminal.

``python livekit_text_console.py AGENT_FILE < lines`` loads ``AGENT_FILE`` (written against
``livekit.agents``; it defines ``server``), starts LiveKit's console worker exactly as
``python AGENT_FILE console --text`` does (LiveKit's ``_ConsoleWorker`` runs the server's
``rtc_session`` entrypoint on a simulated console job), then sends each line of standard
input as a typed user turn with ``session.run(user_input=...)``, the call LiveKit's text
console makes. Instead of drawing LiveKit's interactive prompt (which needs a terminal), it
prints the conversation in the transcript format of :mod:`transcript`.

This is test tooling: it touches LiveKit's console internals (``_legacy``), which LiveKit may
change between versions; it is pinned with livekit-agents in the extras.
"""

from __future__ import annotations

import asyncio
import runpy
import sys
import threading
from typing import Any

from livekit.agents.cli import _legacy
from livekit.agents.cli.cli import AgentsConsole as CanonicalConsole

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from transcript import LiveTranscript  # noqa: E402


def main(path: str) -> int:
    import logging
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    sys.path.insert(0, path.rsplit("/", 1)[0] or ".")
    module = runpy.run_path(path, run_name="livekit_example")
    server = module["server"]
    console = _legacy.AgentsConsole.get_instance()
    CanonicalConsole._instance = console  # type: ignore[assignment]
    console.console_mode = "text"
    console.enabled = True
    console.record = False
    done = threading.Event()
    worker = _legacy._ConsoleWorker(server=server, shutdown_cb=done.set)
    worker.start()
    console.wait_for_io_acquisition()
    session = console.io_session
    live = LiveTranscript(session)
    console.io_loop.call_soon_threadsafe(live.attach)
    try:
        for raw in sys.stdin:
            text = raw.rstrip("\n")
            if text.strip():
                future = asyncio.run_coroutine_threadsafe(_run(session, text), console.io_loop)
                future.result(timeout=60)
        asyncio.run_coroutine_threadsafe(_settle(session), console.io_loop).result(timeout=60)
        for line in live.lines:
            print(line, flush=True)
    finally:
        worker.shutdown()
        worker.join()
    return 0


async def _run(session: Any, text: str) -> None:
    # as a user at LiveKit's console: type once the agent waits for you (a greeting, a
    # handoff's on_enter or an AgentTask starting first)
    await _settle(session)
    result = await session.run(user_input=text)
    await result


async def _idle(session: Any) -> None:
    # LiveKit's wait_for_idle raises when it catches an activity closing in a handoff (an
    # AgentTask returning); the next activity is current a moment later: look again
    from livekit.agents.voice.agent_activity import ActivityClosedError

    while True:
        try:
            await session.wait_for_idle()
            return
        except ActivityClosedError:
            await asyncio.sleep(0.05)


async def _settle(session: Any) -> None:
    # idle, and still idle a moment later with nothing added (a tool's reply is scheduled
    # just after the tool returns)
    count = -1
    while count != len(session.history.items):
        count = len(session.history.items)
        await _idle(session)
        await asyncio.sleep(0.3)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
