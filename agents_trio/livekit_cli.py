"""``python -m agents_trio connect`` and ``python -m agents_trio worker``.

    connect ENTRYPOINT   join one room and run the entrypoint until it returns
    worker ENTRYPOINT    register with LiveKit's agent dispatch and run it for every job
                         (--processes N: N worker processes, one per core by default in
                         start; see docs/deployment.md)

``ENTRYPOINT`` is ``module:function`` or ``path/to/app.py:function`` (default function name:
``entrypoint``). The server and credentials come from ``--url``/``--api-key``/
``--api-secret`` or ``LIVEKIT_URL``, ``LIVEKIT_API_KEY``, ``LIVEKIT_API_SECRET``; ``connect``
also accepts a ready token (``--token`` or ``LIVEKIT_TOKEN``) instead of the key and secret.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from typing import Protocol

COMMANDS = ("connect", "worker")


class _Subcommands(Protocol):
    """What ``add_commands`` uses of argparse's subparsers object."""

    def add_parser(self, name: str, *, help: str = ...) -> argparse.ArgumentParser: ...


def add_commands(sub: _Subcommands) -> None:
    connect = sub.add_parser("connect", help="join a LiveKit room and run an entrypoint")
    connect.add_argument("entrypoint", help="module:function or path/to/app.py:function")
    connect.add_argument("--room", help="room to join (needed when a token is minted)")
    connect.add_argument("--identity", default=None, help="the agent's identity")
    connect.add_argument("--token", default=os.environ.get("LIVEKIT_TOKEN"),
                         help="access token (default: minted from the API key and secret)")
    connect.add_argument("--connect-timeout", type=float, default=10.0)
    _server_args(connect)

    worker = sub.add_parser("worker", help="serve LiveKit agent dispatch (LiveKit's worker)")
    worker.add_argument("entrypoint", help="module:function or path/to/app.py:function")
    worker.add_argument("mode", nargs="?", choices=("start", "dev"), default="start",
                        help="start (production) or dev (debug logging)")
    worker.add_argument("--agent-name", default="",
                        help="register for explicit dispatch under this name")
    worker.add_argument("--processes", type=int, default=None,
                        help="worker processes to run, each with its own job host "
                             "(default: one per core in start, 1 in dev)")
    worker.add_argument("--port", type=int, default=None,
                        help="HTTP health port of the first process (process i: port + i; "
                             "default: LiveKit's, 8081 in start and a free one in dev)")
    _server_args(worker)


def _server_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get("LIVEKIT_URL"),
                        help="LiveKit server URL (default: $LIVEKIT_URL)")
    parser.add_argument("--api-key", default=os.environ.get("LIVEKIT_API_KEY"))
    parser.add_argument("--api-secret", default=os.environ.get("LIVEKIT_API_SECRET"))
    parser.add_argument("--log-level", default="INFO")


def run_command(args: argparse.Namespace) -> int:
    if args.command == "connect":
        logging.basicConfig(level=args.log_level.upper(),
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        return _connect(args)
    return _worker(args)  # LiveKit's CLI sets up logging


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 1


def _connect(args: argparse.Namespace) -> int:
    import trio

    from .io.room import RoomConnectError, RoomDisconnectedError
    from .job import load_entrypoint, run_job

    if not args.url:
        return _fail("no LiveKit server: set LIVEKIT_URL or pass --url")
    if not args.token and not (args.api_key and args.api_secret):
        return _fail("no credentials: set LIVEKIT_API_KEY and LIVEKIT_API_SECRET (or pass "
                     "--token)")
    if not args.token and not args.room:
        return _fail("pass --room to join (a token is minted for it)")
    try:
        entrypoint = load_entrypoint(args.entrypoint)
        trio.run(lambda: run_job(entrypoint, url=args.url, token=args.token,
                                 api_key=args.api_key, api_secret=args.api_secret,
                                 room_name=args.room, identity=args.identity,
                                 connect_timeout=args.connect_timeout))
    except (ValueError, RoomConnectError, RoomDisconnectedError) as e:
        return _fail(str(e))
    except KeyboardInterrupt:
        return 130
    return 0


def _worker(args: argparse.Namespace) -> int:
    try:
        from livekit.agents import cli
    except ImportError:
        return _fail("the worker needs livekit-agents: pip install 'agents-trio[livekit-plugins]'")
    from .job import load_entrypoint
    from .worker import create_agent_server

    try:
        load_entrypoint(args.entrypoint)  # fail here, not in every job process
    except ValueError as e:
        return _fail(str(e))
    if not (args.url and args.api_key and args.api_secret):
        return _fail("the worker needs LIVEKIT_URL, LIVEKIT_API_KEY and LIVEKIT_API_SECRET "
                     "(or --url, --api-key, --api-secret)")
    processes = args.processes
    if processes is None:
        processes = 1 if args.mode == "dev" else (os.cpu_count() or 1)
    if processes < 1:
        return _fail("--processes must be at least 1")
    if processes > 1:
        return _worker_pool(args, processes)
    options = {} if args.port is None else {"port": args.port}
    server = create_agent_server(args.entrypoint, agent_name=args.agent_name, ws_url=args.url,
                                 api_key=args.api_key, api_secret=args.api_secret, **options)
    # LiveKit's own CLI runs the worker (process pool, registration, signals)
    sys.argv = ["python -m agents_trio worker", args.mode, "--log-level", args.log_level]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        cli.run_app(server)
    from .job_host import process_job_host

    process_job_host().close(30)
    return 0


def _worker_pool(args: argparse.Namespace, processes: int) -> int:
    """Run ``processes`` single-process workers under a supervisor (``worker_pool``)."""
    import trio

    from .worker_pool import WorkerPool, child_environment

    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    base_port = args.port if args.port is not None else (0 if args.mode == "dev" else 8081)
    commands = []
    for i in range(processes):
        command = [sys.executable, "-m", "agents_trio", "worker", args.entrypoint, args.mode,
                   "--processes", "1", "--log-level", args.log_level,
                   "--port", str(base_port + i if base_port else 0)]
        if args.agent_name:
            command += ["--agent-name", args.agent_name]
        commands.append(command)
    pool = WorkerPool(commands, env=child_environment(args.url, args.api_key, args.api_secret))
    return trio.run(pool.run)
