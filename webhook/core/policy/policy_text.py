"""A policy explained in plain words: what `python -m webhook policy check` prints.

Pure: it reads a validated Policy and returns lines of text. The words follow what the
code does (core/policy/policy.py, core/scale/policy_verdict.py), so a reviewer of a
ConfigMap change can read what the new policy will do without knowing its YAML.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .policy import Policy

ENFORCEMENT_WORDS = {
    "enforce": "a scale-down that breaks a rule is denied, with the reason and the fix",
    "warn": "a scale-down that breaks a rule is allowed, and whoever made it gets warnings "
            "with the fix",
    "dryrun": "a scale-down that breaks a rule is allowed silently; it is only recorded "
              "(audit annotations scale.poolguard.dev/verdict and /rules, metric "
              "poolguard_scale_violations_total)",
}


def explain_policy(policy: Policy) -> list[str]:
    """The policy as sentences, grouped: pools and costs, scope, scale-down rules, and the
    rebalance section when the file sets it."""
    lines = [*_pools(policy), "", *_scope(policy), "", *_rules(policy)]
    rebalance = _rebalance(policy)
    return [*lines, "", *rebalance] if rebalance else lines


def _rebalance(policy: Policy) -> list[str]:
    """The rebalance section in words, or nothing when it is left at its default."""
    section = policy.rebalance
    if not section.enabled and not section.priority_class_pools:
        return []
    state = "on" if section.enabled else "off"
    what = ("the reconciler holding the Lease moves settled overflow pods home, whole nodes "
            "at a time" if section.enabled else "nothing is moved; `rebalance --dry-run` shows "
            "the plan")
    lines = [f"Rebalance: {state}: {what} (docs/rebalance.md)."]
    for name, pool in sorted(section.priority_class_pools.items()):
        lines.append(f"  pods of PriorityClass {name} whose preferred node affinity names no "
                     f"pool belong in pool {pool}")
    return lines


def _pools(policy: Policy) -> list[str]:
    label = policy.pool_label
    width = max(len(pool.name) for pool in policy.pools)
    lines = [f"Pools, by the node label {label} (listed most protected first):"]
    # Protected pools first, then by deletion cost (a band by its top), highest first.
    ordered = sorted(policy.pools, key=lambda pool: (not pool.protected, -pool.deletion_cost))
    if ordered != list(policy.pools):
        lines.append(f"  (the policy lists them as {', '.join(p.name for p in policy.pools)}: "
                     "shown here most protected first; only their protection and deletion "
                     "costs decide what goes first, never the order of the list)")
    for pool in ordered:
        mark = "  protected" if pool.protected else ""
        if pool.consolidates:
            lines.append(f"  {pool.name:<{width}}  nodes with {label}={pool.name}: pods get a "
                         f"deletion cost in the band {pool.band.describe()}, ranked by how "
                         f"cheaply their node empties{mark}")
        else:
            lines.append(f"  {pool.name:<{width}}  nodes with {label}={pool.name}: pods get "
                         f"deletion cost {pool.deletion_cost}{mark}")
    lines.append(f"  other nodes (no {label} label, or an unlisted value): deletion cost "
                 f"{policy.default_deletion_cost}")
    lines += _bands(policy)
    groups = sorted({*(p.deletion_cost for p in policy.pools), policy.default_deletion_cost})
    if len(groups) > 1:
        named = [_names_with_cost(policy, cost) for cost in groups]
        lines.append("When a ReplicaSet shrinks, among pods otherwise alike, the lowest cost "
                     "goes first: " + ", then ".join(named) + ".")
    return lines


def _bands(policy: Policy) -> list[str]:
    """Each band, highest first, and what ranks inside the consolidating ones."""
    if not policy.consolidates:
        return []
    lines = ["Bands, highest first (no two share a value, so no rank can put a pool's pods "
             "before a less protected pool's):"]
    for band in sorted(policy.bands, key=lambda b: -b.high):
        name = band.pool if band.pool is not None else "other nodes"
        lines.append(f"  {name}: {band.describe()}")
    resources = ", ".join(policy.gpu_resources)
    lines.append("Inside a consolidating band, a pod's cost is lower the more cheaply its "
                 "node can be emptied by its own workload: nodes no other workload's pods hold "
                 "first, fewest of its pods first; nodes others hold next. Occupancy counts "
                 f"GPUs requested ({resources}); on nodes offering none, pods.")
    return lines


def _names_with_cost(policy: Policy, cost: int) -> str:
    pools = [p for p in policy.pools if p.deletion_cost == cost]
    names = [f"{p.name} pods" for p in pools]
    if cost == policy.default_deletion_cost:
        names.append("pods on other nodes")
    shown = pools[0].band.describe() if len(pools) == 1 and pools[0].consolidates else cost
    return f"{' and '.join(names)} ({shown})"


def _scope(policy: Policy) -> list[str]:
    # The policy cannot widen this: the webhook configurations' namespaceSelector and the
    # reconciler's exclusions leave these out whatever the policy selects.
    return [f"Governed namespaces: {_selector_words(policy.namespace_selector, 'namespaces')}, "
            "except kube-system and poolguard's own namespace (poolguard unless installed "
            "elsewhere), which the webhooks and the reconciler always skip.",
            f"Governed pods and workload templates: "
            f"{_selector_words(policy.pod_selector, 'pods')}."]


def _selector_words(selector: Mapping[str, Any], things: str) -> str:
    if not selector:
        return f"all {things} (the selector is empty)"
    terms = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for expr in selector.get("matchExpressions") or []:
        key, operator = expr["key"], expr["operator"]
        values = ", ".join(expr.get("values") or [])
        terms.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                      "Exists": f"{key} is set", "DoesNotExist": f"{key} is not set"}[operator])
    return f"{things} whose labels match {' and '.join(terms)}" if terms else f"all {things}"


AUTOSCALER_WORDS = {
    "clamp": "lowered to the smallest safe replica count (never below what they asked "
             "for); the next sync goes the rest of the way once it is safe",
    "enforce": "denied when they break a rule, as people's",
    "warn": "allowed with warnings when they break a rule",
    "dryrun": "allowed silently when they break a rule; only recorded",
}


def _autoscalers(policy: Policy) -> list[str]:
    autoscalers = policy.scale_down.autoscalers
    if not autoscalers.users:
        return ["  autoscalers: none listed; every requester is judged the same way."]
    return [f"  autoscalers (enforcement: {autoscalers.enforcement}): scale-downs by "
            + ", ".join(autoscalers.users)
            + f" are {AUTOSCALER_WORDS[autoscalers.enforcement]}."]


GITOPS_WORDS = {
    "clamp": "lowered to the smallest safe replica count; the tool then sees the live count "
             "differ from Git (drift) until that count is safe",
    "enforce": "denied when they break a rule, as people's; the tool retries the refused "
               "sync",
    "warn": "allowed with warnings when they break a rule, so that a sync never fails on "
            "them",
    "dryrun": "allowed silently when they break a rule; only recorded",
}


def _git_ops(policy: Policy) -> list[str]:
    git_ops = policy.scale_down.git_ops
    if not git_ops.users:
        return ["  GitOps controllers: none listed; Argo CD's and Flux's syncs are judged as "
                "people's."]
    return [f"  GitOps controllers (enforcement: {git_ops.enforcement}): scale-downs by "
            + ", ".join(git_ops.users) + f" are {GITOPS_WORDS[git_ops.enforcement]}."]


def _rules(policy: Policy) -> list[str]:
    scale = policy.scale_down
    protected = policy.protected_pool_names
    lines = [f"Scale-downs (enforcement: {scale.enforcement}): "
             f"{ENFORCEMENT_WORDS[scale.enforcement]}."]
    if not protected:
        lines.append("  No pool is protected, so no scale-down rule can be broken: only the "
                     "deletion costs steer which pods go.")
        return lines
    pools = " and ".join(protected)
    if scale.protected_last:
        lines.append(f"  protectedLast: a scale-down must not remove a pod on {pools} while a "
                     "pod of the same workload outside the protected pools survives.")
    else:
        lines.append("  protectedLast: off.")
    minimum = scale.min_protected_replicas
    if isinstance(minimum, str):
        lines.append(f"  minProtectedReplicas: a scale-down that removes pods on {pools} must "
                     f"leave at least {minimum} of the new replica count there (rounded up).")
    elif minimum:
        lines.append(f"  minProtectedReplicas: a scale-down that removes pods on {pools} must "
                     f"leave at least {minimum} pod{'s' if minimum != 1 else ''} there.")
    else:
        lines.append("  minProtectedReplicas: 0, no minimum.")
    lines.extend(_autoscalers(policy))
    lines.extend(_git_ops(policy))
    if scale.exempt_users:
        lines.append("  Never checked: updates by " + ", ".join(scale.exempt_users) +
                     " (rollouts shrinking old ReplicaSets).")
    return lines
