"""What the workload-kind registry implies for the deploy files: admission and RBAC rules.

The apps/v1 kinds are always served, so they share one rule per API group (their `/scale`
subresources, then the objects, as the API server lists them); a custom resource gets
rules of its own, so that the chart can switch each off (`scaleCheck.kinds`) and a rule
for a CRD that is not installed matches nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from webhook.core.kinds.registry import KINDS
from webhook.core.kinds.registry import WorkloadKind as Kind

Fields = tuple[tuple[str, "tuple[str, ...] | str"], ...]


@dataclass(frozen=True)
class Rule:
    """One rule of a webhook or a role, as its fields in order; `switch` is the chart's
    `scaleCheck.kinds` value that guards it (None: always there)."""

    fields: Fields
    switch: str | None = None


def _by_group(kinds: Iterable[Kind]) -> dict[tuple[str, str], list[Kind]]:
    """The kinds by (API group, version), in registry order."""
    groups: dict[tuple[str, str], list[Kind]] = {}
    for kind in kinds:
        groups.setdefault(_group_version(kind), []).append(kind)
    return groups


def _group_version(kind: Kind) -> tuple[str, str]:
    group, _, version = kind.resource.api_version.rpartition("/")
    return group, version


def _scope(kinds: Sequence[Kind]) -> str:
    scopes = {kind.resource.namespaced for kind in kinds}
    return "*" if len(scopes) > 1 else "Namespaced" if True in scopes else "Cluster"


def _admission(group: str, version: str, operations: tuple[str, ...],
               resources: Sequence[str], scope: str, switch: str | None = None) -> Rule:
    return Rule((("apiGroups", (group,)), ("apiVersions", (version,)),
                 ("operations", operations), ("resources", tuple(resources)),
                 ("scope", scope)), switch)


def scale_rules(kinds: Sequence[Kind] = KINDS) -> list[Rule]:
    """The rules that send every kind's replica updates (the object and its `/scale`) to
    the scale check and the clamp."""
    rules = []
    for (group, version), members in _by_group(k for k in kinds if not k.custom).items():
        plurals = [kind.plural for kind in members]
        rules.append(_admission(group, version, ("UPDATE",), [f"{p}/scale" for p in plurals],
                                _scope(members)))
        rules.append(_admission(group, version, ("UPDATE",), plurals, _scope(members)))
    for kind in kinds:
        if kind.custom:
            group, version = _group_version(kind)
            rules.append(_admission(group, version, ("UPDATE",),
                                    [kind.plural, f"{kind.plural}/scale"], _scope([kind]),
                                    kind.chart_switch))
    return rules


def template_rules(kinds: Sequence[Kind] = KINDS) -> list[Rule]:
    """The rules that send the kinds whose pod template the API server validates to the
    template check, at creation and update."""
    return [_admission(group, version, ("CREATE", "UPDATE"), [k.plural for k in members],
                       _scope(members))
            for (group, version), members in _by_group(
                k for k in kinds if k.template_validated).items()]


def _children(kind: Kind, kinds: Sequence[Kind]) -> list[Kind]:
    """The kinds of `kinds` whose replicas `kind`'s controller writes."""
    by_name = {known.kind: known for known in kinds}
    children = []
    for name in kind.sizes:
        child = by_name.get(name)
        if child is None:
            raise ValueError(f"{kind.kind} sizes {name}, which is not a registered kind: "
                             "its resource is unknown")
        children.append(child)
    return children


def read_rules(verbs: tuple[str, ...], kinds: Sequence[Kind] = KINDS) -> list[Rule]:
    """The RBAC rules to read every kind and the children its controller sizes with
    `verbs`: one per API group of the always-served kinds, one per custom resource (with
    those of its children no other rule grants)."""
    granted: set[tuple[str, str]] = set()
    rules = []
    served = [k for k in kinds if not k.custom]
    for (group, _), members in _by_group(
            [*served, *(c for k in served for c in _children(k, kinds))]).items():
        plurals = list(dict.fromkeys(kind.plural for kind in members))
        granted.update((group, plural) for plural in plurals)
        rules.append(Rule((("apiGroups", (group,)), ("resources", tuple(plurals)),
                           ("verbs", verbs))))
    for kind in kinds:
        if not kind.custom:
            continue
        for (group, _), members in _by_group([kind, *_children(kind, kinds)]).items():
            plurals = [k.plural for k in members if (group, k.plural) not in granted]
            if plurals:
                rules.append(Rule((("apiGroups", (group,)), ("resources", tuple(plurals)),
                                   ("verbs", verbs)), kind.chart_switch))
    return rules


def chart_switches(kinds: Sequence[Kind] = KINDS) -> list[tuple[str, str]]:
    """The chart's `scaleCheck.kinds` switches: (value name, what it is), one per custom
    resource."""
    return [(kind.chart_switch, f"{kind.resource.api_version} {kind.kind}")
            for kind in kinds if kind.custom]
