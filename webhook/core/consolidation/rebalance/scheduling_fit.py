"""Would the scheduler's filters let a pod onto a node, resources aside?

The filters of the default profile that read only the pod and the node
(pkg/scheduler/framework/plugins): NodeUnschedulable (`spec.unschedulable`, unless the
pod tolerates `node.kubernetes.io/unschedulable:NoSchedule`), TaintToleration (every
NoSchedule and NoExecute taint tolerated; PreferNoSchedule only scores), NodeAffinity
(`spec.nodeSelector` and the required node affinity: terms ORed, expressions and fields
ANDed, `component-helpers/scheduling/corev1/nodeaffinity`). A node whose Ready condition
is not True is left out too: its node lifecycle controller taints it anyway.

Inter-pod affinity, topology spread and volumes are not read here: they depend on
other pods and the scheduler's own state, which is why the live rebalancer must check
where each replacement landed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...objects.kube import go_parse_int, labels_of, name_of, spec_of, status_of

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
_FILTERING_EFFECTS = ("NoSchedule", "NoExecute")


def node_ready(node: Mapping[str, Any]) -> bool:
    """The node's Ready condition is True."""
    for condition in status_of(node).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return False


def admits(pod: Mapping[str, Any], node: Mapping[str, Any]) -> str | None:
    """Why the scheduler would filter `node` out for `pod`, or None when it would not."""
    spec = spec_of(pod)
    if not node_ready(node):
        return "is not Ready"
    tolerations = [t for t in spec.get("tolerations") or () if isinstance(t, Mapping)]
    for taint in node_taints(node):
        if taint.get("effect") in _FILTERING_EFFECTS and not tolerated(taint, tolerations):
            return f"has the taint {_taint_text(taint)}, which the pod does not tolerate"
    if not selector_matches(spec.get("nodeSelector") or {}, labels_of(node)):
        return "does not match the pod's nodeSelector"
    if not required_affinity_matches(spec, node):
        return "does not match the pod's required node affinity"
    return None


def node_taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The node's taints, with `spec.unschedulable` as the taint the scheduler reads."""
    spec = spec_of(node)
    taints = [t for t in spec.get("taints") or () if isinstance(t, Mapping)]
    if spec.get("unschedulable"):
        taints.append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
    return taints


def tolerated(taint: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """Does one of `tolerations` tolerate `taint` (v1 Toleration.ToleratesTaint)?"""
    return any(_tolerates(toleration, taint) for toleration in tolerations)


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    # Equal with an empty key is refused by the API server; read it as not tolerating.
    return operator == "Equal" and bool(key) and \
        (toleration.get("value") or "") == (taint.get("value") or "")


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """`spec.nodeSelector`: every pair present on the node."""
    return all(labels.get(key) == value for key, value in selector.items())


def required_affinity_matches(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The required node affinity: absent matches every node; otherwise one term must
    match, and a term with neither expressions nor fields matches nothing."""
    required = (((pod_spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    if not required:
        return True
    terms = required.get("nodeSelectorTerms") or ()
    return any(term_matches(term, node) for term in terms if isinstance(term, Mapping))


def term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """One NodeSelectorTerm: all of its label expressions and field expressions."""
    expressions = term.get("matchExpressions") or []
    node_fields = term.get("matchFields") or []
    if not expressions and not node_fields:
        return False
    labels = labels_of(node)
    fields = {"metadata.name": name_of(node)}
    return all(_requirement_matches(e, labels) for e in expressions) and \
        all(_requirement_matches(e, fields) for e in node_fields)


def _requirement_matches(expression: Any, labels: Mapping[str, str]) -> bool:
    if not isinstance(expression, Mapping):
        return False
    key, operator = expression.get("key"), expression.get("operator")
    values = expression.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        mine, theirs = go_parse_int(labels[key]), go_parse_int(values[0])
        if mine is None or theirs is None:
            return False
        return mine > theirs if operator == "Gt" else mine < theirs
    return False


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    return f"{taint.get('key')}{'=' + value if value else ''}:{taint.get('effect')}"
