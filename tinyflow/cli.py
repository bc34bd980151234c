"""The ``tinyflow`` command: ``tinyflow train | eval | data | sample | bench | sweep | launch | explain``.

Each subcommand lives in ``tinyflow/commands/<name>.py`` with ``register(subparsers)`` (which
adds its parser and sets ``func``) and ``run(args) -> int``. Every parser is an options.Parser: a bad
option value is one line naming the flag and exit status 2 before any work (the checks are declared
with the options, see tinyflow/commands/options.py).
"""
from __future__ import annotations

import importlib
import sys

from tinyflow.commands.options import Parser

COMMANDS = ("train", "eval", "data", "sample", "bench", "sweep", "launch", "explain")


def build_parser() -> Parser:
    from tinyflow import __version__

    parser = Parser(
        prog="tinyflow",
        description="tinyflow: train and benchmark AlexNet-style CNNs and LSTMs, on one or many workers.",
    )
    parser.add_argument("--version", action="version", version=f"tinyflow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"tinyflow.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"tinyflow.commands.{name}":
                raise
            continue
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
