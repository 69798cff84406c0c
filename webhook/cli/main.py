"""`python -m webhook`: the command line. Each command lives in its own module."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from ..errors import EXIT_USAGE, InputError
from .argtypes import OneLineErrors, add_version_flags, program_name, run_writing_stdout
from .plan import add_plan_parser
from .policy import add_policy_parser
from .rebalance import add_rebalance_parser
from .reconcile import add_reconcile_parser
from .serve import add_serve_parser

PARSER_BUILDERS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_plan_parser,
    add_serve_parser,
    add_reconcile_parser,
    add_policy_parser,
    add_rebalance_parser,
]


def build_parser(prog: str = "python -m webhook") -> argparse.ArgumentParser:
    parser = OneLineErrors(
        prog=prog,
        description="poolguard: keeps GPU inference replicas on the inference pool when "
        "workloads scale down.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in PARSER_BUILDERS:
        add(commands)
    add_version_flags(parser, commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; unusable input exits 2 with a one-line `error:` on stderr."""
    # The `poolguard` console script names itself in usage lines and errors.
    prog = program_name("python -m webhook") if argv is None else "python -m webhook"
    args = build_parser(prog).parse_args(argv)
    # urllib3 logs each connection retry as a warning; our errors say it in one line.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    return run_writing_stdout(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    try:
        return args.run(args)
    except InputError as err:  # every command: one `error:` line, exit code 2
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
