"""``python -m agents_trio [demo] [--realtime | --voice [--out DIR]]``; ``serve``, ``console``, ``simulate``: see
``agents_trio/remote/cli.py``; ``connect``, ``worker`` (LiveKit rooms): see
``agents_trio/livekit_cli.py``."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents_trio")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="run the offline demo conversation (default)")
    demo.add_argument("--realtime", action="store_true", help="run at wall-clock pace")
    demo.add_argument("--voice", action="store_true",
                      help="real models and real audio, in real time (needs the [voice] extra "
                           "and espeak-ng)")
    demo.add_argument("--out", metavar="DIR",
                      help="with --voice: write user.wav, agent.wav, conversation.wav and "
                           "timeline.json to DIR (default: play through the speaker)")
    from .remote import cli as remote_cli

    remote_cli.add_commands(sub)
    from . import livekit_cli

    livekit_cli.add_commands(sub)
    args = parser.parse_args(argv)
    if args.command in remote_cli.COMMANDS:
        return remote_cli.run_command(args)
    if args.command in livekit_cli.COMMANDS:
        return livekit_cli.run_command(args)
    if args.command == "demo" and (args.voice or args.out):
        if not args.voice:
            parser.error("--out needs --voice")
        from .demo_voice import main as voice_main

        return voice_main(out_dir=args.out, out=sys.stdout)
    if args.command in (None, "demo"):
        from .demo import main as demo_main

        demo_main(realtime=getattr(args, "realtime", False), out=sys.stdout)
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
