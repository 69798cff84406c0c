"""The plan document as a table a person reads at a glance (`--output text`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..core.kinds.registry import BY_KIND
from ..core.kinds.workload_kind import WorkloadKind
from .plan_document import not_checked, requester_judged
from .plan_frees import frees_lines


def render_text(document: Mapping[str, Any]) -> str:
    """A table a person reads at a glance."""
    workload, replicas = document["workload"], document["replicas"]
    lines = [f"{workload['kind']} {workload['namespace']}/{workload['name']}: "
             f"{replicas['from']} -> {replicas['to']} replicas"]
    kind = BY_KIND[workload["kind"]]
    for name, sizes in (document.get(kind.children_key or "") or {}).items():
        if sizes["from"] != sizes["to"]:
            lines.append(f"  {kind.sizes[0]} {name}: {sizes['from']} -> {sizes['to']}")
    lines.extend(_unit_lines(kind, document.get(kind.units_key or "")))
    victims = document["victims"]
    if not victims and not document["blocked"] and not_checked(document):
        # A state that lacks pods or their owner shows none deleted: say that is unknown.
        lines.append("Victims unknown: the state lacks what the prediction needs (below).")
    elif not victims and not document["blocked"]:
        lines.append("No pod is deleted.")
    elif not victims:
        lines.append("No pod is deleted before the controller waits.")
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
        lines.extend(frees_lines(document))
    if document["blocked"]:
        lines.append("")
        lines.append("Blocked (deleted only once the controller stops waiting): " + "; ".join(
            f"{b['name']} (the controller waits here)" if b["name"] == b["waitingOn"]
            else f"{b['name']} waits on {b['waitingOn']}" for b in document["blocked"]))
        lines.append(f"  because {document['blocked'][0]['reason']}")
    if document["possibleVictims"]:
        lines.append("")
        why = ("depending on how far the rolling update under way gets (it recreates "
               f"outdated {kind.unit}s)" if kind.units_key in document else
               "instead, depending on orders the controllers choose (ties, ReplicaSet syncs)")
        lines.append(f"Might be deleted {why}: " + ", ".join(document["possibleVictims"]))
    lines.append("")
    lines.append("Verdict: " + _verdict_word(document))
    if document.get("requesterNote"):
        lines.append(f"  as {document['requester']}: {document['requesterNote']}")
    elif document.get("requester") is not None:
        lines.append(f"  as {document['requester']}: {requester_judged(document)}")
    for v in document["violations"]:
        lines.append(f"  [{v['rule']}] {v['message']}")
        if v.get("worstCase"):
            lines.append(f"    judged on the worst case of what may happen: {v['worstCase']}")
    lines.extend(f"  warning: {w}" for w in document["warnings"])
    if document["exemptUsers"] and document.get("requester") is None:
        lines.append("  unknown to plan: who scales; the webhook does not check requests by "
                     "scaleDown.exemptUsers (" + ", ".join(document["exemptUsers"]) + ")")
    return "\n".join(lines)


def _unit_lines(kind: WorkloadKind, units: list[Mapping[str, Any]] | None) -> list[str]:
    """The units of a replica (a LeaderWorkerSet's groups), highest index first: what a
    scale-down removes whole."""
    if not units:
        return []
    head, rest = kind.unit_parts
    rows = [(kind.unit.upper(), "FATE", head.upper(), rest.upper(), "POOLS")] + [
        (str(u["index"]), u["fate"], u[head] or "<none>", str(len(u[rest])),
         ", ".join((pool or "<none>") for pool in u["pools"])
         + (" (protected)" if u["protected"] else ""))
        for u in units
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return ["", f"{kind.unit.capitalize()}s (whole {kind.unit}s go, highest index first):"] + [
        "  " + "  ".join(cell.ljust(widths[i]) if i < 4 else cell
                         for i, cell in enumerate(row)).rstrip() for row in rows]


def _verdict_word(document: Mapping[str, Any]) -> str:
    if document.get("clampedTo") is not None:
        return f"CLAMPED to {document['clampedTo']}"
    if document.get("requesterNote"):
        return "ALLOWED"
    if not document["checked"]:
        word = "NOT CHECKED (" if not_checked(document) else "ALLOWED (not checked: "
        return word + document["notCheckedBecause"] + ")"
    if not document["violations"]:
        return "ALLOWED"
    if not document["allowed"]:
        return "DENIED (enforcement: enforce)"
    return f"ALLOWED despite violations (enforcement: {document['enforcement']})"

