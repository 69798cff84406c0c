"""`python -m webhook`: the command line. Each command lives in its own module."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import urllib3
import yaml

from .argtypes import OneLineErrors, number
from .core.cluster import ClusterView
from .core.kube import format_time_ns, parse_time_ns
from .core.policy import PolicyError
from .kubeclient import (
    ApiError,
    KubeConfigError,
    add_cluster_arguments,
    api_client_from,
    describe_error,
    server_of,
)
from .live import ListedSnapshot, read_snapshot, snapshot_to_list
from .plan import PlanError, build_plan, render_text
from .policy_command import add_policy_parser
from .reconcile_command import ReconcileError, add_reconcile_parser
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


def add_plan_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "plan",
        help="preview which pods a scale-down deletes and whether the policy allows it",
        description="Predict which pods Kubernetes deletes when a workload is scaled to "
        "--replicas, and judge them against the pool policy. The cluster is read once from "
        "the Kubernetes API (namespaces, nodes, deployments, replicasets, statefulsets, pods), "
        "or from a saved --state file. Exit code 0 whatever the verdict; 2 for unusable "
        "input or an unreachable API server.",
    )
    parser.add_argument("--state", metavar="FILE",
                        help="cluster state: a kubectl get ... -o yaml List or multi-document "
                        "YAML/JSON (without it, the live cluster is read)")
    add_cluster_arguments(parser)
    parser.add_argument("--save-state", metavar="FILE",
                        help="write what was read from the live cluster to FILE as a kind: List "
                        "YAML that --state accepts")
    parser.add_argument("--workload", required=True, metavar="KIND/NAMESPACE/NAME",
                        help="deployment|replicaset|statefulset (or deploy|rs|sts)/NS/NAME")
    parser.add_argument("--replicas", required=True, metavar="N",
                        type=number(int, 0, what="replicas"),
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
    view: ClusterView
    if args.state is None:
        view = read_live_state(args.kubeconfig, args.context, args.save_state)
    elif args.kubeconfig or args.context or args.save_state:
        raise CommandError("--kubeconfig, --context and --save-state read a live cluster; "
                           "leave them out with --state")
    else:
        view = load_state(args.state)
    document = build_plan(view, policy, args.workload, args.replicas, now_ns)
    if args.output == "json":
        print(json.dumps(document, indent=2))
    else:
        print(render_text(document))
    return 0


def read_live_state(kubeconfig: str | None, context: str | None,
                    save_to: str | None = None) -> ListedSnapshot:
    """Read the cluster once; optionally save it as a state file. Errors: CommandError."""
    try:
        api = api_client_from(kubeconfig, context)
    except KubeConfigError as err:
        raise CommandError(str(err)) from None
    server = server_of(api)
    try:
        snapshot = read_snapshot(api)
    except ApiError as err:
        raise CommandError(f"reading the cluster from the API server at {server}: "
                           f"{err}") from None
    except (urllib3.exceptions.HTTPError, OSError) as err:
        raise CommandError(f"cannot reach the API server at {server}: "
                           f"{describe_error(err)}") from None
    finally:
        api.close()
    if save_to is not None:
        save_state(save_to, snapshot, f"Cluster state read from {server} at "
                   f"{format_time_ns(time.time_ns())} by `python -m webhook plan`.")
    return snapshot


def save_state(path: str, snapshot: ListedSnapshot, comment: str) -> None:
    """Write `snapshot` as a kind: List YAML document that load_state reads back."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml is much faster
    text = yaml.dump(snapshot_to_list(snapshot), Dumper=dumper, sort_keys=False,
                     default_flow_style=False, allow_unicode=True)
    try:
        Path(path).write_text(f"# {comment}\n{text}", encoding="utf-8")
    except OSError as err:
        raise CommandError(f"--save-state {path}: cannot write it: {err.strerror}") from None


def _serve_parser(commands: argparse._SubParsersAction) -> None:
    from .serve import add_serve_parser

    add_serve_parser(commands)


PARSER_BUILDERS: list[Callable[[argparse._SubParsersAction], None]] = [
    add_plan_parser,
    _serve_parser,
    add_reconcile_parser,
    add_policy_parser,
]


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(
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
    # urllib3 logs each connection retry as a warning; our errors say it in one line.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        return args.run(args)
    except (CommandError, PlanError, PolicyError, StateError, ReconcileError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
