"""argparse types shared by the command lines (webhook and certs)."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def number(kind: type = int, minimum: float = 0, *, above: bool = False,
           what: str = "the value") -> Callable[[str], int | float]:
    """An argparse type: `kind(text)`, at least `minimum` (or more than it, with `above`)."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            noun = "whole number" if kind is int else "number"
            raise argparse.ArgumentTypeError(f"{text!r} is not a {noun}") from None
        if value < minimum or (above and value == minimum):
            bound = "more than" if above else "at least"
            sign = " (it is negative)" if value < 0 else ""
            raise argparse.ArgumentTypeError(f"{text}: {what} must be {bound} {minimum}{sign}")
        return value
    return parse


class OneLineErrors(argparse.ArgumentParser):
    """Usage errors as one `error: ...` line on stderr, exit code 2 (scripts grep for it)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def add_version_flags(parser: argparse.ArgumentParser,
                      commands: argparse._SubParsersAction) -> None:
    """`--version` on the program and on each of its commands: "PROG [COMMAND] VERSION"."""
    from .. import __version__

    for each in (parser, *dict.fromkeys(commands.choices.values())):
        each.add_argument("--version", action="version", version=f"{each.prog} {__version__}",
                          help="print the version and exit")


def program_name(default: str) -> str:
    """The name the user typed: the console script's own (poolguard), else `default`."""
    import sys
    from pathlib import Path

    invoked = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    if invoked in ("", "__main__.py", "-c", "-m") or invoked.startswith(("python", "pytest")):
        return default
    return invoked

