"""`plan`: which pods a scale-down deletes, and whether the policy allows it."""

from __future__ import annotations

import argparse
import json
import time

import urllib3

from ..cluster.kubeclient import (
    ApiError,
    KubeConfigError,
    add_cluster_arguments,
    api_client_from,
    describe_error,
    server_of,
)
from ..cluster.live import read_snapshot
from ..cluster.state import ListedSnapshot, load_policy, load_state, write_state
from ..core.cluster import ClusterView
from ..core.kube import format_time_ns, parse_time_ns
from ..errors import CommandError
from .argtypes import number
from .plan_document import build_plan, render_text


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
    """Write `snapshot` as a state file that --state reads back."""
    try:
        write_state(path, snapshot, comment)
    except OSError as err:
        raise CommandError(f"--save-state {path}: cannot write it: {err.strerror}") from None
