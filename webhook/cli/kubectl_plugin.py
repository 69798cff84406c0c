"""`kubectl poolguard ...`: poolguard as a kubectl plugin (the `kubectl-poolguard` script).

kubectl runs any `kubectl-NAME` executable on the PATH as `kubectl NAME`. This one speaks
kubectl's conventions and hands the work to the `python -m webhook` commands:

    kubectl poolguard plan deploy/NAME --replicas 3 [-n NS] [--context C] [--kubeconfig F]
    kubectl poolguard plan deploy/A sts/B lws/C ro/D --replicas-delta -1
    kubectl poolguard plan deploy A B --replicas 2
    kubectl poolguard policy check FILE

`plan` reads the live cluster: the namespace is `-n`, else the kubeconfig context's
namespace, else `default` (in a Pod: the Pod's own namespace), as kubectl resolves it;
the workloads are kubectl's `TYPE/NAME ...` (or `TYPE NAME ...`); the policy is
`--policy FILE`, else the one poolguard runs with (the ConfigMap `poolguard-policy` in
`--poolguard-namespace`), else the built-in one, with a note. Every other `plan` flag is
passed through.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from kubernetes.config import ConfigException, kube_config

from ..cluster.kubeclient import api_client_from, describe_error, request_json
from ..cluster.state import parse_policy_text
from ..core.kinds.registry import KIND_NAMES, KIND_SHORT_NAMES
from ..core.kinds.registry import KINDS as REGISTRY
from ..core.policy.policy_field import PolicyError
from ..errors import ApiError, InputError, NotFoundError
from .argtypes import OneLineErrors, add_version_flags

EXIT_USAGE = 2
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
POLICY_CONFIGMAP = "poolguard-policy"
# kubectl's names for the kinds `plan` knows, mapped to plan's own short names.
KINDS = {alias: kind.short_names[0] for kind in REGISTRY for alias in kind.aliases}


class PluginError(InputError):
    """Printed as one `error:` line; exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(
        prog="kubectl poolguard",
        description="poolguard as a kubectl plugin: predict a scale-down's victims and the "
        "policy's verdict on the live cluster, or check a policy file.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    plan = commands.add_parser(
        "plan", help="predict the pods a scale-down deletes and the policy's verdict",
        description="Run `python -m webhook plan` against the live cluster, with kubectl's "
        "conventions. Flags not listed here go to plan as they are (see `python -m webhook "
        "plan --help`); exit codes are plan's.")
    plan.add_argument("workload", nargs="+", metavar="TYPE/NAME",
                      help=", ".join(f"{k.short_names[0]}/NAME" for k in REGISTRY[:-1])
                      + f" or {REGISTRY[-1].short_names[0]}/NAME, one or more (or TYPE NAME "
                      "[NAME...], as kubectl takes)")
    plan.add_argument("-n", "--namespace", metavar="NS",
                      help="the workload's namespace (default: the context's, else default)")
    plan.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    plan.add_argument("--kubeconfig", metavar="FILE",
                      help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    count = plan.add_mutually_exclusive_group(required=True)
    count.add_argument("--replicas", metavar="N", help="the target replica count")
    count.add_argument("--replicas-delta", metavar="D",
                       help="the target relative to each workload's current count, e.g. -1")
    plan.add_argument("--policy", metavar="FILE",
                      help="policy YAML (default: the ConfigMap poolguard-policy poolguard "
                      "runs with, else the built-in policy)")
    plan.add_argument("-o", "--output", metavar="FORMAT", help="plan's --output")
    plan.add_argument("--poolguard-namespace", default="poolguard", metavar="NS",
                      help="where poolguard is installed, for its policy (default: poolguard)")
    policy = commands.add_parser("policy", help="check a policy file and explain it",
                                 description="`python -m webhook policy ...`, as it is.",
                                 add_help=False)
    policy.add_argument("rest", nargs=argparse.REMAINDER)
    add_version_flags(parser, commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `kubectl-poolguard`."""
    from .main import main as webhook_main

    args, extra = build_parser().parse_known_args(argv)
    if args.command == "policy":
        return webhook_main(["policy", *extra, *args.rest])
    try:
        with tempfile.TemporaryDirectory(prefix="kubectl-poolguard-") as scratch:
            return webhook_main(plan_argv(args, extra, Path(scratch)))
    except InputError as err:  # PluginError, KubeConfigError: one `error:` line
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


def plan_argv(args: argparse.Namespace, extra: list[str], scratch: Path) -> list[str]:
    """The `python -m webhook plan` arguments for a `kubectl poolguard plan` command line."""
    workloads = workloads_of(args.workload)
    namespace = args.namespace or context_namespace(args.kubeconfig, args.context)
    argv = ["plan"]
    for kind, name in workloads:
        argv += ["--workload", f"{kind}/{namespace}/{name}"]
    if args.replicas is not None:
        argv += ["--replicas", args.replicas]
    else:
        argv += ["--replicas-delta", args.replicas_delta]
    for flag, value in (("--kubeconfig", args.kubeconfig), ("--context", args.context)):
        if value:
            argv += [flag, value]
    policy = args.policy or installed_policy(args, scratch)
    if policy:
        argv += ["--policy", policy]
    if args.output:
        argv += ["--output", args.output]
    return argv + extra


def workloads_of(words: Sequence[str]) -> list[tuple[str, str]]:
    """[(plan's kind, name)] from kubectl's `TYPE/NAME ...` or `TYPE NAME ...`."""
    if "/" in words[0]:
        if not all("/" in word for word in words):
            raise PluginError(f"workloads {' '.join(words)!r}: give each as TYPE/NAME, or "
                              "TYPE NAME [NAME...] (as kubectl takes them)")
        return [workload_of(*word.split("/", 1)) for word in words]
    if len(words) < 2:
        raise PluginError(f"workload {words[0]!r}: expected TYPE/NAME or TYPE NAME, "
                          "e.g. deploy/llm-serve")
    return [workload_of(words[0], name) for name in words[1:]]


def workload_of(kind: str, name: str) -> tuple[str, str]:
    """(plan's kind, name) from kubectl's TYPE and a NAME."""
    short = KINDS.get(kind.lower())
    if short is None or not name or "/" in name:
        raise PluginError(f"workload {f'{kind}/{name}'!r}: TYPE must be a {KIND_NAMES} "
                          f"({KIND_SHORT_NAMES}), followed by a name")
    return short, name


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace kubectl would use: the context's, else `default` (in a Pod: its own)."""
    path = kubeconfig or os.environ.get("KUBECONFIG") or str(
        Path(kube_config.KUBE_CONFIG_DEFAULT_LOCATION).expanduser())
    if not any(Path(p).expanduser().exists() for p in path.split(os.pathsep) if p):
        if kubeconfig or context:
            raise PluginError(f"kubeconfig {path}: no such file")
        if SERVICE_ACCOUNT_NAMESPACE.is_file():
            return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
        return "default"
    try:
        contexts, current = kube_config.list_kube_config_contexts(config_file=path)
    except ConfigException as err:
        raise PluginError(f"kubeconfig {path}: {err}") from None
    chosen = current if context is None else next(
        (c for c in contexts if c.get("name") == context), None)
    if chosen is None:
        raise PluginError(f"--context {context}: no such context in kubeconfig {path}")
    return (chosen.get("context") or {}).get("namespace") or "default"


def installed_policy(args: argparse.Namespace, scratch: Path) -> str | None:
    """The policy file poolguard runs with, copied from its ConfigMap; None if not installed."""
    where = f"{args.poolguard_namespace}/{POLICY_CONFIGMAP}"
    api = api_client_from(args.kubeconfig, args.context)  # KubeConfigError: exit code 2
    try:
        configmap = request_json(
            api, "GET", f"/api/v1/namespaces/{args.poolguard_namespace}/configmaps/"
            f"{POLICY_CONFIGMAP}")
    except NotFoundError:
        print(f"note: ConfigMap {where} not found (poolguard not installed there?): using "
              "the built-in policy; --policy FILE or --poolguard-namespace NS to choose",
              file=sys.stderr)
        return None
    except ApiError as err:
        raise PluginError(f"reading the policy ConfigMap {where}: {err} (pass "
                          "--policy FILE to use a file instead)") from None
    except Exception as err:  # connection errors: urllib3 raises several unrelated types
        raise PluginError(f"cannot reach the API server at {api.configuration.host}: "
                          f"{describe_error(err)}") from None
    finally:
        api.close()
    text = (configmap.get("data") or {}).get("policy.yaml")
    if text is None:
        raise PluginError(f"ConfigMap {where} has no key policy.yaml")
    try:  # checked here, so an error names the ConfigMap, not the scratch copy
        parse_policy_text(text, f"ConfigMap {where} (key policy.yaml)")
    except PolicyError as err:
        raise PluginError(f"{err} (fix the ConfigMap, or pass --policy FILE)") from None
    path = scratch / f"configmap-{args.poolguard_namespace}-{POLICY_CONFIGMAP}.yaml"
    path.write_text(text, encoding="utf-8")
    return str(path)
