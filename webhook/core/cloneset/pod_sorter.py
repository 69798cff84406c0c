"""Which pods a CloneSet deletes first: a port of OpenKruise's pod_sorter.go.

Source: github.com/openkruise/kruise v1.8.0, pkg/controller/cloneset/utils/pod_sorter.go
(`ActivePodsWithRanks.Less`, `NewSameNodeRanker`, `getDeletionCostFromPodAnnotations`).
It is Kubernetes' ReplicaSet comparator of before the log buckets, with availability:

  1. unscheduled before scheduled; 2. phase Pending < Unknown < Running (others as Pending);
  3. not available before available (`IsPodAvailable` with the CloneSet's minReadySeconds),
     then not ready before ready; 4. lower `controller.kubernetes.io/pod-deletion-cost`
     first (invalid = 0); 5. higher rank first; 6. both ready: the zero ready time first,
     else the later; 7. more restarts (regular containers only) first; 8. the zero
     creation time first, else the newer. Equal on all: Less is false both ways.

Unlike the ReplicaSet's rules 6 and 8 (log2 buckets, then the UID) these compare exact
times, so the rules are one lexicographic key (`sort_key`): the order is a strict weak
order and only pods equal on every rule are left to the unstable `sort.Sort` and the
informer's list order.

The rank (`NewSameNodeRanker`) is computed among the pods being chosen from (one revision
group): on each node with more than one of them, the pods are sorted by the comparator
without ranks or availability, and the i-th of n gets rank n-1-i (the last, the one the
node keeps longest, gets 0; so does every pod alone on its node or unscheduled). Pods tied
in that sort on one node receive their ranks in an order nobody can see: they are
interchangeable (`same_node_ranks` returns them as classes).

With `topologySpreadConstraints` in the template the controller ranks by topology
(`NewSpreadConstraintsRanker`, reading nodes' labels); that ranker is not ported: the
prediction then treats rules 5-8 as unknown (see `scale_sync`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

from .cloneset_pod import CloneSetPod

Key = tuple[int, ...]
_NEVER_READY: Key = (0, 0)


def _time_key(time_ns: int | None) -> Key:
    """afterOrZero as a key: the zero time first, else the later time first."""
    return (0, 0) if time_ns is None else (1, -time_ns)


def inner_key(pod: CloneSetPod) -> Key:
    """The comparator without a ranker and without availability (what the same-node
    ranker sorts a node's pods by)."""
    facts = pod.facts
    ready_time = _time_key(facts.ready_time_ns) if facts.ready else _NEVER_READY
    return (bool(facts.node_name), facts.phase_ordinal, facts.ready, facts.deletion_cost,
            *ready_time, -facts.restarts, *_time_key(facts.created_ns))


def sort_key(pod: CloneSetPod, rank: int, available: bool) -> Key:
    """`ActivePodsWithRanks.Less` as one key, smaller deleted first."""
    facts = pod.facts
    ready_time = _time_key(facts.ready_time_ns) if facts.ready else _NEVER_READY
    return (bool(facts.node_name), facts.phase_ordinal, available, facts.ready,
            facts.deletion_cost, -rank, *ready_time, -facts.restarts,
            *_time_key(facts.created_ns))


def less(a: CloneSetPod, b: CloneSetPod, rank_a: int, rank_b: int,
         available: Callable[[CloneSetPod], bool] | None) -> bool:
    """`ActivePodsWithRanks.Less(a, b)`, rule by rule as Go writes it (the specification
    `sort_key` is tested against); `available` None is a nil AvailableFunc."""
    fa, fb = a.facts, b.facts
    if fa.node_name != fb.node_name and (not fa.node_name or not fb.node_name):
        return not fa.node_name
    if fa.phase_ordinal != fb.phase_ordinal:
        return fa.phase_ordinal < fb.phase_ordinal
    if available is not None and available(a) != available(b):
        return not available(a)
    if fa.ready != fb.ready:
        return not fa.ready
    if fa.deletion_cost != fb.deletion_cost:
        return fa.deletion_cost < fb.deletion_cost
    if rank_a != rank_b:
        return rank_a > rank_b
    if fa.ready and fb.ready and fa.ready_time_ns != fb.ready_time_ns:
        return _after_or_zero(fa.ready_time_ns, fb.ready_time_ns)
    if fa.restarts != fb.restarts:
        return fa.restarts > fb.restarts
    if fa.created_ns != fb.created_ns:
        return _after_or_zero(fa.created_ns, fb.created_ns)
    return False


def _after_or_zero(t1: int | None, t2: int | None) -> bool:
    if t1 is None or t2 is None:
        return t1 is None
    return t1 > t2


def same_node_ranks(pods: Sequence[CloneSetPod]
                    ) -> tuple[dict[int, int], list[list[CloneSetPod]]]:
    """NewSameNodeRanker: (id(pod) -> rank for the pods with one, the classes of pods on
    one node that tie in the ranker's sort: which of them gets which rank is not knowable).

    Within a class the ranks given here follow the pods' names, one of the possible ways.
    """
    on_node: dict[str, list[CloneSetPod]] = defaultdict(list)
    for pod in pods:
        if pod.facts.node_name:
            on_node[pod.facts.node_name].append(pod)
    ranks: dict[int, int] = {}
    classes: list[list[CloneSetPod]] = []
    for node_pods in on_node.values():
        if len(node_pods) <= 1:
            continue
        ordered = sorted(node_pods, key=lambda p: (inner_key(p), p.name))
        last = len(ordered) - 1
        for index, pod in enumerate(ordered[:last]):
            ranks[id(pod)] = last - index
        tied: dict[Key, list[CloneSetPod]] = defaultdict(list)
        for pod in ordered:
            tied[inner_key(pod)].append(pod)
        classes.extend(members for members in tied.values() if len(members) > 1)
    return ranks, classes
