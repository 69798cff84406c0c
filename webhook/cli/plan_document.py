"""The plan document: what `plan` reports about one scale-down (`--output json`).

`build_plan` finds the workload, asks the webhook's own decision and turns it into the
dict that `--output json` prints (victims, possible victims, the verdict, every pod's
fate), answered for a requester with `--as`. Its renderings are `plan_text` (the table
for people) and `plan_html`; `plan_audit` plans every workload (`--all-workloads`). The
command itself (flags, reading the state, exit codes) is `webhook.cli.plan`. What a
scale-down frees (`freedNodes` and the rest) is `webhook.cli.plan_frees`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..core.kinds.registry import BY_KIND, exempt_users_for
from ..core.kinds.workload_kind import WorkloadKind
from ..core.model.deciding_rule import deciding_rule
from ..core.model.ranked_pod import RankedPod
from ..core.model.tie_group import TieGroup, is_certain
from ..core.model.units import ReplicaUnit
from ..core.objects.kube import name_of, namespace_of, replicas_of
from ..core.policy.policy import Policy, policy_for
from ..core.policy.pool_coverage import PoolCoverage
from ..core.scale.answer import ScaleOutcome, ScaleRequest, answer_scale
from ..core.scale.policy_verdict import placement
from ..core.scale.requester import clamps
from ..core.scale.safe_replicas import JudgedScale
from ..core.scale.scope import out_of_scope_reason, preview_scale
from ..core.scale.state_coverage import state_gaps
from ..core.view.cluster import ClusterView
from ..core.view.snapshot import Snapshot
from ..errors import InputError
from .plan_frees import frees_fields
from .plan_lookup import PlanError, find_workload

VICTIM, POSSIBLE_VICTIM, BLOCKED, SURVIVES = "victim", "possible-victim", "blocked", "survives"


def build_plan(view: ClusterView, policy: Policy, workload_ref: str, replicas: int,
               now_ns: int | None, as_user: str | None = None,
               coverage: PoolCoverage | None = None) -> dict[str, Any]:
    """The plan document (the stable JSON interface) for scaling a workload.

    With `as_user`, the verdict is what the webhooks answer that requester: exempt users
    and owner-sized workloads are allowed, an autoscaler may be clamped (`clampedTo`).
    `coverage`: the policy checked against the state's nodes (no verdict is checked when
    it leaves a protected pool without nodes).
    """
    if replicas < 0:
        raise PlanError(f"--replicas {replicas}: must be 0 or more")
    return plan_workload(view, policy, find_workload(view, workload_ref), replicas, now_ns,
                         as_user, coverage)


def plan_workload(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                  replicas: int, now_ns: int | None, as_user: str | None = None,
                  coverage: PoolCoverage | None = None) -> dict[str, Any]:
    """The plan document for scaling `workload` (an object of the view) to `replicas`."""
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
    gaps = _namespace_gap(view, policy, workload)
    if gaps:
        document["governed"] = None  # the Namespace's labels would tell
    elif not preview.out_of_scope:
        gaps = state_gaps(view, workload, preview.assessment.prediction)
        if coverage is not None:
            # Under a pool label or pool name no node carries, no pod is protected: every
            # scale-down would look safe, a confident wrong answer.
            gaps += [f"the policy does not match the nodes: {finding.message}"
                     for finding in coverage.disarming]
    if gaps:  # missing pods or nodes would read as "nothing deleted": no verdict at all
        document.update(checked=False, allowed=None, notCheckedBecause="; ".join(gaps))
        # Out of scope only for want of the Namespace's labels: not a reason to repeat.
        document["warnings"] = [w for w in document["warnings"]
                                if w != f"not checked: {preview.out_of_scope}"]
    document["requester"], document["clampedTo"], document["requesterNote"] = as_user, None, None
    document["requesterGroup"] = policy.scale_down.requester_group(as_user)
    # A requester under clamp is judged by the clamp (what it writes), not by enforce.
    document["enforcement"] = (policy.scale_down.requester_enforcement(as_user)
                               or document["enforcement"])
    if as_user is not None and replicas < replicas_of(workload):
        _answer_requester(document, view, policy, workload, replicas, now_ns, as_user)
    return document


def _answer_requester(document: dict[str, Any], view: ClusterView, policy: Policy,
                      workload: Mapping[str, Any], replicas: int, now_ns: int | None,
                      as_user: str) -> None:
    """What the webhooks answer `as_user` instead of the verdict (an exempt user, an
    owner-sized workload, a clamp), in the document; nothing when the verdict is the
    answer. A requester under clamp is answered as the chain of both webhooks answers it:
    `/mutate-scale` first."""
    request = ScaleRequest(kind=str(workload.get("kind") or ""),
                           namespace=namespace_of(workload), name=name_of(workload),
                           to_replicas=replicas, from_replicas=replicas_of(workload),
                           username=as_user, workload=workload)
    answer = answer_scale(request, view, policy, now_ns, clamp=clamps(policy, as_user),
                          assess=False)
    if answer.outcome not in _REQUESTER_ANSWERS:
        return
    # A clamp needs the pods a verdict needs: an unchecked verdict gets none.
    if answer.clamp is None or document["allowed"] is not None:
        document["allowed"], document["requesterNote"] = True, answer.note
        document["clampedTo"] = answer.clamp.replicas if answer.clamp else None


# The answers a requester gets instead of the verdict.
_REQUESTER_ANSWERS = (ScaleOutcome.EXEMPT_USER, ScaleOutcome.OWNER_DECIDED, ScaleOutcome.CLAMPED)


def _namespace_gap(view: ClusterView, policy: Policy, workload: Mapping[str, Any]) -> list[str]:
    """A state without the workload's Namespace under a namespaceSelector: its labels, so
    whether the policy governs the workload, are unknown (not "not selected"), unless the
    workload is out of scope whatever they are (its own skip label, the podSelector)."""
    namespace = namespace_of(workload)
    if not policy.namespace_selector or not isinstance(view, Snapshot) \
            or view.has_namespace(namespace):
        return []
    if out_of_scope_reason(replace(policy, namespace_selector={}), {}, workload, view):
        return []
    return [f"the state has no Namespace {namespace}, whose labels the policy's "
            f"namespaceSelector needs (add it: kubectl get namespace {namespace} -o json)"]


def not_checked(document: Mapping[str, Any]) -> bool:
    """A verdict plan could not give: not checked, for any reason but the two that are
    the webhook's own answer (a workload the policy does not govern, a requester whose
    requests are allowed). `--fail-on-deny` exits 4 on it; `--all-workloads` lists it
    first."""
    if document["checked"] or document.get("requesterNote"):
        return False
    return document["allowed"] is None or document.get("governed") is not False


def requester_judged(document: Mapping[str, Any]) -> str:
    """How the verdict judged `--as`'s requester when the verdict is its answer: with the
    enforcement of the group it is listed in, else as a person."""
    group = document.get("requesterGroup")
    if group is None:
        return (f"listed in no requester group: judged as a person (scaleDown.enforcement: "
                f"{document['enforcement']})")
    return f"listed in scaleDown.{group}: judged with its enforcement ({document['enforcement']})"


def plan_document(view: ClusterView, policy: Policy, assessment: JudgedScale,
                  now_ns: int | None, out_of_scope: str | None = None) -> dict[str, Any]:
    """The plan as a plain dict; `out_of_scope` says why the webhook would not check it."""
    prediction, verdict = assessment.prediction, assessment.verdict
    kind = BY_KIND[prediction.kind]
    first_survivor = {}
    for pod in prediction.survivors:
        first_survivor.setdefault(pod.replica_set, pod)

    def victim_entry(pod: RankedPod) -> dict[str, Any]:
        place = placement(policy, view.node, pod)
        entry: dict[str, Any] = {
            "namespace": pod.namespace, "name": pod.name, "node": pod.node_name or None,
            "pool": place.pool, "protected": place.protected, "deletionCost": pod.deletion_cost,
        }
        if kind.names_replicasets:
            entry["replicaSet"] = pod.replica_set
        if pod.name in prediction.reasons:
            entry["reason"] = prediction.reasons[pod.name]
        elif kind.victim_reason is not None:
            entry["reason"] = kind.victim_reason
        elif pod.replica_set in first_survivor:
            entry["reason"] = deciding_rule(pod, first_survivor[pod.replica_set])
        else:
            entry["reason"] = kind.every_pod_goes
        entry["costWriter"] = pod.facts.cost_writer or None
        if pod.facts.cost_writer:
            entry["reason"] += f" (cost written by {pod.facts.cost_writer})"
        return entry

    document: dict[str, Any] = {
        "workload": {"kind": prediction.kind, "namespace": prediction.namespace,
                     "name": prediction.name},
        "replicas": {"from": prediction.from_replicas, "to": prediction.to_replicas},
        "victims": [{**victim_entry(p), "certain": is_certain(p, prediction.tie_groups)}
                    for p in prediction.victims],
        "possibleVictims": [p.name for p in prediction.possible_victims],
        # Deleted only once the controller stops waiting on `waitingOn` (StatefulSets).
        "blocked": [{**victim_entry(b.pod), "waitingOn": b.waiting_on, "reason": b.wait.reason}
                    for b in prediction.blocked],
        "allowed": verdict.allowed,
        "enforcement": verdict.enforcement,
        "violations": [{"rule": v.rule, "message": v.message, "problem": v.problem,
                        "fixes": v.fixes, "outcome": v.outcome, "worstCase": v.worst_case or None}
                       for v in verdict.violations],
        "warnings": verdict.warnings,
        "safeReplicas": verdict.safe_replicas,
        "checked": out_of_scope is None,
        "notCheckedBecause": out_of_scope,
        # Whether the policy governs the workload (its selectors and skip labels): the
        # webhook checks none of a workload it does not govern.
        "governed": out_of_scope is None,
        # Only the webhook sees who scales: these users' requests are never checked (a
        # controller the registry knows as another kind's never scales this one).
        "exemptUsers": exempt_users_for(prediction.kind, policy.scale_down.exempt_users),
        "pods": _pod_entries(view, policy, assessment,
                             {p.name: victim_entry(p)["reason"] for p in prediction.victims}),
    }
    if prediction.order is not None:
        document["order"] = [p.name for p in prediction.order]
    if prediction.units is not None and kind.units_key:
        document[kind.units_key] = _unit_entries(view, policy, kind, prediction.units)
        unit_of = {p.name: unit.index for unit in prediction.units for p in unit.pods}
        for entry in document["pods"]:
            entry[kind.unit] = unit_of.get(entry["name"])
    document.update(frees_fields(view, policy, prediction.victims,
                                 prediction.victims + prediction.survivors))
    if prediction.child_targets and kind.children_key:
        document[kind.children_key] = {
            name: {"from": before, "to": after}
            for name, (before, after) in prediction.child_targets.items()
        }
    return document


def _pod_entries(view: ClusterView, policy: Policy, assessment: JudgedScale,
                 victim_reasons: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every active pod of the workload with its place, cost and fate, and why: victims
    numbered in order."""
    prediction = assessment.prediction
    possible = {id(p) for p in prediction.possible_victims}
    blocked = {id(b.pod): f"waits on {b.waiting_on}: {b.wait.reason}" for b in prediction.blocked}
    why_possible = _why_possible(BY_KIND[prediction.kind], prediction.tie_groups,
                                 prediction.victims)
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


def _unit_entries(view: ClusterView, policy: Policy, kind: WorkloadKind,
                  units: list[ReplicaUnit]) -> list[dict[str, Any]]:
    """One entry per unit of a replica (a LeaderWorkerSet's group), highest index first:
    its pods by part (leader, workers), their pools, and its fate."""
    head, rest = kind.unit_parts
    entries = []
    for unit in units:
        places = [placement(policy, view.node, pod) for pod in unit.pods]
        entries.append({
            "index": unit.index,
            head: unit.head.name if unit.head is not None else None,
            rest: [pod.name for pod in unit.rest],
            "pools": list(dict.fromkeys(place.pool for place in places)),
            "protected": any(place.protected for place in places),
            "fate": unit.fate,
        })
    return entries


def _why_possible(kind: WorkloadKind, tie_groups: list[TieGroup],
                  victims: list[RankedPod]) -> dict[int, str]:
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
                reasons[id(pod)] = kind.sync_order_decides
    return reasons
