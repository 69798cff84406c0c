"""Judging a predicted scale-down against the pool policy, on the worst case."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from itertools import compress
from operator import attrgetter, not_
from typing import Any

from ..kinds.registry import BY_KIND
from ..model.prediction import ScalePrediction
from ..model.ranked_pod import RankedPod
from ..policy.policy import Policy
from ..policy.scale_down_policy import ScaleDownPolicy

RULE_PROTECTED_LAST = "protectedLast"
RULE_MIN_PROTECTED = "minProtectedReplicas"
PREDICTED, WORST_CASE = "predicted", "worst case"
_MAX_NAMED = 5

NodeLookup = Callable[[str], Mapping[str, Any] | None]


@dataclass
class Violation:
    """A policy rule the scale-down breaks: what breaks it, and how to scale without."""

    rule: str
    problem: str
    # Which outcome decided: PREDICTED (the predicted victims), or WORST_CASE (of the pods
    # that may go, the ones the rule likes least to lose: `worst_case_victims`), then
    # `worst_case` says what it took, in words (plan shows it; a warning has no room).
    outcome: str = "predicted"
    worst_case: str = ""
    # Each a thing to do now, or what to wait for: set by `assess_scale`, which knows the
    # safe replica count.
    fixes: list[str] = field(default_factory=list)

    @property
    def fix(self) -> str:
        """The options of the fix as one clause."""
        return "; or ".join(self.fixes)

    @property
    def message(self) -> str:
        """The problem and its fix, as one sentence (a denial's message)."""
        return self.problem + fix_clause(self.fixes)


def fix_clause(fixes: list[str]) -> str:
    """What a violation's message adds to its problem: its fix's options as one clause
    (empty without any)."""
    fix = "; or ".join(fixes)
    return f"; fix: {fix}" if fix else ""


@dataclass
class PolicyVerdict:
    """The policy's answer: `allowed` already reflects the enforcement mode."""

    allowed: bool
    enforcement: str
    violations: list[Violation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # The smallest count at or above the target that breaks no rule (`safeReplicas`).
    safe_replicas: int | None = None
    # What a fix names: the protected-pool pods the worst case deletes, and the pods
    # outside protected pools that survive it.
    lost_protected: list[RankedPod] = field(default_factory=list)
    kept_outside: list[RankedPod] = field(default_factory=list)


@dataclass(frozen=True)
class PodPlacement:
    """Where a pod runs, in the policy's terms."""

    node: str
    pool: str | None
    protected: bool


def placement(policy: Policy, node_lookup: NodeLookup, pod: RankedPod) -> PodPlacement:
    node = node_lookup(pod.node_name) if pod.node_name else None
    pool = policy.pool_of_node(node)
    return PodPlacement(pod.node_name, pool, bool(pod.node_name) and policy.is_protected(pool))


def placements(policy: Policy, node_lookup: NodeLookup) -> Callable[[RankedPod], PodPlacement]:
    """`placement` for many pods, looked up once per node (pods share nodes)."""
    by_node: dict[str, PodPlacement] = {}

    def place(pod: RankedPod) -> PodPlacement:
        node = pod.node_name
        found = by_node.get(node)
        if found is None:
            found = by_node[node] = placement(policy, node_lookup, pod)
        return found
    return place


class Protection(dict[str, bool]):
    """Does a pod run on a protected pool? Decided once per node name (pods share nodes)."""

    def __init__(self, policy: Policy, node_lookup: NodeLookup) -> None:
        super().__init__()
        self.policy, self.node_lookup = policy, node_lookup
        self._last: tuple[list[RankedPod], int, list[bool]] | None = None

    def __missing__(self, node_name: str) -> bool:
        node = self.node_lookup(node_name) if node_name else None
        found = self[node_name] = bool(node_name) and self.policy.is_protected(
            self.policy.pool_of_node(node))
        return found

    def __call__(self, pod: RankedPod) -> bool:
        return self[pod.facts.node_name]

    def flags(self, pods: list[RankedPod]) -> list[bool]:
        """`self(pod)` for each pod, at C speed once every node is known.

        The flags of the longest list asked about are kept: the verdict and the safe
        replica count both read the prediction's whole order.
        """
        last = self._last
        if last is not None and last[0] is pods and last[1] == len(pods):
            return last[2]
        flags = list(map(self.__getitem__, map(_NODE_NAME, pods)))
        if last is None or len(pods) >= last[1]:  # keep the longest: the whole order
            self._last = (pods, len(pods), flags)
        return flags


_NODE_NAME = attrgetter("facts.node_name")
_COST = attrgetter("facts.deletion_cost")


def protection(policy: Policy, node_lookup: NodeLookup) -> Protection:
    """A predicate: does this pod run on a protected pool? (Decided once per node.)"""
    return Protection(policy, node_lookup)


def worst_case_victims(prediction: ScalePrediction,
                       is_protected: Callable[[RankedPod], bool]) -> list[RankedPod]:
    """The pods gone in the outcome each rule likes least, and the blocked pods that go
    once the controller stops waiting.

    The predicted victims go. Of a tie group of which exactly `removed` go, protected
    members go first. Of a group whose members may all go (a race between controllers,
    a rolling update that recreates them as its replacements become ready), every
    protected member goes and every other member stays: for protectedLast the worst
    case (a protected pod lost while others survive), for minProtectedReplicas as bad
    as any (it counts only protected pods). In a tie of exactly `removed`, taking
    protected members first leaves a member outside protected pools whenever one is
    tied, so one outcome is the worst for both rules there too.
    """
    if prediction.blocked:
        return [*worst_case_victims(replace(prediction, blocked=[]), is_protected),
                *(b.pod for b in prediction.blocked)]
    if not prediction.tie_groups:
        return list(prediction.victims)
    uncertain = {id(p) for g in prediction.tie_groups for p in g.members}
    worst = [p for p in prediction.victims if id(p) not in uncertain]
    predicted: set[int] | None = None
    for group in prediction.tie_groups:
        members = group.members
        flags = (is_protected.flags(members) if isinstance(is_protected, Protection)
                 else list(map(is_protected, members)))
        if group.removed >= len(members):
            if predicted is None:
                predicted = set(map(id, prediction.victims))
            worst.extend(p for p, flag in zip(members, flags, strict=True)
                         if flag or id(p) in predicted)
            continue
        # Protected members first, each side in the group's order (a stable partition).
        protected_first = (list(compress(members, flags))
                           + list(compress(members, map(not_, flags))))
        worst.extend(protected_first[: group.removed])
    return worst


def protected_kept(prediction: ScalePrediction, protected: Protection) -> tuple[int, int]:
    """(left, all): the pods on protected pools left in the worst case (the blocked pods
    gone too), what minProtectedReplicas counts, and all of them before the scale-down."""
    everyone = [*prediction.victims, *(b.pod for b in prediction.blocked),
                *prediction.survivors]
    total = sum(protected.flags(everyone))
    return total - sum(protected.flags(worst_case_victims(prediction, protected))), total


def evaluate(policy: Policy, prediction: ScalePrediction, node_lookup: NodeLookup,
             protected: Protection | None = None) -> PolicyVerdict:
    """Judge `prediction`: violations name victims, rule and fix; enforcement sets `allowed`.

    `protected`: the pool lookup to use (and share with later reads of the prediction).
    """
    if prediction.blocked:
        return _evaluate_stalling(policy, prediction, node_lookup, protected)
    rules = policy.scale_down
    verdict = PolicyVerdict(allowed=True, enforcement=rules.enforcement,
                      warnings=list(prediction.notes))
    if not prediction.victims and not prediction.possible_victims:
        return verdict  # nothing goes, not even in the worst case
    place = placements(policy, node_lookup)
    if protected is None:
        protected = protection(policy, node_lookup)
    worst = worst_case_victims(prediction, protected)
    everyone = _everyone(prediction)
    flags = protected.flags(everyone)
    lost_protected = list(compress(worst, protected.flags(worst)))
    surviving_other: list[RankedPod] = []
    certain = True
    if lost_protected:  # only a verdict that loses protected pods names the others
        worst_ids = set(map(id, worst))
        surviving_other = [p for p, flag in zip(everyone, flags, strict=True)
                           if not flag and id(p) not in worst_ids]
        certain = set(map(id, prediction.victims)) == worst_ids
    # Where the worst case is not the predicted outcome, or keeps possible victims outside
    # protected pools that protectedLast then counts as survivors, say which decided.
    chosen = bool(lost_protected) and (not certain or not all(
        protected.flags(prediction.possible_victims)))
    outcome = WORST_CASE if chosen else PREDICTED
    judged_on = _worst_case_text(prediction, worst, protected) if chosen else ""

    def describe(pod: RankedPod) -> str:
        where = place(pod)
        return f"{pod.name} (node {where.node or '<none>'}, pool {where.pool or '<none>'})"

    if rules.protected_last and lost_protected and surviving_other:
        verb = "would delete" if certain else "may delete"
        verdict.violations.append(Violation(RULE_PROTECTED_LAST, (
            f"{verb} protected-pool pod{_s(lost_protected)} {_names(lost_protected, describe)} "
            f"while {_names(surviving_other, describe)} outside protected pools "
            f"survive{'s' if len(surviving_other) == 1 else ''}"
        ), outcome=outcome, worst_case=judged_on))
    protected_total = sum(flags)
    required = rules.required_protected(_counted_replicas(prediction))
    remaining = protected_total - len(lost_protected)
    if lost_protected and remaining < required:
        verdict.violations.append(Violation(RULE_MIN_PROTECTED, (
            f"leaves {remaining} pod{_s(range(remaining))} on protected pools "
            f"({', '.join(policy.protected_pool_names) or 'none'}); "
            f"minProtectedReplicas requires {_required_text(rules, prediction)}; "
            f"it removes {_names(lost_protected, describe)}"
        ), outcome=outcome, worst_case=judged_on))
    elif remaining < required:
        verdict.warnings.append(
            f"only {remaining} pod{_s(range(remaining))} run on protected pools, fewer than the "
            f"{required} that minProtectedReplicas asks for; this scale-down removes none of them"
        )
    if verdict.violations:
        verdict.allowed = rules.enforcement != "enforce"
        verdict.lost_protected, verdict.kept_outside = lost_protected, surviving_other
        if BY_KIND[prediction.kind].deletion_cost:  # else it plays no part
            # A victim its controller chose by its own rule (a reason) no cost spares.
            ranked = [p for p in lost_protected if p.name not in prediction.reasons]
            _add_cost_hint(verdict, ranked, surviving_other, describe)
    return verdict


def _evaluate_stalling(policy: Policy, prediction: ScalePrediction, node_lookup: NodeLookup,
                       protected: Protection | None) -> PolicyVerdict:
    """Judge a scale-down that can stall: its end state (the blocked pods gone too) and
    the state it waits in (only the pods deleted without waiting gone), which lasts as
    long as the pod it waits on stays as it is."""
    waiting = [b.pod for b in prediction.blocked]
    # A tie's `removed` counts its members deleted without waiting: its blocked ones go too.
    blocked_ids = set(map(id, waiting))
    end_ties = [replace(g, removed=g.removed + sum(id(p) in blocked_ids for p in g.members))
                for g in prediction.tie_groups]
    end = replace(prediction, victims=[*prediction.victims, *waiting], blocked=[],
                  tie_groups=end_ties)
    verdict = evaluate(policy, end, node_lookup, protected)
    stalled = replace(prediction, survivors=[*waiting, *prediction.survivors], blocked=[],
                      notes=[])
    judged = {v.rule for v in verdict.violations}
    wait = prediction.blocked[0].wait
    for violation in evaluate(policy, stalled, node_lookup, protected).violations:
        if violation.rule not in judged:
            verdict.violations.append(Violation(violation.rule, (
                f"while the scale-down waits on {wait.on}, it "
                f"{violation.problem}"), outcome=violation.outcome,
                worst_case=violation.worst_case))
    if verdict.violations:
        verdict.allowed = policy.scale_down.enforcement != "enforce"
    return verdict


def _worst_case_text(prediction: ScalePrediction, worst: list[RankedPod],
                     protected: Protection) -> str:
    """Which outcome decided, in words: of the pods that may or may not go (possible
    victims, victims tied with them), how many the worst case takes and keeps."""
    worst_ids = set(map(id, worst))
    tied = {id(p) for g in prediction.tie_groups if g.removed < len(g.members)
            for p in g.members}
    undecided = [*prediction.possible_victims, *(p for p in prediction.victims if id(p) in tied)]
    counts: dict[tuple[bool, bool], int] = {}
    for pod, flag in zip(undecided, protected.flags(undecided), strict=True):
        key = (id(pod) in worst_ids, flag)
        counts[key] = counts.get(key, 0) + 1
    words = [((True, True), "on protected pools", "go", "es"),
             ((True, False), "outside them", "go", "es", " too (a tie removes that many)"),
             ((False, False), "outside protected pools", "stay", "s"),
             ((False, True), "more on protected pools", "stay", "s",
              " (a tie removes no more)")]
    parts = []
    for key, where, verb, ending, *why in words:
        count = counts.get(key, 0)
        if count:
            parts.append(f"{count} {where} {verb + ending if count == 1 else verb}"
                         + "".join(why))
    return "of the pods that may or may not go, " + ", ".join(parts)


def _everyone(prediction: ScalePrediction) -> list[RankedPod]:
    """Victims then survivors: the prediction's order when it is exactly that list."""
    order = prediction.order
    if order is not None and len(order) == len(prediction.victims) + len(
            prediction.survivors):
        return order
    return prediction.victims + prediction.survivors


def _counted_replicas(prediction: ScalePrediction) -> int:
    """The pods minProtectedReplicas counts at the target: a LeaderWorkerSet's replica is a
    group, and the rule counts each of its pods."""
    return prediction.to_replicas * prediction.pods_per_replica


def _required_text(rules: ScaleDownPolicy, prediction: ScalePrediction) -> str:
    """How many pods minProtectedReplicas asks for at the target, and why, in words."""
    replicas = _counted_replicas(prediction)
    required = rules.required_protected(replicas)
    value = rules.min_protected_replicas
    units = f"{BY_KIND[prediction.kind].unit}s"  # what a replica of several pods is called
    if isinstance(value, str) and prediction.pods_per_replica != 1:
        return (f"{required} ({value} of the {replicas} pods of {prediction.to_replicas} "
                f"{units} of {prediction.pods_per_replica}, rounded up)")
    if isinstance(value, str):
        return f"{required} ({value} of {replicas} replicas, rounded up)"
    if required > replicas and prediction.pods_per_replica != 1:
        return (f"{required}, more than the {replicas} pods of the {prediction.to_replicas} "
                f"{units} asked for, so a scale to that count that removes a protected pod "
                "always breaks it")
    if required > replicas:
        return (f"{required}, more than the {replicas} replicas asked for, "
                f"so a scale below {required} that removes a protected pod always breaks it")
    return str(required)


def _add_cost_hint(verdict: PolicyVerdict, lost: list[RankedPod], kept: list[RankedPod],
                   describe: Callable[[RankedPod], str]) -> None:
    """Name the surviving pods whose cost does not put them ahead of the protected victims."""
    if not lost or not kept:
        return
    cheapest_lost = min(p.deletion_cost for p in lost)
    blocking = [p for p, cost in zip(kept, map(_COST, kept), strict=True)
                if cost >= cheapest_lost]
    by_hand = [p for p in blocking if p.facts.cost_by_hand and not p.facts.cost_writer]
    stale = [p for p in blocking if not p.facts.cost_by_hand]
    for writer in sorted({p.facts.cost_writer for p in blocking} - {""}):
        verdict.warnings.append(
            f"{_names([p for p in blocking if p.facts.cost_writer == writer], describe)}: "
            f"deletion cost written by {writer} (another controller owns the annotation), "
            f"not below the protected victims' {cheapest_lost}; poolguard does not overwrite "
            "it: see docs/install.md \"Other writers of the deletion cost\""
        )
    if by_hand:
        verdict.warnings.append(
            f"{_names(by_hand, describe)}: deletion cost set by hand (no poolguard marker), "
            f"not below the protected victims' {cheapest_lost}; poolguard keeps such values: "
            "lower or remove the annotation"
        )
    if stale:
        verdict.warnings.append(
            f"{_names(stale, describe)}: deletion cost not below the protected victims' "
            f"{cheapest_lost}; run 'python -m webhook reconcile' or check that the mutating "
            "webhook sets their cost"
        )


def _names(pods: list[RankedPod], describe: Callable[[RankedPod], str]) -> str:
    shown = ", ".join(describe(p) for p in pods[:_MAX_NAMED])
    extra = len(pods) - _MAX_NAMED
    return shown + (f" and {extra} more" if extra > 0 else "")


def _s(items: Any) -> str:
    return "" if len(items) == 1 else "s"
