"""`plan --all-workloads`: a plan for every workload a person scales, one line each."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.kinds.registry import SIZED_KINDS
from ..core.objects.kube import controller_ref, name_of, namespace_of, replicas_of
from ..core.policy.policy import Policy
from ..core.policy.pool_coverage import PoolCoverage
from ..core.view.snapshot import Snapshot
from .plan_document import not_checked, plan_workload
from .plan_lookup import PlanError


def audit_workloads(view: Snapshot, policy: Policy, delta: int | None, replicas: int | None,
                    now_ns: int | None, as_user: str | None = None,
                    coverage: PoolCoverage | None = None) -> list[dict[str, Any]]:
    """A plan for every workload a person scales: every kind of the registry.

    The children an owner sizes (a Deployment's or Rollout's ReplicaSets, a
    LeaderWorkerSet's StatefulSets: `_sized_by_planned_owner`) are left out: their owner
    is planned instead. A workload already at 0 has no scale-down to check and is left
    out too.
    """
    documents = []
    for workload in sorted(view.workloads(), key=lambda w: (namespace_of(w), w.get("kind") or "",
                                                            name_of(w))):
        if _sized_by_planned_owner(workload):
            continue
        current = replicas_of(workload)
        target = replicas if replicas is not None else current + (delta or 0)
        if current == 0 or target >= current:
            continue
        if target < 0:  # planned as 0 it would answer another question, unseen
            ref = f"{workload['kind']}/{namespace_of(workload)}/{name_of(workload)}"
            raise PlanError(f"--replicas-delta {delta}: {ref} has {current} replicas, so the "
                            f"target would be {target}; use a delta of -{current} or more, "
                            "or --replicas 0")
        documents.append(plan_workload(view, policy, workload, target, now_ns, as_user,
                                       coverage))
    return documents


def _sized_by_planned_owner(workload: Mapping[str, Any]) -> bool:
    """A child of a kind some workload kind sizes (the registry's `sizes`: ReplicaSets,
    StatefulSets) with a controller owner: a Deployment's or Rollout's ReplicaSet, a
    LeaderWorkerSet's leader StatefulSet or a group's worker StatefulSet (owned by the
    group's leader pod), an operator's. Its owner is planned, or judged, instead."""
    return workload.get("kind") in SIZED_KINDS and controller_ref(workload) is not None


def render_audit(documents: list[Mapping[str, Any]], source: str,
                 requester_clamps: bool = False) -> str:
    """One line per workload: its scale-down and the verdict, those not checked first,
    then the worst.

    `requester_clamps`: the plans are for an autoscaler whose scale-downs the webhook
    clamps (`--as`), so the count of workloads held above their target is told.
    """
    if not documents:
        return f"No workload in {source} has a scale-down to check."
    # A verdict not given first: whatever it hides may be worse than a denial.
    order = {"NOT CHECKED": 0, "DENIED": 1, "CLAMPED": 2, "VIOLATES": 3, "ALLOWED": 4}
    rows = sorted((_audit_row(doc) for doc in documents), key=lambda r: order[r[2]])
    table = [("WORKLOAD", "REPLICAS", "VERDICT", "DETAIL"), *rows]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < 3 else cell
                       for i, cell in enumerate(row)).rstrip() for row in table]
    counts = {word: sum(1 for r in rows if r[2] == word) for word in order}
    lines.append("")
    clamped = f"{counts['CLAMPED']} clamped, " if requester_clamps else ""
    lines.append(f"{len(rows)} workloads: {counts['DENIED']} denied, {clamped}"
                 f"{counts['VIOLATES']} "
                 f"allowed despite violations, {counts['ALLOWED']} allowed, "
                 f"{counts['NOT CHECKED']} not checked.")
    requester = documents[0].get("requester")
    if requester_clamps:
        lines.append(f"As {requester}: {counts['CLAMPED']} held above their target "
                     "(CLAMPED: the webhook lowers the scale-down to the safe count).")
    return "\n".join(lines)


def _audit_row(document: Mapping[str, Any]) -> tuple[str, str, str, str]:
    workload, replicas = document["workload"], document["replicas"]
    name = f"{workload['kind']} {workload['namespace']}/{workload['name']}"
    sizes = f"{replicas['from']} -> {replicas['to']}"
    rules = ", ".join(v["rule"] for v in document["violations"])
    if document.get("clampedTo") is not None:
        return (name, sizes, "CLAMPED", f"held at {document['clampedTo']} replicas, above "
                f"the target {replicas['to']} ({rules})")
    # The requester's answer (exempt, sized by an owner) stands whatever the state lacks.
    if document.get("requesterNote"):
        return name, sizes, "ALLOWED", document["requesterNote"]
    if not_checked(document):
        return name, sizes, "NOT CHECKED", document["notCheckedBecause"]
    if not document["checked"]:  # not governed: the webhook allows it unchecked
        return name, sizes, "ALLOWED", f"not checked: {document['notCheckedBecause']}"
    if not rules:
        return name, sizes, "ALLOWED", ""
    safe = document["safeReplicas"]
    detail = f"{rules}; safe down to {safe} replicas"
    if document["allowed"]:
        return name, sizes, "VIOLATES", f"{detail} (enforcement: {document['enforcement']})"
    return name, sizes, "DENIED", detail
