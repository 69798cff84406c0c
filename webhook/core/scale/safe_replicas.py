"""Predict and judge a scale in one call, with the smallest replica count that is safe now."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from itertools import compress
from operator import attrgetter
from typing import Any

from ..kinds.registry import BY_KIND
from ..model.burst_replicas import BURST_REPLICAS
from ..model.fix_facts import FixFacts
from ..model.prediction import ScalePrediction
from ..model.ranked_pod import RankedPod
from ..model.units import POSSIBLE_VICTIM, SURVIVES
from ..policy.policy import Policy
from ..view.cluster import ClusterView
from .policy_verdict import (
    RULE_PROTECTED_LAST,
    PolicyVerdict,
    Protection,
    evaluate,
    protected_kept,
    protection,
    worst_case_victims,
)
from .predict import predict_scale

_NODE_NAME = attrgetter("facts.node_name")
# The most counts the webhook's quick check re-predicts one by one for a fix's safe count.
_QUICK_COUNTS = 64


@dataclass
class JudgedScale:
    """A scale's prediction and the policy's verdict on it, with the safe count and fix."""

    prediction: ScalePrediction
    verdict: PolicyVerdict


def assess_scale(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                 to_replicas: int, now_ns: int | None, quick: bool = False,
                 burst: int = BURST_REPLICAS) -> JudgedScale:
    """Predict the victims of scaling `workload` to `to_replicas` and judge them.

    The safe replica count (`smallest_allowed_replicas`) comes with every verdict, except
    with `quick` (the webhook, inside the API server's timeout): then only for a
    violation's fix, and only when one prediction gives it (one ReplicaSet or a
    StatefulSet shrinks, and the safe part of the order fits in one sync); otherwise it
    would take a dozen re-predictions, and the fix points to `plan` instead.
    """
    prediction = predict_scale(view, workload, to_replicas, now_ns, burst)
    protected = protection(policy, view.node)
    verdict = evaluate(policy, prediction, view.node, protected)
    one_prediction = prediction.prefix_order is not None or prediction.units is not None
    if not quick or (verdict.violations and one_prediction):
        verdict.safe_replicas = smallest_allowed_replicas(
            view, policy, workload, (prediction, verdict), now_ns, protected, burst, quick)
    if verdict.violations:
        fixes = fix_options(FixFacts(prediction, verdict.safe_replicas, verdict.lost_protected,
                                     verdict.kept_outside, _pool_cost(policy, view)))
        for violation in verdict.violations:
            violation.fixes = fixes
    return JudgedScale(prediction, verdict)


def _pool_cost(policy: Policy, view: ClusterView) -> Callable[[RankedPod], int]:
    """The cost the policy gives a pod's pool (a consolidating pool: the top of its band).

    Looked up once per node: a fix may ask it of thousands of surviving pods.
    """
    @cache
    def node_cost(node_name: str) -> int:
        return policy.cost_for_pool(policy.pool_of_node(view.node(node_name)))

    return lambda pod: node_cost(pod.node_name)


def removes_protected(view: ClusterView, policy: Policy, prediction: ScalePrediction) -> bool:
    """True when the worst case of `prediction` deletes a pod on a protected pool."""
    protected = protection(policy, view.node)
    return any(protected(p) for p in worst_case_victims(prediction, protected))


def smallest_allowed_replicas(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                              judged: tuple[ScalePrediction, PolicyVerdict],
                              now_ns: int | None, protected: Protection | None = None,
                              burst: int = BURST_REPLICAS, quick: bool = False) -> int | None:
    """The smallest replica count at or above the target that the policy allows now
    (`safeReplicas`, the count a clamp writes and a fix names): the target when its
    verdict (`judged`) has no violation, at most the current count (keeping it is no
    scale-down). None with `quick` when finding it would take re-predictions.

    The counts the policy allows need not be contiguous: protectedLast allows a scale
    that leaves no pod outside protected pools, and a percentage in minProtectedReplicas
    asks for more protected pods as the count grows. Kinds deleted by ordinal or index
    (StatefulSets, LeaderWorkerSets) are asked count by count. For the others, what is
    monotone (as `_search_safe_replicas` assumes), fewer replicas
    never sparing a pod that more replicas delete: below the floor (the lowest count
    that removes no protected pod, `smallest_safe_replicas`) a protected pod is lost, a
    pod outside protected pools that survives one count survives every higher one, and
    the protected pods left grow with the count. So above a count that protectedLast
    denies, only the floor is allowed; above one that minProtectedReplicas alone denies,
    the next candidate is the first count that keeps the protected pods the next count
    asks for, found by bisection, and so on upwards.
    """
    prediction, verdict = judged
    to = prediction.to_replicas
    top = max(to, prediction.from_replicas)
    if not verdict.violations or to >= top:
        return to
    if protected is None:
        protected = protection(policy, view.node)
    floor = smallest_safe_replicas(view, policy, workload, prediction, now_ns, protected,
                                   burst, quick)
    if floor is None:
        return None
    high = floor if to < floor < top else top
    search = _Search(view, policy, workload, now_ns, burst, protected)
    if not BY_KIND[prediction.kind].deletion_cost:
        # Deleted by ordinal or group index: a prediction per count is cheap, and a stall
        # breaks the monotony (a count whose first deletion waits deletes nothing until
        # then, where a lower count deletes at once): ask the verdict at each count.
        if quick and high - to > _QUICK_COUNTS:
            return None
        return next((n for n in range(to + 1, high) if not search.violations(n)), high)
    count, violations = to, verdict.violations
    while count < high:
        if any(v.rule == RULE_PROTECTED_LAST for v in violations):
            return high
        if quick:
            return None  # the bisection below re-predicts
        need = policy.scale_down.required_protected((count + 1) * prediction.pods_per_replica)
        count = search.first_keeping(need, count, high)
        if count < high:
            violations = search.violations(count)
            if not violations:
                return count
    return high


class _Search:
    """Re-predictions of one workload's scale at other counts, for the bisections."""

    def __init__(self, view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                 now_ns: int | None, burst: int, protected: Protection) -> None:
        self.view, self.policy, self.workload = view, policy, workload
        self.now_ns, self.burst, self.protected = now_ns, burst, protected

    def predict(self, count: int) -> ScalePrediction:
        return predict_scale(self.view, self.workload, count, self.now_ns, self.burst)

    def violations(self, count: int) -> list[Any]:
        """The rules the scale to `count` breaks, as the verdict judges them."""
        return evaluate(self.policy, self.predict(count), self.view.node,
                        self.protected).violations

    def first_keeping(self, need: int, unsafe: int, high: int) -> int:
        """The lowest count above `unsafe` whose worst case leaves `need` protected pods,
        or loses none; `high` when none below it does (the pods left grow with the count)."""
        while high - unsafe > 1:
            middle = (unsafe + high) // 2
            left, total = protected_kept(self.predict(middle), self.protected)
            if left >= need or left == total:
                high = middle
            else:
                unsafe = middle
        return high


def smallest_safe_replicas(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                           prediction: ScalePrediction, now_ns: int | None,
                           protected: Protection | None = None, burst: int = BURST_REPLICAS,
                           quick: bool = False) -> int | None:
    """The lowest replica count whose scale-down removes no protected-pool pod now.

    Whatever the requested count: 0 when no pod runs on a protected pool, the number of
    active pods when even one deletion could take a protected pod (for a LeaderWorkerSet,
    counted in groups). None with `quick` when finding it would take re-predictions.
    Over several syncs of one ReplicaSet it is the lowest such count for the verdict,
    which reads the same every-chain bound (`prefix_chain`), not for every real chain.
    """
    if protected is None:
        protected = protection(policy, view.node)
    if prediction.units is not None:
        return _safe_units_at_their_count(view, workload, prediction, now_ns, burst,
                                          protected)
    if prediction.prefix_order is None:
        return None if quick else _search_safe_replicas(
            view, policy, workload, now_ns, burst,
            -1, len(prediction.victims) + len(prediction.survivors))
    order, chain = prediction.prefix_order, prediction.prefix_chain
    prefix = _safe_prefix_length(order, protected, BY_KIND[prediction.kind].deletion_cost)
    if prefix <= burst or chain is None:
        return len(order) - prefix  # deleted in one sync (or by ordinal): the prefix goes
    # More than one sync's worth: each sync's unknowable tie-breaking moves the next
    # syncs' ranks, so the safe prefix is only an upper bound. One sync's worth is safe;
    # beyond it, the most deletions whose every-chain group holds no protected pod (that
    # group grows with the deletions, and the groups before it lie within the prefix).
    flags = _protected_flags(order, protected)
    highest: dict[int, int] = {}  # per group start: the highest rank of a protected pod

    def some_chain_reaches_protected(removed: int) -> bool:
        cut = chain.cut(removed)
        if cut is None:
            return False
        start, end, lowest = cut
        if start not in highest:
            protected_here = compress(order[start:end], flags[start:end])
            highest[start] = max(map(chain.per_node.__getitem__,
                                     map(_NODE_NAME, protected_here)), default=-1)
        return highest[start] >= lowest

    safe, unsafe = burst, prefix + 1
    while unsafe - safe > 1:
        middle = (safe + unsafe) // 2
        if some_chain_reaches_protected(middle):
            unsafe = middle
        else:
            safe = middle
    return len(order) - safe


def _safe_units_at_their_count(view: ClusterView, workload: Mapping[str, Any],
                               prediction: ScalePrediction, now_ns: int | None, burst: int,
                               protected: Protection) -> int:
    """`_safe_units`, confirmed at the count it gives: a unit the target removes may be
    one a rolling update recreates when it is kept, which only the prediction at that
    count says (units are predicted without ranking: a few re-predictions are cheap)."""
    ceiling = max(prediction.from_replicas, prediction.to_replicas)
    safe = _safe_units(prediction, protected)
    while prediction.to_replicas != safe < ceiling:
        prediction = predict_scale(view, workload, safe, now_ns, burst)
        safe = max(safe, _safe_units(prediction, protected))
    return safe


def _safe_units(prediction: ScalePrediction, protected: Protection) -> int:
    """Whole units (a LeaderWorkerSet's groups) go, highest index first, so the count that
    keeps every unit with a pod on a protected pool (at most the current count: a surge
    unit above it goes whatever the count). A protected unit that a rolling update under
    way may recreate is a possible victim at every lower count, so only the current is safe.
    A protected unit above the target that survives it (a surge the controller keeps for
    as long as a rollout partition holds) is safe at the target; what a lower count would
    keep is not predicted, so the target is the count given then."""
    assert prediction.units is not None
    ceiling = max(prediction.from_replicas, prediction.to_replicas)
    protected_units = [unit for unit in prediction.units
                       if any(_protected_flags(unit.pods, protected))]
    if any(unit.fate == POSSIBLE_VICTIM for unit in protected_units):
        return ceiling
    kept_above = {id(unit) for unit in protected_units
                  if unit.fate == SURVIVES and unit.index >= prediction.to_replicas}
    highest = max((unit.index for unit in protected_units if id(unit) not in kept_above),
                  default=-1)
    floor = prediction.to_replicas if kept_above else 0
    return min(max(highest + 1, floor), ceiling)


def _safe_prefix_length(order: list[Any], protected: Any, ranked: bool) -> int:
    """How many pods from the front of `order` go before one could be protected.

    A cut inside a group tied on rules 1-5 may take any member of the group, so the
    safe prefix ends where the group of the first protected pod begins. An order by
    ordinal (not `ranked` by the ReplicaSet rules) has no ties.
    """
    flags = _protected_flags(order, protected)
    first = flags.index(True) if True in flags else len(order)
    if not ranked or first == len(order):
        return first
    key = order[first].key_rules_1_to_5
    while first > 0 and order[first - 1].key_rules_1_to_5 == key:
        first -= 1
    return first


def _protected_flags(order: list[Any], protected: Any) -> list[bool]:
    return (protected.flags(order) if isinstance(protected, Protection)
            else list(map(protected, order)))


def _search_safe_replicas(view: ClusterView, policy: Policy, workload: Mapping[str, Any],
                          now_ns: int | None, burst: int, unsafe: int, safe: int) -> int:
    """Binary search over re-predictions between a count known to be unsafe (or -1) and
    one known to be safe, for rollouts and multi-sync scale-downs.

    Fewer replicas never spare a pod that more replicas delete, so the boundary between
    safe and unsafe counts is found in O(log n) predictions; the answer is always a
    count that was judged safe.
    """
    while safe - unsafe > 1:
        middle = (unsafe + safe) // 2
        if removes_protected(view, policy,
                             predict_scale(view, workload, middle, now_ns, burst)):
            unsafe = middle
        else:
            safe = middle
    return safe


def fix_options(facts: FixFacts) -> list[str]:
    """A violation's fix: the safe count (or where `plan` gives it), then the kind's own
    options; when none is left, that only keeping the count helps for now."""
    prediction, safe = facts.prediction, facts.safe_replicas
    kind = BY_KIND[prediction.kind]
    options = []
    if safe is None:
        options.append(f"scale to the smallest replica count above {prediction.to_replicas} "
                       f"that breaks no rule, which 'python -m webhook plan --workload "
                       f"{prediction.kind.lower()}/{prediction.namespace}/{prediction.name} "
                       f"--replicas {prediction.to_replicas}' names")
    elif prediction.to_replicas < safe < prediction.from_replicas:
        # Not "or more": a count between it and the current one may break a rule again.
        options.append(f"scale to {safe} {_units(kind.unit, safe)} for now (the smallest "
                       f"count above {prediction.to_replicas} that breaks no rule)")
    options.extend(kind.fix(facts))
    if not options:
        options.append(f"nothing lowers {facts.workload} safely now: keep its "
                       f"{prediction.from_replicas} {_units(kind.unit, prediction.from_replicas)}"
                       " until fewer of its pods run on protected pools")
    return options


def _units(unit: str, count: int) -> str:
    """`replicas` for pods (as `kubectl scale` says), `groups` for groups."""
    word = "replica" if unit == "pod" else unit
    return word if count == 1 else word + "s"
