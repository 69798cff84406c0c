"""`python -m certs`: certificates for the poolguard webhook and the caBundle that trusts them.

Commands, one module each: `create` (certs/create.py), `renew` (certs/renew.py),
`ca-bundle` and `inject` (certs/ca_bundle.py), and `sync` (in the cluster: certs/sync.py).
Unusable input (missing or unreadable
files, a directory that cannot be written, a key that does not match its certificate)
prints one `error: ...` line on stderr and exits with code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from webhook.cli.argtypes import OneLineErrors, add_version_flags, run_writing_stdout
from webhook.errors import InputError

from .ca_bundle import add_ca_bundle_parser, add_inject_parser
from .create import add_create_parser
from .errors import EXIT_USAGE
from .flags import DAYS
from .renew import add_renew_parser


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(
        prog="python -m certs",
        description="Certificates for the poolguard webhook: a private CA, a serving "
        "certificate for the webhook Service, the Secret that carries them, and the caBundle "
        "for the webhook configurations. Exit code 2 with one `error:` line for unusable "
        "input.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (add_create_parser, add_renew_parser, add_ca_bundle_parser, add_inject_parser):
        add(commands)
    from .sync import add_sync_parser

    add_sync_parser(commands, DAYS)
    add_version_flags(parser, commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_writing_stdout(lambda: _run(args))


def _run(args: argparse.Namespace) -> int:
    try:
        return args.run(args)
    except InputError as err:  # CertsError, PKIError: one `error:` line, exit code 2
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
