"""The pool policy's scale-down rules judged on the pods the controllers really deleted: the
one judge every differential run shares (tests/e2e/test_differential*.py).

A rule is broken by real deletions as the core defines it (webhook/core/scale/
policy_verdict.py), over the pods plan saw (its document's `pods`, each with `protected`):

- protectedLast: a protected-pool pod was deleted while a pod of the workload outside
  protected pools (another pool, no pool, or unscheduled) survives;
- minProtectedReplicas: a protected-pool pod was deleted and fewer protected-pool pods
  are left than the rule requires at the target (a LeaderWorkerSet's replica is a group:
  the rule counts its pods).

A state is observed more than once (while the scale-down stalls, and after every pod is
healthy again): a rule broken at any observation is broken. Against plan's verdict:

- a missed denial: the real deletions broke a rule plan's verdict did not name (a
  mismatch: the webhook would have let these pods go);
- an over-denial: plan named a violation, yet no real deletion broke any rule (precision,
  not a failure: plan judges the worst case over what the controllers may do).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

PROTECTED_LAST = "protectedLast"
MIN_PROTECTED = "minProtectedReplicas"
OVER_DENIAL = "plan denied, the real deletions broke no rule"
MISSED_DENIAL = "plan allowed, the real deletions broke a rule"


@dataclass(frozen=True)
class ScaleDownRules:
    """The policy's scale-down rules, as the installed policy file sets them."""

    protected_last: bool = True
    min_protected_replicas: int | str = 0

    @classmethod
    def from_policy(cls, policy: Mapping[str, Any]) -> ScaleDownRules:
        """From a policy document (its `scaleDown`, the core's defaults where unset)."""
        scale_down = policy.get("scaleDown") or {}
        return cls(bool(scale_down.get("protectedLast", True)),
                   scale_down.get("minProtectedReplicas", 0))

    def required(self, pods: int) -> int:
        """Pods that must stay on protected pools when `pods` remain (percentages up)."""
        value = self.min_protected_replicas
        if isinstance(value, str):
            return math.ceil(pods * int(value.rstrip("%")) / 100)
        return int(value)


def broken_rules(document: Mapping[str, Any], deleted: set[str], rules: ScaleDownRules,
                 pods_per_replica: int = 1) -> list[str]:
    """The rules the pods in `deleted` broke, of the pods plan's `document` saw."""
    pods = document.get("pods") or []
    if not any(p["protected"] and p["name"] in deleted for p in pods):
        return []  # both rules are broken only by a protected pod going
    broken = []
    if rules.protected_last and any(not p["protected"] and p["name"] not in deleted
                                    for p in pods):
        broken.append(PROTECTED_LAST)
    remaining = sum(1 for p in pods if p["protected"] and p["name"] not in deleted)
    if remaining < rules.required(document["replicas"]["to"] * pods_per_replica):
        broken.append(MIN_PROTECTED)
    return broken


@dataclass
class RuleJudgement:
    """Plan's verdict against the rules the real deletions broke, at each observation."""

    denied: list[str]  # the rules plan's verdict named
    broken: dict[str, list[str]] = field(default_factory=dict)  # observation -> rules
    lost: dict[str, list[str]] = field(default_factory=dict)  # observation -> protected pods

    @property
    def missed(self) -> list[str]:
        """Rules the real deletions broke that plan did not name (in the rules' order)."""
        found = {rule for rules in self.broken.values() for rule in rules}
        return [r for r in (PROTECTED_LAST, MIN_PROTECTED) if r in found and r not in self.denied]

    @property
    def over_denied(self) -> bool:
        """Plan named a violation, and no observation's deletions broke any rule."""
        return bool(self.denied) and not any(self.broken.values())

    @property
    def problems(self) -> list[str]:
        """One line per missed rule: when it broke, and which protected pods went."""
        lines = []
        for rule in self.missed:
            when = [f"{name}: {', '.join(self.lost[name])} deleted"
                    for name, rules in self.broken.items() if rule in rules]
            lines.append(f"missed denial: plan allowed {rule}, the real deletions broke it "
                         f"({'; '.join(when)})")
        return lines

    @property
    def classes(self) -> list[str]:
        """The precision classes of this state (OVER_DENIAL, MISSED_DENIAL or none)."""
        return [name for name, flag in ((OVER_DENIAL, self.over_denied),
                                        (MISSED_DENIAL, bool(self.missed))) if flag]


def judge_rules(document: Mapping[str, Any], observations: Mapping[str, set[str]],
                rules: ScaleDownRules, pods_per_replica: int = 1) -> RuleJudgement:
    """Judge plan's verdict on the pods deleted at each observation (name -> deleted pods,
    e.g. "stalled" and "recovered"; each the pods of plan's document gone by then)."""
    judgement = RuleJudgement(denied=[v["rule"] for v in document["violations"]])
    protected = {p["name"] for p in document.get("pods") or [] if p["protected"]}
    for name, deleted in observations.items():
        judgement.broken[name] = broken_rules(document, deleted, rules, pods_per_replica)
        judgement.lost[name] = sorted(deleted & protected)
    return judgement


def per_kind(outcomes: Iterable[tuple[str, list[str]]]) -> dict[str, dict[str, int]]:
    """For each kind: its states, over-denials and missed denials, from (kind, classes)."""
    counts: dict[str, dict[str, int]] = {}
    for kind, classes in outcomes:
        each = counts.setdefault(kind, {"states": 0, "overDenials": 0, "missedDenials": 0})
        each["states"] += 1
        each["overDenials"] += OVER_DENIAL in classes
        each["missedDenials"] += MISSED_DENIAL in classes
    return dict(sorted(counts.items()))
