"""The `plan` command: preview a scale-down as JSON for scripts or a table for people."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.assessment import Assessment, assess_scale
from ..core.cluster import ClusterView, canonical_kind
from ..core.policy import Policy
from ..core.ranking import RankedPod, deciding_rule
from ..core.verdict import placement
from ..errors import InputError


class PlanError(InputError):
    """Unusable `plan` input; the message says what and where."""


def parse_workload_ref(text: str) -> tuple[str, str, str]:
    """KIND/NAMESPACE/NAME with any accepted spelling of the kind."""
    parts = text.split("/")
    if len(parts) != 3 or not all(parts):
        raise PlanError(f"--workload {text!r}: expected KIND/NAMESPACE/NAME, "
                        "for example deployment/ml/llm-serve")
    kind = canonical_kind(parts[0])
    if kind is None:
        raise PlanError(f"--workload {text!r}: unknown kind {parts[0]!r} (use deployment, "
                        "replicaset or statefulset, or deploy, rs, sts)")
    return kind, parts[1], parts[2]


def build_plan(view: ClusterView, policy: Policy, workload_ref: str, replicas: int,
               now_ns: int | None) -> dict[str, Any]:
    """The plan document (the stable JSON interface) for scaling a workload."""
    if replicas < 0:
        raise PlanError(f"--replicas {replicas}: must be 0 or more")
    kind, namespace, name = parse_workload_ref(workload_ref)
    workload = view.workload(kind, namespace, name)
    if workload is None:
        raise PlanError(f"{kind} {namespace}/{name}: not found in the cluster state")
    return plan_document(view, policy, assess_scale(view, policy, workload, replicas, now_ns),
                         now_ns)


def plan_document(view: ClusterView, policy: Policy, assessment: Assessment,
                  now_ns: int | None) -> dict[str, Any]:
    prediction, verdict = assessment.prediction, assessment.verdict
    with_rs = prediction.kind in ("Deployment", "ReplicaSet")
    first_survivor = {}
    for pod in prediction.survivors:
        first_survivor.setdefault(pod.replica_set, pod)

    def victim_entry(pod: RankedPod) -> dict[str, Any]:
        place = placement(policy, view.node, pod)
        entry: dict[str, Any] = {
            "namespace": pod.namespace, "name": pod.name, "node": pod.node_name or None,
            "pool": place.pool, "protected": place.protected, "deletionCost": pod.deletion_cost,
        }
        if with_rs:
            entry["replicaSet"] = pod.replica_set
        if prediction.kind == "StatefulSet":
            entry["reason"] = "ordinal outside the new range"
        elif pod.replica_set in first_survivor:
            entry["reason"] = deciding_rule(pod, first_survivor[pod.replica_set])
        else:
            entry["reason"] = "every pod of its ReplicaSet goes"
        return entry

    document: dict[str, Any] = {
        "workload": {"kind": prediction.kind, "namespace": prediction.namespace,
                     "name": prediction.name},
        "replicas": {"from": prediction.from_replicas, "to": prediction.to_replicas},
        "victims": [victim_entry(p) for p in prediction.victims],
        "possibleVictims": [p.name for p in prediction.possible_victims],
        "allowed": verdict.allowed,
        "enforcement": verdict.enforcement,
        "violations": [{"rule": v.rule, "message": v.message} for v in verdict.violations],
        "warnings": verdict.warnings,
        "safeReplicas": verdict.safe_replicas,
    }
    if prediction.order is not None:
        document["order"] = [p.name for p in prediction.order]
    if prediction.replica_set_targets:
        document["replicaSets"] = {
            name: {"from": before, "to": after}
            for name, (before, after) in prediction.replica_set_targets.items()
        }
    return document


def render_text(document: Mapping[str, Any]) -> str:
    """A table a person reads at a glance."""
    workload, replicas = document["workload"], document["replicas"]
    lines = [f"{workload['kind']} {workload['namespace']}/{workload['name']}: "
             f"{replicas['from']} -> {replicas['to']} replicas"]
    for name, sizes in (document.get("replicaSets") or {}).items():
        if sizes["from"] != sizes["to"]:
            lines.append(f"  ReplicaSet {name}: {sizes['from']} -> {sizes['to']}")
    victims = document["victims"]
    if not victims:
        lines.append("No pod is deleted.")
    else:
        rows = [("VICTIM", "NODE", "POOL", "COST", "WHY")] + [
            (v["name"], v["node"] or "<none>", (v["pool"] or "<none>")
             + (" (protected)" if v["protected"] else ""), str(v["deletionCost"]), v["reason"])
            for v in victims
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(4)]
        lines.append("")
        lines.extend("  ".join(cell.ljust(widths[i]) if i < 4 else cell
                               for i, cell in enumerate(row)).rstrip() for row in rows)
    if document["possibleVictims"]:
        lines.append("")
        lines.append("Might be deleted instead (tied with a victim until the controller's own "
                     "order decides): " + ", ".join(document["possibleVictims"]))
    lines.append("")
    lines.append("Verdict: " + _verdict_word(document))
    lines.extend(f"  [{v['rule']}] {v['message']}" for v in document["violations"])
    lines.extend(f"  warning: {w}" for w in document["warnings"])
    return "\n".join(lines)


def _verdict_word(document: Mapping[str, Any]) -> str:
    if not document["violations"]:
        return "ALLOWED"
    if not document["allowed"]:
        return "DENIED (enforcement: enforce)"
    return f"ALLOWED despite violations (enforcement: {document['enforcement']})"
