"""The MutatingAdmissionPolicy that sets the deletion cost inside the API server.

A fallback for pod creation that needs no webhook: where a pod's pool is known when it is
created (its nodeSelector names the pool, or every required node-affinity term pins the
pool label to one value with operator In), the API server itself writes the cost and
poolguard's marker annotations, exactly as the pods webhook would (see mutation.py's
`pinned_pool` and `CostDecision.annotations`). The pool-to-cost table is the policy's
params: a ConfigMap generated from the same policy file, so the two never disagree.

What CEL cannot do: look up a Node. A pod created with spec.nodeName is therefore not
resolved here; the bindings webhook and the reconciler cover it, as they cover every pod
that is placed by the scheduler.
"""

from __future__ import annotations

from typing import Any

from ..objects.deletion_cost import (
    DELETION_COST_ANNOTATION,
    MANAGED_COST_ANNOTATION,
    POOL_ANNOTATION,
    format_deletion_cost,
)
from ..policy.policy import Policy
from .mutation import SKIP_LABEL, escape_pointer

NAME = "poolguard-deletion-cost"
LABELS = {"app.kubernetes.io/name": "poolguard", "app.kubernetes.io/part-of": "poolguard",
          "app.kubernetes.io/component": "admission-policy"}
POOL_KEY_PREFIX = "pool."
# A pool name becomes part of a ConfigMap key: the policy only has pool names that are
# node label values (policy.LABEL_VALUE), whose syntax fits inside a key's.


def _lines(*lines: str) -> str:
    return "\n".join(lines)


# The pool the pod pins, or "" when none: mutation.pinned_pool in CEL. Every expression is
# a few lines (CEL ignores the line breaks) so that the YAML stays readable.
_AFFINITY = "object.spec.affinity.nodeAffinity"
_REQUIRED = f"{_AFFINITY}.requiredDuringSchedulingIgnoredDuringExecution"
_VARIABLES = [
    ("poolLabel", "params.data.poolLabel"),
    ("selectorPool", _lines(
        "has(object.spec.nodeSelector) && variables.poolLabel in object.spec.nodeSelector",
        "? object.spec.nodeSelector[variables.poolLabel] : ''")),
    ("terms", _lines(
        f"has(object.spec.affinity) && has({_AFFINITY})",
        f"&& has({_REQUIRED})",
        f"&& has({_REQUIRED}.nodeSelectorTerms)",
        f"? {_REQUIRED}.nodeSelectorTerms : []")),
    # Per term: its `In` expressions on the pool label (terms are ORed, expressions ANDed).
    ("termExpressions", _lines(
        "variables.terms.map(t, has(t.matchExpressions)",
        "  ? t.matchExpressions.filter(e, e.key == variables.poolLabel && e.operator == 'In')",
        "  : [])")),
    # Per term: the single pool it requires, or "" (none, several, or a multi-value In).
    ("termPools", _lines(
        "variables.termExpressions.map(es, size(es) == 0",
        "  || es.exists(e, !has(e.values) || size(e.values) != 1)",
        "  || !es.all(e, e.values[0] == es[0].values[0])",
        "  ? '' : es[0].values[0])")),
    ("affinityPool", _lines(
        "size(variables.termPools) > 0",
        "&& variables.termPools.all(p, p != '' && p == variables.termPools[0])",
        "? variables.termPools[0] : ''")),
    # A nodeSelector that contradicts the affinity: the pod never schedules; do not guess.
    ("pool", _lines(
        "variables.affinityPool == '' ? variables.selectorPool",
        ": variables.selectorPool == '' || variables.selectorPool == variables.affinityPool",
        "? variables.affinityPool : ''")),
    ("cost", _lines(
        f"'{POOL_KEY_PREFIX}' + variables.pool in params.data",
        f"? params.data['{POOL_KEY_PREFIX}' + variables.pool]",
        ": params.data.defaultDeletionCost")),
]


def _add(key: str, value: str) -> str:
    """A JSONPatch adding one annotation, its path escaped as annotation_patch escapes it."""
    return (f"JSONPatch{{op: 'add', path: '/metadata/annotations/{escape_pointer(key)}',"
            f" value: {value}}}")


# The annotations CostDecision.annotations writes for a pinned pool.
_MUTATION = _lines(
    "variables.pool == '' ? []",
    ": !has(object.metadata.annotations) ? [JSONPatch{op: 'add', path: '/metadata/annotations',",
    f"    value: {{'{DELETION_COST_ANNOTATION}': variables.cost,",
    f"            '{MANAGED_COST_ANNOTATION}': variables.cost,",
    f"            '{POOL_ANNOTATION}': variables.pool}}}}]",
    f": [{_add(DELETION_COST_ANNOTATION, 'variables.cost')},",
    f"   {_add(MANAGED_COST_ANNOTATION, 'variables.cost')},",
    f"   {_add(POOL_ANNOTATION, 'variables.pool')}]")

_MATCH_CONDITIONS = [
    # Break-glass for one object, as on the webhooks.
    ("not-skipped", _lines(
        f"!(has(object.metadata.labels) && '{SKIP_LABEL}' in object.metadata.labels",
        f"&& object.metadata.labels['{SKIP_LABEL}'] == 'true')")),
    # A cost the pod arrives with is a person's (or a template's): it is kept.
    ("no-deletion-cost", _lines(
        "!(has(object.metadata.annotations)",
        f"&& '{DELETION_COST_ANNOTATION}' in object.metadata.annotations)")),
]


def admission_policy_objects(policy: Policy, namespace: str = "poolguard",
                             name: str = NAME) -> list[dict[str, Any]]:
    """The params ConfigMap, MutatingAdmissionPolicy and binding for `policy`.

    `namespace` is poolguard's own: the params live there, and pods there (like those in
    kube-system) are never mutated, as the webhooks never see them.
    """
    objects = [params_config_map(policy, namespace, name),
               _policy(namespace, name), _binding(policy, namespace, name)]
    for obj in objects:
        obj["metadata"]["labels"] = dict(LABELS)
    return objects


def params_config_map(policy: Policy, namespace: str, name: str) -> dict[str, Any]:
    """The pool-to-cost table as a ConfigMap (the admission policy's paramKind)."""
    data = {"poolLabel": policy.pool_label,
            "defaultDeletionCost": format_deletion_cost(policy.default_deletion_cost)}
    for pool in policy.pools:
        data[POOL_KEY_PREFIX + pool.name] = format_deletion_cost(pool.deletion_cost)
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace}, "data": data}


def _policy(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {
                "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                   "operations": ["CREATE"], "resources": ["pods"],
                                   "scope": "Namespaced"}],
                "namespaceSelector": {"matchExpressions": _excluded_namespaces(namespace)},
            },
            "matchConditions": [{"name": n, "expression": e} for n, e in _MATCH_CONDITIONS],
            "variables": [{"name": n, "expression": e} for n, e in _VARIABLES],
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": _MUTATION}}],
            # Pod creation never fails because of poolguard; the reconciler repairs misses.
            "failurePolicy": "Ignore",
            "reinvocationPolicy": "IfNeeded",
        },
    }


def _binding(policy: Policy, namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            # Without its table the policy does nothing (pods are created as they are).
            "paramRef": {"name": name, "namespace": namespace,
                         "parameterNotFoundAction": "Allow"},
            # The policy's own selectors: the namespaces and pods it governs.
            "matchResources": {"namespaceSelector": dict(policy.namespace_selector),
                               "objectSelector": dict(policy.pod_selector)},
        },
    }


def _excluded_namespaces(namespace: str) -> list[dict[str, Any]]:
    """kube-system, poolguard's namespace and skip-labelled namespaces, as on the webhooks."""
    return [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
             "values": ["kube-system", namespace]},
            {"key": SKIP_LABEL, "operator": "NotIn", "values": ["true"]}]
