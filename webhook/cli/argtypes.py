"""argparse types shared by the command lines (webhook and certs)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any


def number(kind: type = int, minimum: float = 0, *, above: bool = False,
           what: str = "the value", maximum: float | None = None
           ) -> Callable[[str], int | float]:
    """An argparse type: `kind(text)`, at least `minimum` (or more than it, with `above`),
    at most `maximum` when given."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            noun = "whole number" if kind is int else "number"
            raise argparse.ArgumentTypeError(f"{text!r} is not a {noun}") from None
        if value < minimum or (above and value == minimum):
            bound = "more than" if above else "at least"
            sign = " (it is negative)" if value < 0 <= minimum else ""
            raise argparse.ArgumentTypeError(f"{text}: {what} must be {bound} {minimum}{sign}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"{text}: {what} must be at most {maximum}")
        return value
    return parse


INT32_MAX = 2**31 - 1  # a replica count is an int32 in every Kubernetes API


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



class OutputWriteError(Exception):
    """Standard output could not be written (a full disk, a closed file): not a pipe."""

    def __init__(self, err: OSError) -> None:
        super().__init__(err.strerror or str(err))


class _GuardedStdout:
    """sys.stdout whose write errors other than a closed pipe become OutputWriteError, so
    the command's own OSError handlers (its files) never mistake them for theirs."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as err:
            raise OutputWriteError(err) from None

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as err:
            raise OutputWriteError(err) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a CLI its reader left


def run_writing_stdout(command: Callable[[], int]) -> int:
    """Run `command` with stdout guarded, as CLIs behave.

    A reader that stopped early (`... | head -1`) ends the command quietly, with the
    command's own exit code when it had finished, else 141 as for a killed CLI; any other
    write error is one `error:` line and exit code 2.
    """
    original = sys.stdout
    sys.stdout = _GuardedStdout(original)
    code = EXIT_BROKEN_PIPE
    try:
        code = command()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        _silence_stdout(original)
        return code
    except OutputWriteError as err:
        _silence_stdout(original)
        print(f"error: cannot write the output: {err}", file=sys.stderr)
        return 2
    finally:
        sys.stdout = original


def _silence_stdout(stream: Any) -> None:
    # What is still buffered would fail again when Python flushes at exit, with an
    # "Exception ignored" message: point the descriptor at /dev/null instead.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, stream.fileno())
    os.close(devnull)
