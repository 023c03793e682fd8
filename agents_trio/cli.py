"""``cli.run_app(server)``: the command line of an agent file, as LiveKit's.

    python my_agent.py console --text      # type (or pipe) lines; the replies are printed
    python my_agent.py console             # talk through the microphone and speaker
    python my_agent.py dev                 # serve LiveKit's agent dispatch (debug logs)
    python my_agent.py start               # the same, for production
    python my_agent.py connect --room demo [--participant-identity agent-1]
    python my_agent.py download-files      # model files of the LiveKit plugins imported

``start``, ``dev`` and ``connect`` are LiveKit's own commands (its worker, options and
logging), serving this server's Trio entrypoint; they need ``LIVEKIT_URL``,
``LIVEKIT_API_KEY`` and ``LIVEKIT_API_SECRET`` (or ``--url``, ``--api-key``,
``--api-secret``). ``console`` runs here, see :mod:`agents_trio.console`: it exits with
status 0 once the input ended and the job finished, 130 when interrupted (Ctrl-C: the job
shuts down gracefully; a second Ctrl-C exits at once with status 1, as LiveKit's console).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import warnings
from pathlib import Path
from typing import NoReturn

import trio

from .console import ConsoleIO, run_console
from .job import Entrypoint
from .job_process import JobProcess
from .nurseries import open_unwrapping_nursery
from .server import AgentServer
from .worker_options import WorkerOptions

__all__ = ["main", "run_app"]

LIVEKIT_COMMANDS = ("start", "dev", "connect")


def run_app(server: AgentServer | WorkerOptions) -> NoReturn:
    """Run the command given on the command line (``sys.argv``) for ``server``, then exit
    with its status. ``server`` may be LiveKit's legacy :class:`WorkerOptions`: its server runs.

    Raises:
        SystemExit: Always, with the command's exit status.
    """
    raise SystemExit(main(server, sys.argv[1:]))


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="Run this agent.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    console = sub.add_parser("console", help="run the agent here: text (--text) or the "
                                             "microphone and speaker")
    console.add_argument("--text", action="store_true",
                         help="read the user's lines from standard input (a terminal or a "
                              "pipe) and print the conversation")
    console.add_argument("--interrupt", action=argparse.BooleanOptionalAction, default=None,
                         help="with --text: whether a line read while the agent replies "
                              "interrupts it (default: yes from a terminal, no from a pipe: "
                              "then each line waits for the previous reply)")
    console.add_argument("--input-device", help="microphone: a device id or name")
    console.add_argument("--output-device", help="speaker: a device id or name")
    console.add_argument("--connect-addr", metavar="HOST:PORT",
                         help="serve the session to LiveKit's TCP console listening there "
                              "(what `lk agent console` runs)")
    console.add_argument("--list-devices", action="store_true",
                         help="list the audio devices and exit")
    console.add_argument("--log-level", default="WARNING",
                         help="logging level of the logs (on standard error)")
    for name, text in (("start", "serve LiveKit's agent dispatch (production)"),
                       ("dev", "serve LiveKit's agent dispatch (development)"),
                       ("connect", "join one room (--room) as this agent")):
        sub.add_parser(name, help=f"{text}; LiveKit's command and options", add_help=False)
    sub.add_parser("download-files",
                   help="download the model files of the LiveKit plugins the agent imports")
    return parser


def main(server: AgentServer | WorkerOptions, argv: list[str]) -> int:
    """Run one command for ``server`` (or the server of a :class:`WorkerOptions`); return the
    exit status.

    Raises:
        TypeError: ``server`` is neither.
    """
    if isinstance(server, WorkerOptions):
        server = server.server()
    if not isinstance(server, AgentServer):
        raise TypeError(f"cli.run_app takes an AgentServer or WorkerOptions, got "
                        f"{type(server).__name__}")
    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "agent"
    if argv and argv[0] in LIVEKIT_COMMANDS:
        return _run_livekit_command(server, prog, argv)
    parser = _parser(prog)
    args = parser.parse_args(argv)
    if args.command == "console":
        return _console(server, args)
    if args.command == "download-files":
        return _download_files()
    parser.print_help()
    return 2


def _run_livekit_command(server: AgentServer, prog: str, argv: list[str]) -> int:
    try:
        from livekit.agents import cli as livekit_cli
    except ImportError:
        print(f"error: `{argv[0]}` runs LiveKit's worker, which needs livekit-agents: "
              f"pip install 'agents-trio[livekit-plugins]'", file=sys.stderr)
        return 1
    try:
        lk_server = server.build_livekit_server()
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    sys.argv = [prog, *argv]  # LiveKit's command line parses sys.argv
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            livekit_cli.run_app(lk_server)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    return 0


def _device(value: str | None) -> int | str | None:
    return int(value) if value is not None and value.isdigit() else value


def _console(server: AgentServer, args: argparse.Namespace) -> int:
    from .console import AudioConsole, TextConsole

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(levelname)s %(name)s: %(message)s")
    if args.list_devices:
        return _list_devices()
    try:
        entrypoint = server.entrypoint
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    console: ConsoleIO
    if args.connect_addr:
        from .remote.lk.tcp_console import TcpConsole

        host, sep, port = args.connect_addr.rpartition(":")
        if not sep or not host or not port.isdigit():
            print(f"error: --connect-addr must be HOST:PORT, got {args.connect_addr!r}",
                  file=sys.stderr)
            return 2
        console = TcpConsole(host.strip("[]"), int(port))
    elif args.text:
        if sys.stdin.isatty():
            print("Type a message and press Enter (it interrupts the agent while it "
                  "replies); Ctrl-D ends.", file=sys.stderr)
        console = TextConsole(interrupt=args.interrupt)
    else:
        missing = _missing_audio_devices()
        if missing:
            print(f"error: {missing}; `console --text` runs the agent in text mode",
                  file=sys.stderr)
            return 1
        console = AudioConsole(input_device=_device(args.input_device),
                               output_device=_device(args.output_device))
    from .io.local_audio import LocalAudioUnavailable

    try:
        proc = server.prewarm()
        status = trio.run(_run_console_until_interrupted, entrypoint, console, proc)
    except KeyboardInterrupt:  # Ctrl-C while prewarming, or before the watcher took it
        return 130
    except LocalAudioUnavailable as e:   # a device that would not open
        print(f"error: {e}; `console --text` runs the agent in text mode", file=sys.stderr)
        return 1
    except OSError as e:
        where = f" at {args.connect_addr}" if args.connect_addr else ""
        print(f"error: the console{where} failed: {e}", file=sys.stderr)
        return 1
    if getattr(console, "failure", None) is not None and status == 0:
        return 1   # a device lost mid-session ended it (reported when it happened)
    return status


async def _run_console_until_interrupted(entrypoint: Entrypoint, console: ConsoleIO,
                                         proc: JobProcess) -> int:
    """The console job; Ctrl-C (or SIGTERM) shuts it down gracefully (status 130), a second
    one while it shuts down exits at once (status 1), as LiveKit's console.

    Cancellation: as the console job: cancelling shuts it down."""
    interrupted = False
    # the watcher owns the signals for the whole run: none is left queued for Trio to
    # re-raise as a KeyboardInterrupt on the way out
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_unwrapping_nursery() as nursery:  # the job's error, as raised
            job_scope = trio.CancelScope()

            async def stop_on_signal() -> None:
                nonlocal interrupted
                async for _ in signals:
                    if interrupted:
                        _exit_now()
                    interrupted = True
                    print("shutting down (Ctrl-C again to quit at once)", file=sys.stderr,
                          flush=True)
                    job_scope.cancel()  # the job shuts down: sessions close, callbacks run

            nursery.start_soon(stop_on_signal)
            with job_scope:
                await run_console(entrypoint, console, proc=proc)
            nursery.cancel_scope.cancel()
    return 130 if interrupted else 0


def _exit_now() -> NoReturn:
    """The second Ctrl-C: the graceful shutdown (sessions' close, the entrypoint's and the
    shutdown callbacks' graces) is abandoned, as LiveKit's console does."""
    print("exiting forcefully", file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(1)


def _missing_audio_devices() -> str | None:
    from .io.local_audio import LocalAudioUnavailable, device_available, import_sounddevice

    try:
        import_sounddevice()
    except LocalAudioUnavailable as e:
        return f"no local audio: {e}"
    missing = [kind for kind, name in (("input", "microphone"), ("output", "speaker"))
               if not device_available(kind)]
    if missing:
        names = " and ".join("a microphone" if k == "input" else "a speaker" for k in missing)
        return f"no local audio: this machine has no default device for {names}"
    return None


def _list_devices() -> int:
    from .io.local_audio import LocalAudioUnavailable, import_sounddevice

    try:
        sd = import_sounddevice()
    except LocalAudioUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(sd.query_devices())
    return 0


def _download_files() -> int:
    try:
        from livekit.agents import Plugin
    except ImportError:
        print("nothing to download: livekit-agents is not installed, so no LiveKit plugin "
              "needs files")
        return 0
    plugins = list(Plugin.registered_plugins)
    if not plugins:
        print("nothing to download: the agent imports no LiveKit plugin")
        return 0
    for plugin in plugins:
        print(f"downloading the files of {plugin.package}", flush=True)
        try:
            plugin.download_files()
        except Exception as e:  # noqa: BLE001 - any failure is reported the same way
            print(f"error: downloading the files of {plugin.package} failed: {e}",
                  file=sys.stderr)
            return 1
    return 0
