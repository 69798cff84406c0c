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
