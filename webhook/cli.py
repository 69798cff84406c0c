"""`python -m webhook`: the command line. Each command lives in its own module."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence

from .core.kube import parse_time_ns
from .core.policy import PolicyError
from .plan import PlanError, build_plan, render_text
from .state import StateError, load_policy, load_state

EXIT_USAGE = 2


class CommandError(Exception):
    """Unusable input for a command: printed as one `error:` line, exit code 2."""


def _now_ns(text: str | None) -> int:
    if text is None:
        return time.time_ns()
    try:
        value = parse_time_ns(text)
    except ValueError:
        value = None
    if value is None:
        raise CommandError(f"--now {text!r}: expected an RFC 3339 time such as "
                           "2026-01-31T12:00:00Z")
    return value


def _replicas(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative; replicas must be 0 or more")
    return value


def add_plan_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "plan",
        help="preview which pods a scale-down deletes and whether the policy allows it",
        description="Predict which pods Kubernetes deletes when a workload is scaled to "
        "--replicas, and judge them against the pool policy. Exit code 0 whatever the "
        "verdict; 2 for unusable input.",
    )
    parser.add_argument("--state", metavar="FILE",
                        help="cluster state: a kubectl get ... -o yaml List or multi-document "
                        "YAML/JSON (without it, the live cluster is read)")
    parser.add_argument("--workload", required=True, metavar="KIND/NAMESPACE/NAME",
                        help="deployment|replicaset|statefulset (or deploy|rs|sts)/NS/NAME")
    parser.add_argument("--replicas", required=True, type=_replicas, metavar="N",
                        help="the target replica count")
    parser.add_argument("--policy", metavar="FILE",
                        help="policy YAML (default: the built-in policy)")
    parser.add_argument("--now", metavar="RFC3339",
                        help="the controller's clock for age buckets (default: now)")
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text",
                        help="text (default) for people, json for scripts")
    parser.set_defaults(run=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    now_ns = _now_ns(args.now)
    policy = load_policy(args.policy)
    if args.state is None:
        raise CommandError("--state FILE is required: reading a live cluster is not "
                           "available in this version")
    view = load_state(args.state)
    document = build_plan(view, policy, args.workload, args.replicas, now_ns)
    if args.output == "json":
        print(json.dumps(document, indent=2))
    else:
        print(render_text(document))
    return 0


def _serve_parser(commands: argparse._SubParsersAction) -> None:
    from .serve import add_serve_parser

    add_serve_parser(commands)


PARSER_BUILDERS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_plan_parser,
    _serve_parser,
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m webhook",
        description="poolguard: keeps GPU inference replicas on the inference pool when "
        "workloads scale down.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in PARSER_BUILDERS:
        add(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run a command; unusable input exits 2 with a one-line `error:` on stderr."""
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (CommandError, PlanError, PolicyError, StateError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
