"""The plan document: what `plan` reports about one scale-down, and its renderings.

`plan_document` builds the dict that `--output json` prints (victims, possible victims,
the verdict, every pod's fate); `render_text` turns it into the table for people, and
`audit_workloads` with `render_audit` do the same for `--all-workloads`. The command
itself (flags, reading the state, exit codes) is `webhook.cli.plan`.

Size: the JSON contract and the text and audit tables that read its fields, side by side.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ..core.leaderworkerset.leader_worker_set import SET_NAME_LABEL, LwsGroup
from ..core.objects.kube import controller_ref, labels_of, name_of, namespace_of, replicas_of
from ..core.policy.policy import Policy, policy_for
from ..core.replicaset.active_pods_with_ranks import RankedPod, TieGroup, deciding_rule
from ..core.scale.assessment import Assessment
from ..core.scale.clamp import clamp_scale_down
from ..core.scale.decision import preview_scale
from ..core.scale.owner_sizing import sizing_owner
from ..core.scale.state_coverage import state_gaps
from ..core.scale.verdict import placement
from ..core.view.cluster import KIND_NAMES, KIND_SHORT_NAMES, ClusterView, Snapshot, canonical_kind
from ..errors import InputError

VICTIM, POSSIBLE_VICTIM, BLOCKED, SURVIVES = "victim", "possible-victim", "blocked", "survives"


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
        raise PlanError(f"--workload {text!r}: unknown kind {parts[0]!r} (use {KIND_NAMES}, "
                        f"or {KIND_SHORT_NAMES})")
    return kind, parts[1], parts[2]


def find_workload(view: ClusterView, workload_ref: str) -> Mapping[str, Any]:
    """The workload KIND/NAMESPACE/NAME names, or PlanError saying why it is not there."""
    kind, namespace, name = parse_workload_ref(workload_ref)
    workload = view.workload(kind, namespace, name)
    if workload is None:
        raise PlanError(f"{kind} {namespace}/{name}: not found in {_describe(view)}"
                        f"{_others(view, kind, namespace, name)}")
    return workload


def _others(view: ClusterView, kind: str, namespace: str, name: str) -> str:
    """What the user may have meant: near names, else the kind's workloads there."""
    workloads = getattr(view, "workloads", None)
    if workloads is None:
        return ""
    every = workloads()
    here = sorted(name_of(w) for w in every
                  if w.get("kind") == kind and namespace_of(w) == namespace)
    close = difflib.get_close_matches(name, here, n=3, cutoff=0.6)
    if close:
        return "; did you mean " + " or ".join(close) + "?"
    if here:
        shown = ", ".join(here[:10]) + (f" and {len(here) - 10} more" if len(here) > 10 else "")
        return f"; the {kind}s in namespace {namespace}: {shown}"
    elsewhere = sorted({f"{w.get('kind')} {namespace_of(w)}/{name}" for w in every
                        if name_of(w) == name})
    if elsewhere:
        return f"; no {kind} in namespace {namespace}, but there is " + ", ".join(elsewhere)
    return f"; no {kind} in namespace {namespace}" if every else ""


def _describe(view: ClusterView) -> str:
    """The cluster state, in words that say when it holds no workloads at all."""
    workloads = getattr(view, "workloads", None)
    if workloads is not None and not workloads():
        return ("the cluster state, which holds no Deployments, ReplicaSets, StatefulSets, "
                "LeaderWorkerSets or Rollouts")
    return "the cluster state"


def current_replicas(view: ClusterView, workload_ref: str) -> int:
    """The workload's spec.replicas (for --replicas-delta)."""
    return replicas_of(find_workload(view, workload_ref))


def build_plan(view: ClusterView, policy: Policy, workload_ref: str, replicas: int,
               now_ns: int | None, as_user: str | None = None) -> dict[str, Any]:
    """The plan document (the stable JSON interface) for scaling a workload.

    With `as_user`, the verdict is what the webhooks answer that requester: exempt users
    and owner-sized workloads are allowed, an autoscaler may be clamped (`clampedTo`).
    """
    if replicas < 0:
        raise PlanError(f"--replicas {replicas}: must be 0 or more")
    workload = find_workload(view, workload_ref)
    judged = policy_for(policy, as_user)
    # The webhook's own decision, with the victims shown even out of scope.
    try:
        preview = preview_scale(view, judged, workload, replicas, now_ns)
    except InputError:
        raise
    except ValueError as err:  # a kind the core cannot predict
        raise PlanError(f"{workload.get('kind')} {namespace_of(workload)}/"
                        f"{name_of(workload)}: {err}") from None
    document = plan_document(view, judged, preview.assessment, now_ns, preview.out_of_scope)
    gaps = [] if preview.out_of_scope else state_gaps(workload, preview.assessment.prediction,
                                                      view.node)
    if gaps:  # missing pods or nodes would read as "nothing deleted": no verdict at all
        document.update(checked=False, allowed=None, notCheckedBecause="; ".join(gaps))
    document["requester"], document["clampedTo"], document["requesterNote"] = as_user, None, None
    if as_user is not None and replicas < replicas_of(workload):
        _answer_requester(document, view, policy, workload, now_ns, as_user)
    return document


def _answer_requester(document: dict[str, Any], view: ClusterView, policy: Policy,
                      workload: Mapping[str, Any], now_ns: int | None, user: str) -> None:
    """Turn the verdict into the webhooks' answer to `user`, in the order they decide."""
    rules = policy.scale_down
    kind = str(workload.get("kind") or "")
    owner = sizing_owner(kind, workload)
    if user in rules.exempt_users:
        note = f"{user} is in scaleDown.exemptUsers: never checked"
    elif owner is not None:
        note = (f"sized by its owner {owner.get('kind')} {owner.get('name')}: poolguard never "
                "blocks a replica change of it")
    elif (rules.is_autoscaler(user) and rules.autoscalers.enforcement == "clamp"
          and document["allowed"] is not None):  # a clamp needs the pods a verdict needs
        replicas = document["replicas"]
        clamp = clamp_scale_down(view, policy, workload, replicas["to"], replicas["from"],
                                 now_ns)
        if not clamp.clamped:
            return
        document["clampedTo"], note = clamp.replicas, clamp.reason()
    else:
        return
    document["allowed"], document["requesterNote"] = True, note


def plan_document(view: ClusterView, policy: Policy, assessment: Assessment,
                  now_ns: int | None, out_of_scope: str | None = None) -> dict[str, Any]:
    """The plan as a plain dict; `out_of_scope` says why the webhook would not check it."""
    prediction, verdict = assessment.prediction, assessment.verdict
    with_rs = prediction.kind in ("Deployment", "ReplicaSet")
    first_survivor = {}
    for pod in prediction.survivors:
        first_survivor.setdefault(pod.replica_set, pod)
    group_reasons = _group_reasons(prediction.groups or [], prediction.to_replicas)

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
        elif pod.name in group_reasons:
            entry["reason"] = group_reasons[pod.name]
        elif pod.replica_set in first_survivor:
            entry["reason"] = deciding_rule(pod, first_survivor[pod.replica_set])
        else:
            entry["reason"] = "every pod of its ReplicaSet goes"
        entry["costWriter"] = pod.facts.cost_writer or None
        if pod.facts.cost_writer:
            entry["reason"] += f" (cost written by {pod.facts.cost_writer})"
        return entry

    document: dict[str, Any] = {
        "workload": {"kind": prediction.kind, "namespace": prediction.namespace,
                     "name": prediction.name},
        "replicas": {"from": prediction.from_replicas, "to": prediction.to_replicas},
        "victims": [victim_entry(p) for p in prediction.victims],
        "possibleVictims": [p.name for p in prediction.possible_victims],
        # Deleted only once the controller stops waiting on `waitingOn` (StatefulSets).
        "blocked": [{**victim_entry(b.pod), "waitingOn": b.waiting_on, "reason": b.wait.reason}
                    for b in prediction.blocked],
        "allowed": verdict.allowed,
        "enforcement": verdict.enforcement,
        "violations": [{"rule": v.rule, "message": v.message} for v in verdict.violations],
        "warnings": verdict.warnings,
        "safeReplicas": verdict.safe_replicas,
        "checked": out_of_scope is None,
        "notCheckedBecause": out_of_scope,
        # Only the webhook sees who scales: these users' requests are never checked.
        "exemptUsers": list(policy.scale_down.exempt_users),
        "pods": _pod_entries(view, policy, assessment,
                             {p.name: victim_entry(p)["reason"] for p in prediction.victims}),
    }
    if prediction.order is not None:
        document["order"] = [p.name for p in prediction.order]
    if prediction.groups is not None:
        document["groups"] = _group_entries(view, policy, prediction.groups)
        group_of = {p.name: g.index for g in prediction.groups for p in g.pods}
        for entry in document["pods"]:
            entry["group"] = group_of.get(entry["name"])
    if prediction.replica_set_targets:
        document["replicaSets"] = {
            name: {"from": before, "to": after}
            for name, (before, after) in prediction.replica_set_targets.items()
        }
    return document


def _pod_entries(view: ClusterView, policy: Policy, assessment: Assessment,
                 victim_reasons: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every active pod of the workload with its place, cost and fate, and why: victims
    numbered in order."""
    prediction = assessment.prediction
    possible = {id(p) for p in prediction.possible_victims}
    blocked = {id(b.pod): f"waits on {b.waiting_on}: {b.wait.reason}" for b in prediction.blocked}
    why_possible = _why_possible(prediction.tie_groups, prediction.victims)
    entries = []
    for index, pod in enumerate([*prediction.victims, *(b.pod for b in prediction.blocked),
                                 *prediction.survivors]):
        place = placement(policy, view.node, pod)
        is_victim = index < len(prediction.victims)
        fate = (VICTIM if is_victim else BLOCKED if id(pod) in blocked
                else POSSIBLE_VICTIM if id(pod) in possible else SURVIVES)
        entry: dict[str, Any] = {
            "name": pod.name, "node": pod.node_name or None, "pool": place.pool,
            "protected": place.protected, "fate": fate,
            "deletionOrder": index + 1 if is_victim else None,
            # Another controller's field manager when it owns the deletion cost.
            "costWriter": pod.facts.cost_writer or None,
            "deletionCost": pod.deletion_cost,
            "reason": (victim_reasons.get(pod.name) if is_victim
                       else blocked.get(id(pod)) or why_possible.get(id(pod))),
        }
        if pod.replica_set:
            entry["replicaSet"] = pod.replica_set
        entries.append(entry)
    return entries


def _group_reasons(groups: list[LwsGroup], to_replicas: int) -> dict[str, str]:
    """Why each pod of a LeaderWorkerSet's condemned group goes, by pod name."""
    reasons = {}
    for group in groups:
        if group.index < to_replicas:
            continue
        where = f"group {group.index} at or above the new count {to_replicas}"
        if group.leader is not None:
            reasons[group.leader.name] = f"leader of {where}"
        for worker in group.workers:
            reasons[worker.name] = (f"worker of {where} (garbage-collected with its "
                                    "leader's worker StatefulSet)")
    return reasons


def _group_entries(view: ClusterView, policy: Policy,
                   groups: list[LwsGroup]) -> list[dict[str, Any]]:
    """One entry per LeaderWorkerSet group, highest index first: its pods, pools and fate."""
    entries = []
    for group in groups:
        places = [placement(policy, view.node, pod) for pod in group.pods]
        pools = list(dict.fromkeys(place.pool for place in places))
        entries.append({
            "index": group.index,
            "leader": group.leader.name if group.leader is not None else None,
            "workers": [pod.name for pod in group.workers],
            "pools": pools,
            "protected": any(place.protected for place in places),
            "fate": group.fate,
        })
    return entries


def _why_possible(tie_groups: list[TieGroup], victims: list[RankedPod]) -> dict[int, str]:
    """For each possible victim (by id), why it might go instead of a predicted victim."""
    victim_ids = {id(p) for p in victims}
    reasons: dict[int, str] = {}
    for group in tie_groups:
        tied = [p.name for p in group.members if id(p) in victim_ids]
        for pod in group.members:
            if id(pod) in victim_ids or id(pod) in reasons:
                continue
            if group.why:
                reasons[id(pod)] = group.why
            elif tied:
                reasons[id(pod)] = (
                    f"tied with {', '.join(tied)} on rules 1-5: {group.removed} of these "
                    f"{len(group.members)} are deleted; age, restarts and the controller's "
                    "order decide which")
            else:
                reasons[id(pod)] = ("goes instead of a predicted victim if the ReplicaSets "
                                    "are synced in another order")
    return reasons


def audit_workloads(view: Snapshot, policy: Policy, delta: int | None, replicas: int | None,
                    now_ns: int | None, as_user: str | None = None) -> list[dict[str, Any]]:
    """A plan for every workload a person scales (Deployments, StatefulSets,
    LeaderWorkerSets, Rollouts, bare ReplicaSets).

    ReplicaSets an owner sizes (a Deployment, a Rollout) are left out, and so are the
    StatefulSets of a LeaderWorkerSet: their owner is planned instead. A workload already
    at 0 has no scale-down to check and is left out too.
    """
    documents = []
    for workload in sorted(view.workloads(), key=lambda w: (namespace_of(w), w.get("kind") or "",
                                                            name_of(w))):
        if _sized_by_planned_owner(workload):
            continue
        current = replicas_of(workload)
        target = replicas if replicas is not None else max(current + (delta or 0), 0)
        if current == 0 or target >= current:
            continue
        ref = f"{workload['kind']}/{namespace_of(workload)}/{name_of(workload)}"
        documents.append(build_plan(view, policy, ref, target, now_ns, as_user))
    return documents


def _sized_by_planned_owner(workload: Mapping[str, Any]) -> bool:
    """A ReplicaSet with an owner, or a StatefulSet a LeaderWorkerSet made (its leader
    StatefulSet, or a group's worker StatefulSet, owned by the group's leader pod)."""
    kind, ref = workload.get("kind"), controller_ref(workload)
    if kind == "ReplicaSet":
        return ref is not None
    if kind != "StatefulSet" or ref is None:
        return False
    return ref.get("kind") == "LeaderWorkerSet" or (
        ref.get("kind") == "Pod" and SET_NAME_LABEL in labels_of(workload))


def render_audit(documents: list[Mapping[str, Any]], source: str) -> str:
    """One line per workload: its scale-down and the verdict, the worst first."""
    if not documents:
        return f"No workload in {source} has a scale-down to check."
    order = {"DENIED": 0, "CLAMPED": 1, "VIOLATES": 2, "ALLOWED": 3, "NOT CHECKED": 4}
    rows = sorted((_audit_row(doc) for doc in documents), key=lambda r: order[r[2]])
    table = [("WORKLOAD", "REPLICAS", "VERDICT", "DETAIL"), *rows]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < 3 else cell
                       for i, cell in enumerate(row)).rstrip() for row in table]
    counts = {word: sum(1 for r in rows if r[2] == word) for word in order}
    lines.append("")
    clamped = (f"{counts['CLAMPED']} clamped, " if documents[0].get("requester") is not None
               else "")
    lines.append(f"{len(rows)} workloads: {counts['DENIED']} denied, {clamped}"
                 f"{counts['VIOLATES']} "
                 f"allowed despite violations, {counts['ALLOWED']} allowed, "
                 f"{counts['NOT CHECKED']} not checked.")
    requester = documents[0].get("requester")
    if requester is not None:
        lines.append(f"As {requester}: {counts['CLAMPED']} held above their target "
                     "(CLAMPED: the webhook lowers the scale-down to the safe count).")
    return "\n".join(lines)


def _audit_row(document: Mapping[str, Any]) -> tuple[str, str, str, str]:
    workload, replicas = document["workload"], document["replicas"]
    name = f"{workload['kind']} {workload['namespace']}/{workload['name']}"
    sizes = f"{replicas['from']} -> {replicas['to']}"
    if not document["checked"]:
        return name, sizes, "NOT CHECKED", document["notCheckedBecause"]
    rules = ", ".join(v["rule"] for v in document["violations"])
    if document.get("clampedTo") is not None:
        return (name, sizes, "CLAMPED", f"held at {document['clampedTo']} replicas, above "
                f"the target {replicas['to']} ({rules})")
    if not rules:
        return name, sizes, "ALLOWED", ""
    safe = document["safeReplicas"]
    detail = f"{rules}; safe down to {safe} replicas"
    if document["allowed"]:
        return name, sizes, "VIOLATES", f"{detail} (enforcement: {document['enforcement']})"
    return name, sizes, "DENIED", detail


def render_text(document: Mapping[str, Any]) -> str:
    """A table a person reads at a glance."""
    workload, replicas = document["workload"], document["replicas"]
    lines = [f"{workload['kind']} {workload['namespace']}/{workload['name']}: "
             f"{replicas['from']} -> {replicas['to']} replicas"]
    for name, sizes in (document.get("replicaSets") or {}).items():
        if sizes["from"] != sizes["to"]:
            lines.append(f"  ReplicaSet {name}: {sizes['from']} -> {sizes['to']}")
    lines.extend(_group_lines(document.get("groups")))
    victims = document["victims"]
    if not victims and not document["blocked"]:
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
    if document["blocked"]:
        lines.append("")
        lines.append("Blocked (deleted only once the controller stops waiting): " + "; ".join(
            f"{b['name']} (the controller waits here)" if b["name"] == b["waitingOn"]
            else f"{b['name']} waits on {b['waitingOn']}" for b in document["blocked"]))
        lines.append(f"  because {document['blocked'][0]['reason']}")
    if document["possibleVictims"]:
        lines.append("")
        why = ("depending on how far the rolling update under way gets (it recreates "
               "outdated groups)" if "groups" in document else
               "instead, depending on orders the controllers choose (ties, ReplicaSet syncs)")
        lines.append(f"Might be deleted {why}: " + ", ".join(document["possibleVictims"]))
    lines.append("")
    lines.append("Verdict: " + _verdict_word(document))
    if document.get("requesterNote"):
        lines.append(f"  as {document['requester']}: {document['requesterNote']}")
    lines.extend(f"  [{v['rule']}] {v['message']}" for v in document["violations"])
    lines.extend(f"  warning: {w}" for w in document["warnings"])
    if document["exemptUsers"] and document.get("requester") is None:
        lines.append("  unknown to plan: who scales; the webhook does not check requests by "
                     "scaleDown.exemptUsers (" + ", ".join(document["exemptUsers"]) + ")")
    return "\n".join(lines)


def _group_lines(groups: list[Mapping[str, Any]] | None) -> list[str]:
    """A LeaderWorkerSet's groups, highest index first: the unit a scale-down removes."""
    if not groups:
        return []
    rows = [("GROUP", "FATE", "LEADER", "WORKERS", "POOLS")] + [
        (str(g["index"]), g["fate"], g["leader"] or "<none>", str(len(g["workers"])),
         ", ".join((pool or "<none>") for pool in g["pools"])
         + (" (protected)" if g["protected"] else ""))
        for g in groups
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return ["", "Groups (whole groups go, highest index first):"] + [
        "  " + "  ".join(cell.ljust(widths[i]) if i < 4 else cell
                         for i, cell in enumerate(row)).rstrip() for row in rows]


def _verdict_word(document: Mapping[str, Any]) -> str:
    if document.get("clampedTo") is not None:
        return f"CLAMPED to {document['clampedTo']}"
    if document.get("requesterNote"):
        return "ALLOWED"
    if not document["checked"]:
        word = "NOT CHECKED (" if document["allowed"] is None else "ALLOWED (not checked: "
        return word + document["notCheckedBecause"] + ")"
    if not document["violations"]:
        return "ALLOWED"
    if not document["allowed"]:
        return "DENIED (enforcement: enforce)"
    return f"ALLOWED despite violations (enforcement: {document['enforcement']})"
