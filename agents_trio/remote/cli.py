"""The ``serve``, ``console`` and ``simulate`` subcommands of ``python -m agents_trio``.

    python -m agents_trio serve --port 8765                 # the demo agent behind a host
    python -m agents_trio console --connect 127.0.0.1:8765  # chat with it by typing
    python -m agents_trio simulate scenarios.json --connect 127.0.0.1:8765
    python -m agents_trio simulate scenarios.json           # in-process, demo agent

They speak LiveKit's remote-session protocol (``AgentSessionMessage`` over TCP) by default,
so ``console`` and ``simulate`` also drive a LiveKit agent's ``SessionHost``;
``--protocol msgpack`` (and every ``unix:PATH`` address) uses the home-made protocol.
"""

from __future__ import annotations

import argparse
import functools
import signal
import sys
from typing import Protocol

import trio

COMMANDS = ("serve", "console", "simulate")


class _Subcommands(Protocol):
    """What ``add_commands`` uses of argparse's subparsers object."""

    def add_parser(self, name: str, *, help: str = ...) -> argparse.ArgumentParser: ...


def add_commands(sub: _Subcommands) -> None:
    """Add the subcommands to an ``argparse`` subparsers object."""
    serve = sub.add_parser("serve", help="serve the demo agent (fake models) to remote clients")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default loopback)")
    serve.add_argument("--port", type=int, default=8765, help="TCP port (0 picks a free one)")
    serve.add_argument("--unix", metavar="PATH",
                       help="listen on a Unix socket instead (msgpack protocol)")
    _protocol_option(serve)
    console = sub.add_parser(
        "console", help="chat by typing with an agent served by a host (--connect), or run an "
                        "agent file against LiveKit's TCP console (AGENT --connect-addr)")
    console.add_argument("entrypoint", nargs="?", metavar="AGENT",
                         help="with --connect-addr: the agent file or module (file.py[:name])")
    console.add_argument("--connect", metavar="HOST:PORT",
                         help="the host's address (HOST:PORT or unix:PATH)")
    console.add_argument("--connect-addr", metavar="HOST:PORT",
                         help="the TCP console server to dial (as `python -m livekit.agents "
                              "console --connect-addr`)")
    console.add_argument("--timeout", type=float, default=10.0,
                         help="seconds to wait for the host to be reachable and ready")
    _protocol_option(console)
    simulate = sub.add_parser("simulate", help="play a JSON scenario file against an agent")
    simulate.add_argument("scenarios", help="the scenario file (JSON)")
    simulate.add_argument("--connect", metavar="HOST:PORT",
                          help="drive the agent served there (default: the demo, in-process)")
    simulate.add_argument("--agent", metavar="FILE",
                          help="run this agent file's entrypoint (an AgentServer written the "
                               "LiveKit way) in-process and play against its session "
                               "(default: the file's \"agent\" key, else the demo)")
    _protocol_option(simulate)


def _protocol_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--protocol", choices=("livekit", "msgpack"), default="livekit",
                        help="LiveKit's remote-session protocol (default) or the home-made "
                             "msgpack one (always used for unix:PATH addresses)")


def _protocol(args: argparse.Namespace, address: str | None) -> str:
    if address is not None and address.startswith("unix:"):
        return "msgpack"
    return str(args.protocol)


def run_command(args: argparse.Namespace) -> int:
    if args.command == "serve":
        return _serve(args)
    if args.command == "console":
        if args.connect_addr is not None or args.entrypoint is not None:
            if args.connect_addr is None or args.entrypoint is None or args.connect:
                print("error: give AGENT with --connect-addr, or --connect alone",
                      file=sys.stderr)
                return 2
            from .lk.tcp_console import run_console_agent

            return trio.run(run_console_agent, args.entrypoint, args.connect_addr)
        if args.connect is None:
            print("error: console needs --connect HOST:PORT (or AGENT --connect-addr "
                  "HOST:PORT)", file=sys.stderr)
            return 2
        if _protocol(args, args.connect) == "livekit":
            from .lk.console import run_lk_console

            return trio.run(lambda: run_lk_console(args.connect, connect_timeout=args.timeout))
        from .console import run_console

        return trio.run(lambda: run_console(args.connect, connect_timeout=args.timeout))
    return trio.run(_simulate, args.scenarios, args.connect, _protocol(args, args.connect),
                    args.agent)


def _serve(args: argparse.Namespace) -> int:
    try:
        trio.run(_serve_until_signal, args)
    except OSError as e:
        print(f"cannot serve: {e}", file=sys.stderr)
        return 1
    return 0


async def _serve_until_signal(args: argparse.Namespace) -> None:
    """Serve until SIGINT or SIGTERM, then close the session: clients get a goodbye."""
    from .demo import serve_demo

    stop = trio.Event()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(functools.partial(serve_demo, host=args.host, port=args.port,
                                                  path=args.unix, out=sys.stdout, stop=stop,
                                                  protocol=args.protocol))
            async for _ in signals:
                print("agents_trio: stopping", flush=True)
                stop.set()
                break


async def _simulate(path: str, connect: str | None, protocol: str = "livekit",
                    agent: str | None = None) -> int:
    from .client import open_remote_session
    from .demo import demo_session
    from .errors import RemoteSessionError
    from .simulate import (ScenarioError, format_results, load_scenarios, run_scenarios,
                           scenario_file_agent)

    try:
        scenarios = load_scenarios(path)
        if agent is None and connect is None:
            agent = scenario_file_agent(path)
    except ScenarioError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if agent is not None:
        if connect is not None:
            print("error: give --agent or --connect, not both", file=sys.stderr)
            return 2
        from .simulate_agent import load_agent_file, run_scenarios_on_file

        try:
            results = await run_scenarios_on_file(scenarios, load_agent_file(agent))
        except ScenarioError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    elif connect is None:
        from ..demo import WeatherAgent

        results = await run_scenarios(scenarios,
                                      factory=lambda: (demo_session(delay=0.0), WeatherAgent()))
    elif protocol == "livekit":
        from .lk.client import connect_remote_session

        host, _, port = connect.rpartition(":")
        if not host or not port.isdigit():
            print(f"error: the address must be HOST:PORT, got {connect!r}", file=sys.stderr)
            return 2
        try:
            async with connect_remote_session(host.strip("[]"), int(port)) as lk_remote:
                await lk_remote.wait_for_ready(timeout=10.0)
                results = await run_scenarios(scenarios, remote=lk_remote)
        except (RemoteSessionError, TimeoutError) as e:
            print(f"error: {getattr(e, 'message', e)}", file=sys.stderr)
            return 2
    else:
        try:
            async with open_remote_session(connect) as remote:
                await remote.wait_for_ready()
                results = await run_scenarios(scenarios, remote=remote)
        except RemoteSessionError as e:
            print(f"error: {e.message}", file=sys.stderr)
            return 2
    print(format_results(results), flush=True)
    return 0 if all(r.passed for r in results) else 1
