"""`rebalance --dry-run`: which overflow pods would go home, and which whole nodes that frees.

The command only plans: the moves themselves are the reconciler's (under its Lease, when
the policy enables them), so the command refuses to run without --dry-run rather than
look as if it acted.
"""

from __future__ import annotations

import argparse
import json

from ..cluster.kubeclient import add_cluster_arguments
from ..cluster.state import load_policy, load_state
from ..core.consolidation.rebalance.rebalance_plan import plan_rebalance
from ..errors import CommandError
from .plan import read_live_state
from .rebalance_text import render_rebalance

_FORMATS = ("text", "json")


def add_rebalance_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "rebalance",
        help="plan moving overflow pods home so that whole hybrid nodes go back to training",
        description="Plan which settled overflow pods (pods running in an unprotected pool "
        "while their preferred node affinity, or their priorityClassName through the "
        "policy's rebalance.priorityClassPools, names a protected pool) to evict so that "
        "their replacements land at home and whole nodes of the unprotected pools are left "
        "with no GPU pod, as many nodes as the protected pools' room allows. The cluster is "
        "read once from the Kubernetes API, or from a saved --state file. The command only "
        "plans (--dry-run): the reconciler that holds the Lease makes the moves when the "
        "policy's rebalance.enabled is true. Exit codes: 0 planned; 2 unusable input or an "
        "unreachable API server.")
    parser.add_argument("--state", metavar="FILE",
                        help="cluster state: a kubectl get ... -o yaml List or multi-document "
                        "YAML/JSON (without it, the live cluster is read)")
    add_cluster_arguments(parser)
    parser.add_argument("--policy", metavar="FILE",
                        help="policy YAML (default: the built-in policy)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan and evict nothing (required: the moves are the "
                        "reconciler's)")
    parser.add_argument("--output", "-o", choices=_FORMATS, default="text",
                        help="text (default): every move and every pod that stays, with "
                        "why; json: {moves, freedNodes, skipped} for scripts")
    parser.set_defaults(run=run_rebalance)


def run_rebalance(args: argparse.Namespace) -> int:
    if not args.dry_run:
        raise CommandError("rebalance: this command only plans, with --dry-run; the moves "
                           "are made by the reconciler when the policy's rebalance.enabled "
                           "is true")
    policy = load_policy(args.policy)
    if args.state is None:
        view = read_live_state(args.kubeconfig, args.context)
    elif args.kubeconfig or args.context:
        raise CommandError("--kubeconfig and --context read a live cluster; leave them out "
                           "with --state")
    else:
        view = load_state(args.state)
    plan = plan_rebalance(view, policy)
    if args.output == "json":
        print(json.dumps(plan.as_json(), indent=2))
    else:
        print(render_rebalance(plan, policy, str(args.state or "the cluster")))
    return 0
