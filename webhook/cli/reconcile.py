"""`python -m webhook reconcile`: flags, modes, signals and exit codes."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import urllib3

from ..cluster.kubeclient import (
    ApiError,
    KubeConfigError,
    add_cluster_arguments,
    api_client_from,
    describe_error,
    server_of,
)
from ..cluster.policy_event import configmap_ref
from ..cluster.state import PolicyHolder, load_policy, load_state, print_state_notes
from ..core.policy.policy import Policy
from ..core.policy.pool_coverage import pool_coverage
from ..errors import InputError, LeaseHeldError
from ..reconciler.brake import REWRITES_HELD, policy_generation
from ..reconciler.decide import FAILED
from ..reconciler.metrics import serve_http
from ..reconciler.options import Options
from ..reconciler.passes import run_cleanup, run_once
from ..reconciler.preview import preview
from ..reconciler.service import Service
from .argtypes import number

if TYPE_CHECKING:
    from kubernetes import client

SA_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
FALLBACK_NAMESPACE = "poolguard"
EXIT_OK, EXIT_FAILED = 0, 1
log = logging.getLogger("poolguard.reconciler")


class ReconcileError(InputError):
    """Unusable flags or an unreachable API server: one `error:` line, exit code 2."""


def default_namespace(path: str = SA_NAMESPACE_FILE) -> str:
    """The pod's own namespace ($POD_NAMESPACE, else its service account mount), else
    `poolguard`."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        return Path(path).read_text(encoding="utf-8").strip() or FALLBACK_NAMESPACE
    except OSError:
        return FALLBACK_NAMESPACE


def unique_identity() -> str:
    """$POD_NAME (else the hostname) plus a random suffix, as kube-controller-manager does:
    a `kubectl exec` into the leader's pod must not share its identity."""
    base = os.environ.get("POD_NAME") or socket.gethostname()
    return f"{base}_{uuid.uuid4()}"


def _percent(text: str) -> int:
    if not text.isdigit() or int(text) > 100:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole percentage from 0 to 100")
    return int(text)


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number (0 disables)")
    return int(text)


def add_reconcile_parser(commands: argparse._SubParsersAction) -> None:
    """Register the `reconcile` subcommand."""
    parser = commands.add_parser(
        "reconcile",
        help="set the deletion cost on existing pods (repairs what the webhooks missed)",
        description="Watch pods, nodes and namespaces and set the pod-deletion-cost of every "
        "scheduled pod the policy governs to its pool's cost, keeping values people set. "
        "Leader-elected through a Lease; only the leader writes. Exit codes: 0 done, 1 a "
        "write failed or another reconciler holds the lease, 2 unusable input or an "
        "unreachable API server.",
    )
    parser.add_argument("--policy", metavar="FILE",
                        help="policy YAML (required against a cluster, except with --cleanup; "
                        "with --state, as plan: default the built-in policy)")
    parser.add_argument("--state", metavar="FILE",
                        help="read pods, nodes and namespaces from a state file instead of a "
                        "cluster (with --dry-run: preview the costs, write nothing)")
    parser.add_argument("--output", "-o", choices=("text", "json"), default="text",
                        help="with --state: json prints {\"pods\": [{namespace, name, node, "
                        "pool, deletionCost, desiredCost}]} for every governed scheduled pod "
                        "(default text: one line per pod it would change)")
    add_cluster_arguments(parser)
    _add_mode_arguments(parser)
    _add_lease_arguments(parser)
    _add_rebalance_arguments(parser)
    parser.set_defaults(run=run_reconcile)


def _add_mode_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true",
                        help="one pass over every pod, print a summary, exit")
    parser.add_argument("--dry-run", action="store_true",
                        help="print one line per pod it would change and write nothing "
                        "(takes no lease)")
    parser.add_argument("--cleanup", action="store_true",
                        help="remove the annotations poolguard owns from every pod, then exit "
                        "(for uninstall)")
    parser.add_argument("--qps", type=number(float, 0, above=True), default=5.0, metavar="N",
                        help="pod writes per second (token bucket; default 5)")
    parser.add_argument("--burst", type=number(int, 0, above=True), default=10, metavar="N",
                        help="writes allowed in a burst (default 10)")
    parser.add_argument("--resync-seconds", type=number(float, 0, above=True), default=600.0,
                        metavar="SECONDS",
                        help="re-check every cached pod this often (default 600)")
    parser.add_argument("--exclude-namespace", action="append", metavar="NS",
                        help="never touch pods in NS; repeatable (default: kube-system and "
                        "the lease namespace)")
    parser.add_argument("--max-rewrite-percent", type=_percent, default=20, metavar="N",
                        help="in one full pass, rewrite at most N%% of the deletion costs "
                        "poolguard manages (and at least one); above it every rewrite is held "
                        "until the policy is fixed or the rewrites confirmed (default 20)")
    parser.add_argument("--accept-rewrites", metavar="GENERATION",
                        help="confirm rewrites above --max-rewrite-percent for the policy file "
                        "of this generation (the first 12 hex digits of its sha256, as the "
                        "held message names it)")
    parser.add_argument("--policy-configmap", metavar="NAMESPACE/NAME",
                        help="the ConfigMap --policy is mounted from: held rewrites and "
                        "refused policy changes are posted there as Warning Events")
    parser.add_argument("--no-events", action="store_true",
                        help="do not emit a Kubernetes Event for each re-costed pod")
    parser.add_argument("--metrics-port", type=_port, default=9090, metavar="PORT",
                        help="plain-HTTP port for /metrics and /healthz; 0 disables (default "
                        "9090; not served with --once or --cleanup)")
    parser.add_argument("--log-level", choices=("debug", "info", "warning", "error"),
                        default="info", help="log level on stderr (default info)")


def _add_lease_arguments(parser: argparse.ArgumentParser) -> None:
    lease = parser.add_argument_group("leader election")
    lease.add_argument("--lease-name", default="poolguard-reconciler", metavar="NAME",
                       help="coordination.k8s.io/v1 Lease name (default poolguard-reconciler)")
    lease.add_argument("--lease-namespace", metavar="NS",
                       help="the Lease's namespace (default: $POD_NAMESPACE, else this pod's "
                       "service account namespace, else poolguard)")
    lease.add_argument("--identity", metavar="NAME",
                       help="this candidate's holderIdentity (default: $POD_NAME, else the "
                       "hostname, plus a random suffix)")
    lease.add_argument("--lease-duration", type=number(int, 0, above=True), default=15,
                       metavar="SECONDS",
                       help="how long a silent holder keeps the lease (default 15)")
    lease.add_argument("--renew-deadline", type=number(float, 0, above=True), default=10.0,
                       metavar="SECONDS",
                       help="the leader stops writing if it could not renew for this long "
                       "(default 10)")
    lease.add_argument("--retry-period", type=number(float, 0, above=True), default=2.0,
                       metavar="SECONDS",
                       help="time between lease renewals and acquire attempts (default 2)")


def _add_rebalance_arguments(parser: argparse.ArgumentParser) -> None:
    rebalance = parser.add_argument_group(
        "rebalance (only while the policy's rebalance.enabled is true; needs the rebalance "
        "RBAC: the chart's rebalance.enabled, the rebalance overlay)")
    rebalance.add_argument("--rebalance-interval", type=number(float, 0, above=True),
                           default=30.0, metavar="SECONDS",
                           help="read the cluster and step the rebalance plan this often "
                           "(default 30)")
    rebalance.add_argument("--rebalance-moves-per-minute", type=number(float, 0, above=True),
                           default=6.0, metavar="N",
                           help="evictions a minute, cluster-wide (default 6)")


def options_from(args: argparse.Namespace) -> Options:
    """Options from parsed flags, with the defaults that depend on the environment."""
    if not args.retry_period < args.renew_deadline < args.lease_duration:
        raise ReconcileError("need --retry-period < --renew-deadline < --lease-duration, got "
                             f"{args.retry_period}, {args.renew_deadline}, "
                             f"{args.lease_duration}")
    namespace = args.lease_namespace or default_namespace()
    excluded = args.exclude_namespace or ["kube-system", namespace]
    if args.policy_configmap is not None:
        try:
            configmap_ref(args.policy_configmap)
        except ValueError as err:
            raise ReconcileError(f"--policy-configmap {err}") from None
    return Options(dry_run=args.dry_run, qps=args.qps, burst=args.burst,
                   resync_seconds=args.resync_seconds, events=not args.no_events,
                   exclude_namespaces=tuple(excluded),
                   identity=args.identity or unique_identity(),
                   lease_namespace=namespace, lease_name=args.lease_name,
                   lease_duration=args.lease_duration, renew_deadline=args.renew_deadline,
                   retry_period=args.retry_period,
                   rebalance_interval=args.rebalance_interval,
                   rebalance_moves_per_minute=args.rebalance_moves_per_minute,
                   max_rewrite_share=args.max_rewrite_percent / 100,
                   accept_rewrites=args.accept_rewrites,
                   policy_configmap=args.policy_configmap)


def run_reconcile(args: argparse.Namespace) -> int:
    """The `reconcile` command."""
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.cleanup and args.once:
        raise ReconcileError("--cleanup is a one-shot pass already; leave out --once")
    if args.policy is None and not args.cleanup and args.state is None:
        raise ReconcileError("--policy FILE is required (the policy the webhooks use)")
    options = options_from(args)
    policy = None if args.cleanup else load_policy(args.policy)
    if args.state is not None or args.output != "text":
        return _preview(args, policy, options)
    try:
        api = api_client_from(args.kubeconfig, args.context)
    except KubeConfigError as err:
        raise ReconcileError(str(err)) from None
    api.user_agent = f"{api.user_agent} reconciler/{options.identity}"
    stop = _stop_on_signals()
    try:
        return _run(api, policy, options, args, stop)
    except LeaseHeldError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILED
    except ApiError as err:
        raise ReconcileError(f"the API server at {server_of(api)} refused: {err}") from None
    except (urllib3.exceptions.HTTPError, OSError) as err:
        raise ReconcileError(f"cannot reach the API server at {server_of(api)}: "
                             f"{describe_error(err)}") from None
    finally:
        api.close()


def _run(api: client.ApiClient, policy: Policy | None, options: Options,
         args: argparse.Namespace, stop: threading.Event) -> int:
    if args.cleanup:
        summary = run_cleanup(api, options, stop=stop)
        print(f"cleanup: {summary.cleanup_line(options.dry_run)}")
    elif args.once:
        assert policy is not None
        summary = run_once(api, policy, options, stop=stop,
                           generation=policy_generation(args.policy),
                           held=lambda reason: print(f"error: rewrites held: {reason}",
                                                     file=sys.stderr))
        print(f"reconcile: {summary.line(options.dry_run)}")
        if summary.skipped[REWRITES_HELD]:
            return EXIT_FAILED
    else:
        return _serve(api, PolicyHolder(args.policy), options, args.metrics_port, stop)
    # A pass cut short (leadership lost, SIGTERM) has not done its job: say so.
    incomplete = summary.skipped["not-leader"] + summary.skipped["stopping"]
    if incomplete:
        print(f"error: the pass stopped early: {incomplete} pods were not reconciled "
              "(lost the lease or asked to stop)", file=sys.stderr)
    return EXIT_FAILED if summary.outcomes[FAILED] or incomplete else EXIT_OK


def _serve(api: client.ApiClient, policy_file: PolicyHolder, options: Options,
           metrics_port: int, stop: threading.Event) -> int:
    service = Service(api, policy_file.policy, options, policy_file=policy_file)
    try:
        http = serve_http(metrics_port, service.metrics, service.health) if metrics_port else None
    except OSError as err:  # not an API problem: say which port
        raise ReconcileError(f"--metrics-port {metrics_port}: cannot listen: "
                             f"{err.strerror or err}") from None
    log.info("reconciler %s: lease %s/%s, %.3g writes/s (burst %d), resync every %.0fs%s",
             options.identity, options.lease_namespace, options.lease_name, options.qps,
             options.burst, options.resync_seconds, ", dry run" if options.dry_run else "")
    try:
        service.run(stop)
    finally:
        if http is not None:
            http.shutdown()
            http.server_close()
    return EXIT_OK


def _preview(args: argparse.Namespace, policy: Policy | None, options: Options) -> int:
    """`--state FILE --dry-run`: the reconciler's decisions on a state file, no cluster."""
    if args.state is None:
        raise ReconcileError("--output json previews a state file: give --state FILE")
    if not args.dry_run or args.cleanup or args.once:
        raise ReconcileError("--state FILE previews without a cluster: use it with --dry-run "
                             "only (no --once or --cleanup)")
    assert policy is not None
    view = load_state(args.state)  # StateError: one error line, exit code 2
    print_state_notes(view)
    for finding in pool_coverage(policy, view.nodes()).disarming:
        print(f"warning: {args.policy or 'the built-in policy'}: {finding.message}",
              file=sys.stderr)
    if args.output == "json":
        print(json.dumps(preview(view, policy, options.exclude_namespaces), indent=2))
        return EXIT_OK
    entries = preview(view, policy, options.exclude_namespaces)["pods"]
    changed = [entry for entry in entries if entry["desiredCost"] != entry["deletionCost"]]
    for entry in changed:
        current = "(none)" if entry["deletionCost"] is None else entry["deletionCost"]
        print(f"would patch {entry['namespace']}/{entry['name']}: deletion cost {current} "
              f"-> {entry['desiredCost']} (node {entry['node']}, pool "
              f"{entry['pool'] or '(none)'})")
    # Always a summary, so that nothing to change reads as that, not as nothing done.
    policy_named = args.policy or "the built-in policy"
    print(f"reconcile (dry run, {args.state}, {policy_named}): {len(entries)} governed "
          f"scheduled pods: would patch {len(changed)}, unchanged "
          f"{len(entries) - len(changed)}")
    return EXIT_OK


def _stop_on_signals() -> threading.Event:
    """An Event set by SIGTERM or SIGINT (the pod is stopping): passes end, lease released."""
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: stop.set())
    return stop
