"""`python -m webhook policy check FILE`: validate a policy and explain it, for CI.

Exit code 0 when the file is a valid policy (the explanation is printed), 2 when it is not
(one `error:` line naming the file and the field, from the same parser the server uses).
With `--state FILE` or a live cluster (`--kubeconfig`, `--context`), the policy is also
checked against the nodes: each pool's nodes, and what names nothing; exit code 3 when no
node carries `poolLabel` or a protected pool has no node (poolguard would protect nothing
there).

`python -m webhook policy admission-policy [FILE]`: print the MutatingAdmissionPolicy, its
binding and its params (the pool-to-cost table) for the policy, as YAML for kubectl apply.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from ..cluster.kubeclient import add_cluster_arguments
from ..cluster.state import load_policy, load_state
from ..core.cost.admission_policy import admission_policy_objects
from ..core.policy.policy import default_policy
from ..core.policy.policy_schema import policy_schema
from ..core.policy.policy_text import explain_policy
from ..core.policy.pool_coverage import coverage_lines, pool_coverage
from ..errors import CommandError

EXIT_DISARMED = 3  # valid, but the nodes leave a protected pool (or every pool) empty


def add_policy_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "policy", help="check a policy file and explain it",
        description="Work with policy files (the ConfigMap poolguard-policy's policy.yaml).")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    check = actions.add_parser(
        "check", help="validate a policy file and explain it in plain words",
        description="Validate a policy file with the parser the webhook and the reconciler "
        "use, then explain it: pools and their deletion costs, which namespaces and pods are "
        "governed, the scale-down rules and what the enforcement mode does. Exit code 0 "
        "when valid, 2 with one error: line naming the field when not. With --state FILE, "
        "--kubeconfig or --context, it is also checked against the cluster's nodes: the "
        "nodes each pool matches, a pool label no node carries (and the labels whose values "
        "name pools), pools without nodes, label values that name no pool; exit code "
        f"{EXIT_DISARMED} when no node carries poolLabel or a protected pool has no node. "
        "Use it in CI before a ConfigMap change is applied.")
    check.add_argument("file", metavar="FILE", help="the policy YAML file")
    check.add_argument("--quiet", "-q", action="store_true",
                       help="print only the problems found")
    check.add_argument("--state", metavar="FILE",
                       help="check the policy against the nodes of this cluster state file")
    add_cluster_arguments(check)
    check.set_defaults(run=run_policy_check)
    generate = actions.add_parser(
        "admission-policy", help="print the MutatingAdmissionPolicy for a policy file",
        description="Print, as YAML for kubectl apply, the MutatingAdmissionPolicy, its "
        "binding and its params ConfigMap (the pool-to-cost table) that set the deletion "
        "cost inside the API server for pods whose pool is known at creation (nodeSelector "
        "or required node affinity on the pool label), with no webhook. Without FILE: the "
        "built-in policy.")
    generate.add_argument("file", metavar="FILE", nargs="?", help="the policy YAML file")
    generate.add_argument("--namespace", "-n", default="poolguard",
                          help="poolguard's namespace (holds the params; never mutated)")
    generate.set_defaults(run=run_admission_policy)
    schema = actions.add_parser(
        "schema", help="print the policy file's JSON Schema",
        description="Print the JSON Schema (draft 7) of a policy file, generated from the "
        "policy model that check, serve and the reconciler parse with: field names, types, "
        "enums, ranges and patterns. The Helm chart's values.schema.json carries it under "
        "`policy`; --values-schema FILE writes it there.")
    schema.add_argument("--values-schema", metavar="FILE",
                        help="replace properties.policy of the Helm values schema FILE "
                        "instead of printing")
    schema.set_defaults(run=run_policy_schema)


def run_policy_check(args: argparse.Namespace) -> int:
    policy = load_policy(args.file)  # PolicyError: the caller prints it, exit code 2
    live = args.kubeconfig is not None or args.context is not None
    if args.state is not None and live:
        raise CommandError("--state checks against a saved cluster state: leave out "
                           "--kubeconfig and --context")
    if not args.quiet:
        print(f"{args.file}: a valid poolguard policy.\n")
        print("\n".join(explain_policy(policy)))
    if args.state is None and not live:
        return 0
    nodes, source = _nodes(args)
    coverage = pool_coverage(policy, nodes)
    if not args.quiet:
        print(f"\nNodes of {source} by pool ({policy.pool_label}):")
        print("\n".join(coverage_lines(coverage)))
    for finding in coverage.findings:
        word = "error" if finding.disarms else "warning"
        print(f"{word}: {args.file}: {finding.message}", file=sys.stderr)
    return EXIT_DISARMED if coverage.disarmed else 0


def _nodes(args: argparse.Namespace) -> tuple[list[dict], str]:
    """The nodes to check against, and where they come from in words."""
    if args.state is not None:
        return [dict(node) for node in load_state(args.state).nodes()], args.state
    from ..core.view.resource import NODES
    from .plan import read_live_state  # the kubernetes client only for a live check

    snapshot = read_live_state(args.kubeconfig, args.context, resources=(NODES,))
    return [dict(node) for node in snapshot.nodes()], "the cluster"


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (the CEL expressions) as literal blocks, as a person writes them."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_BlockDumper.add_representer(str, _represent_str)


def admission_policy_yaml(objects: list[dict]) -> str:
    """The objects as one multi-document YAML text, in the order given."""
    return "---\n".join(yaml.dump(obj, Dumper=_BlockDumper, sort_keys=False, width=100)
                         for obj in objects)


def run_admission_policy(args: argparse.Namespace) -> int:
    policy = load_policy(args.file) if args.file else default_policy()
    print(admission_policy_yaml(admission_policy_objects(policy, args.namespace)), end="")
    return 0


def chart_policy_schema() -> dict:
    """The policy schema as the chart's values.schema.json holds it under `policy`."""
    schema = policy_schema()
    del schema["$schema"], schema["title"]
    return schema


def run_policy_schema(args: argparse.Namespace) -> int:
    if args.values_schema is None:
        print(json.dumps(policy_schema(), indent=2))
        return 0
    path = Path(args.values_schema)
    try:
        values_schema = json.loads(path.read_text(encoding="utf-8"))
        values_schema["properties"]["policy"] = chart_policy_schema()
        path.write_text(json.dumps(values_schema, indent=2) + "\n", encoding="utf-8")
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise CommandError(f"--values-schema {path}: cannot update it: {err}") from None
    return 0
