"""`plan`: which pods a scale-down deletes, and whether the policy allows it."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import urllib3

from ..cluster.kubeclient import (
    ApiError,
    KubeConfigError,
    NoKubeConfigError,
    add_cluster_arguments,
    api_client_from,
    describe_error,
    server_of,
)
from ..cluster.listing import read_snapshot
from ..cluster.state import (
    ListedSnapshot,
    load_policy,
    load_state,
    print_state_notes,
    write_state,
)
from ..core.kinds.registry import KINDS, RESOURCES, SIZED_KINDS
from ..core.objects.kube import format_time_ns, parse_time_ns
from ..core.policy.policy import Policy
from ..core.policy.pool_coverage import PoolCoverage, pool_coverage
from ..core.scale.requester import clamps
from ..core.view.resource import Resource
from ..core.view.snapshot import Snapshot
from ..errors import EXIT_USAGE, CommandError
from .argtypes import INT32_MAX, number
from .plan_audit import audit_workloads, render_audit
from .plan_document import build_plan, not_checked
from .plan_html import render_html
from .plan_lookup import current_replicas
from .plan_rebalance import rebalance_html
from .plan_text import render_text

EXIT_DENIED = 3  # plan --fail-on-deny: the verdict denies
EXIT_NOT_CHECKED = 4  # plan --fail-on-deny: a verdict not given (`not_checked`)
# What plan reads from the API server, in words (--help).
_READ = (", ".join(r.name for r in RESOURCES if not r.optional) + ", and "
         + " and ".join(r.name for r in RESOURCES if r.optional)
         + " where their CRDs are installed")


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
        "--replicas, and judge them against the pool policy with the webhook's own decision. "
        f"The cluster is read once from the Kubernetes API ({_READ}), or from a saved --state "
        "file. "
        f"Exit codes: 0 done (whatever the verdict, without --fail-on-deny); {EXIT_USAGE} "
        "unusable input or an unreachable API server; "
        f"{EXIT_DENIED} --fail-on-deny and the verdict (or one of --all-workloads) denies; "
        f"{EXIT_NOT_CHECKED} --fail-on-deny, none denies, but a verdict could not be given "
        "(NOT CHECKED: the state lacks pods, the owner they name, nodes or the Namespace a "
        "namespaceSelector needs, or no node of the state is in a protected pool of the "
        "policy; listed first by --all-workloads). A workload the policy does not govern is "
        "the webhook's own answer: ALLOWED (not checked), exit 0.",
    )
    parser.add_argument("--state", metavar="FILE",
                        help="cluster state: what kubectl get ... -o json prints (JSON reads "
                        "fastest: YAML is read as fast where its scalars are written as "
                        "kubectl writes them, several times slower where not), or "
                        "multi-document YAML/JSON (without it, the live cluster is read)")
    add_cluster_arguments(parser)
    parser.add_argument("--save-state", metavar="FILE",
                        help="write what was read from the live cluster to FILE as a kind: List "
                        "that --state accepts: JSON when FILE ends in .json (much faster "
                        "on a large cluster), else YAML")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--workload", metavar="KIND/NAMESPACE/NAME", action="append",
                       help="|".join(k.kind.lower() for k in KINDS) + " (or "
                       + "|".join(k.short_names[0] for k in KINDS) + ")/NS/NAME; "
                       "repeat it for several workloads (printed one after the other; "
                       "json: a list)")
    which.add_argument("--all-workloads", action="store_true",
                       help="every " + ", ".join(
                           k.kind + (" without an owner" if k.kind in SIZED_KINDS else "")
                           for k in KINDS) + ": an audit of which scale-downs the policy "
                       "would deny (use with --replicas-delta)")
    count = parser.add_mutually_exclusive_group(required=True)
    count.add_argument("--replicas", metavar="N",
                       type=number(int, 0, what="replicas", maximum=INT32_MAX),
                       help="the target replica count")
    count.add_argument("--replicas-delta", metavar="D",
                       type=number(int, -INT32_MAX, what="the delta", maximum=INT32_MAX),
                       help="the target relative to each workload's current count, e.g. -1 "
                       "for its next scale-down (a target below 0 is refused)")
    parser.add_argument("--policy", metavar="FILE",
                        help="policy YAML (default: the built-in policy)")
    parser.add_argument("--now", metavar="RFC3339",
                        help="the controller's clock for age buckets (default: now)")
    parser.add_argument("--output", "-o", nargs="+", metavar=("FORMAT", "FILE"),
                        default=["text"],
                        help="text (default) for people, json for scripts, html for a "
                        "self-contained page; FILE writes there instead of to stdout")
    parser.add_argument("--as", dest="as_user", metavar="USER",
                        help="answer as the webhooks answer this requester: exempt users and "
                        "workloads sized by another owner are allowed, a listed autoscaler or "
                        "GitOps controller is judged with its group's enforcement, or clamped "
                        "to the safe count (CLAMPED to N, JSON clampedTo)")
    parser.add_argument("--fail-on-deny", action="store_true",
                        help=f"exit {EXIT_DENIED} when the verdict denies, {EXIT_NOT_CHECKED} "
                        "when a verdict could not be given for want of data in the state "
                        "or of nodes in a protected pool (for CI gates)")
    parser.set_defaults(run=run_plan)


def run_plan(args: argparse.Namespace) -> int:
    now_ns = _now_ns(args.now)
    output_format, output_file = _output_choice(args.output)
    if args.all_workloads and output_format == "html":
        raise CommandError("--output html draws one workload; use text or json with "
                           "--all-workloads")
    policy = load_policy(args.policy)
    view: Snapshot
    if args.state is None:
        view = read_live_state(args.kubeconfig, args.context, args.save_state)
    elif args.kubeconfig or args.context or args.save_state:
        raise CommandError("--kubeconfig, --context and --save-state read a live cluster; "
                           "leave them out with --state")
    else:
        view = load_state(args.state)
        print_state_notes(view)
    coverage = _checked_coverage(policy, view, args.policy or "the built-in policy")
    if args.all_workloads:
        documents = audit_workloads(view, policy, args.replicas_delta, args.replicas, now_ns,
                                    args.as_user, coverage)
        if output_format == "json":
            text = json.dumps(documents, indent=2)
        else:
            text = render_audit(documents, str(args.state or "the cluster"),
                                clamps(policy, args.as_user))
    else:
        if output_format == "html" and len(args.workload) > 1:
            raise CommandError("--output html draws one workload; give one --workload")
        documents = [build_plan(view, policy, ref, _target(view, ref, args), now_ns,
                                args.as_user, coverage)
                     for ref in args.workload]
        if output_format == "json":
            text = json.dumps(documents[0] if len(documents) == 1 else documents, indent=2)
        elif output_format == "html":
            text = render_html(documents[0], rebalance_html(view, policy))
        else:
            text = "\n\n".join(render_text(doc) for doc in documents)
    _write_output(text, output_file)
    if not args.fail_on_deny:
        return 0
    if any(doc["allowed"] is False for doc in documents):
        return EXIT_DENIED
    if any(not_checked(doc) for doc in documents):
        return EXIT_NOT_CHECKED
    return 0


def _checked_coverage(policy: Policy, view: Snapshot, source: str) -> PoolCoverage:
    """The policy checked against the state's nodes; what leaves a protected pool without
    nodes is warned on stderr (the rest, often meant, is `policy check --state`'s)."""
    coverage = pool_coverage(policy, view.nodes())
    for finding in coverage.disarming:
        print(f"warning: {source}: {finding.message}", file=sys.stderr)
    return coverage


def _target(view: Snapshot, ref: str, args: argparse.Namespace) -> int:
    """--replicas, or the workload's current count plus --replicas-delta; a delta that goes
    below 0 is refused, naming the workload (a plan to 0 would answer another question)."""
    if args.replicas is not None:
        return int(args.replicas)
    current = current_replicas(view, ref)
    target = current + args.replicas_delta
    if target < 0:
        raise CommandError(f"--replicas-delta {args.replicas_delta}: {ref} has {current} "
                           f"replicas, so the target would be {target}; use a delta of "
                           f"-{current} or more, or --replicas 0")
    return target


_FORMATS = ("text", "json", "html")


def _output_choice(values: list[str]) -> tuple[str, str | None]:
    """(format, file or None) from `--output FORMAT [FILE]`."""
    if len(values) > 2:
        raise CommandError(f"--output {' '.join(values)}: expected a format and at most one "
                           "file, e.g. --output html plan.html")
    if values[0] not in _FORMATS:
        raise CommandError(f"--output {values[0]!r}: choose from {', '.join(_FORMATS)}")
    return values[0], values[1] if len(values) == 2 else None


def _write_output(text: str, path: str | None) -> None:
    if path is None:
        try:
            print(text, flush=True)
        except BrokenPipeError:
            # The reader stopped early (`plan ... | head -1`): not an error, and the exit
            # code still carries the verdict. Later flushes go nowhere instead of failing.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return
    try:
        Path(path).write_text(text + "\n", encoding="utf-8")
    except OSError as err:
        raise CommandError(f"--output {path}: cannot write it: {err.strerror}") from None


def read_live_state(kubeconfig: str | None, context: str | None,
                    save_to: str | None = None,
                    resources: Iterable[Resource] | None = None) -> ListedSnapshot:
    """Read the cluster once (every resource plan reads, or `resources`); optionally save
    it as a state file. Errors: CommandError."""
    try:
        api = api_client_from(kubeconfig, context)
    except NoKubeConfigError as err:
        raise CommandError(f"{err}, or --state FILE to plan on a saved cluster state "
                           "(kubectl get ... -o json: faster to read than YAML)") from None
    except KubeConfigError as err:
        raise CommandError(str(err)) from None
    server = server_of(api)
    try:
        snapshot = read_snapshot(api) if resources is None else read_snapshot(api, resources)
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
