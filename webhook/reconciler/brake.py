"""The brake on mass rewrites: pure, from the pods and what each needs.

A policy mistake (a `poolLabel` no node carries, a protected pool mistyped) changes the
cost of every pod of a pool at once: the reconciler would rewrite every inference pod's
cost from 1000 to the default 0, and restoring the policy afterwards leaves a cluster
whose costs were wrong in between. So in one full pass the reconciler rewrites at most a
share (`--max-rewrite-percent`, default 20%, and at least one) of the costs it manages
(pods carrying `poolguard.dev/managed-deletion-cost`); above it, it holds every such
rewrite, says why, and waits for the policy to be fixed or the rewrites to be confirmed by
naming the policy's generation (`--accept-rewrites`, docs/reconciler.md). Not rewrites: a first cost
(a pod poolguard never costed) and a rank moving inside its pool's band (consolidation).
A rank move keeps the node's place inside its slot (node_rank's tie-break); a band that
moved because the pool's `deletionCost` or `bandWidth` changed shifts it, so that is a
rewrite, though the old cost may still lie inside the new band.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.objects.deletion_cost import MANAGED_COST_ANNOTATION, POOL_ANNOTATION
from ..core.objects.kube import Obj, annotations_of
from ..core.policy.policy import Policy
from ..core.policy.pool_bands import SLOTS, Band
from .decide import PATCH, PodNeed

DEFAULT_SHARE = 0.2
MIN_ALLOWED = 1  # one pod's cost is never a mass rewrite, however small the cluster
REWRITES_HELD = "rewrites-held"  # the skip reason of a held write
BUILT_IN = "built-in"  # the generation of the built-in policy (no file)


def policy_generation(path: str | None) -> str:
    """The policy file's generation: the first 12 hex digits of its sha256, what
    `sha256sum policy.yaml` prints first."""
    if path is None:
        return BUILT_IN
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:12]
    except OSError:
        return "unreadable"


def manages(pod: Obj) -> bool:
    """Does `pod` carry a cost poolguard wrote?"""
    return MANAGED_COST_ANNOTATION in annotations_of(pod)


def rewrites(policy: Policy, pod: Obj, need: PodNeed) -> bool:
    """Would writing `need` change a cost poolguard manages, other than a rank moving
    inside the band of the pool the pod is recorded in?"""
    if need.outcome != PATCH or need.decision is None or not manages(pod):
        return False
    annotations = annotations_of(pod)
    pool = policy.pool_by_name(need.decision.pool)
    if annotations.get(POOL_ANNOTATION) != need.decision.pool or pool is None:
        return True
    try:
        before = int(annotations[MANAGED_COST_ANNOTATION])
    except ValueError:
        return True
    after = need.decision.cost
    return not (pool.consolidates and after is not None
                and pool.band.low <= before <= pool.band.high
                and same_node_place(pool.band, before, after))


def same_node_place(band: Band, before: int, after: int) -> bool:
    """Do two costs of `band` keep the node's tie-break (node_rank), as a rank move
    does? A band moved by other than a whole number of slots does not."""
    spacing = band.width // SLOTS
    return spacing >= 1 and (before - band.low) % spacing == (after - band.low) % spacing


@dataclass(frozen=True)
class PassCount:
    """A full pass's pods: those whose cost poolguard manages, and those it would rewrite."""

    managed: int
    rewritten: int
    to_pools: tuple[tuple[str, int], ...]  # where they would go: (pool, count)

    def words(self) -> str:
        shown = ", ".join(f"{count} to {pool}" for pool, count in self.to_pools)
        return (f"{self.rewritten} of the {self.managed} deletion costs it manages would be "
                f"rewritten ({shown})")


def count_pass(policy: Policy, needs: Iterable[tuple[Obj, PodNeed]]) -> PassCount:
    """How many pods of a pass poolguard manages and would rewrite, and to which pools."""
    managed, to_pools = 0, {}
    for pod, need in needs:
        managed += manages(pod)
        if rewrites(policy, pod, need):
            assert need.decision is not None
            listed = policy.pool_by_name(need.decision.pool) is not None
            where = (f"pool {need.decision.pool}" if listed
                     else f"defaultDeletionCost {policy.default_deletion_cost}")
            to_pools[where] = to_pools.get(where, 0) + 1
    return PassCount(managed, sum(to_pools.values()), tuple(sorted(to_pools.items())))


def brake_reason(count: PassCount, share: float, generation: str,
                 accepted: str | None) -> str | None:
    """Why the pass's rewrites are held, in words; None when they may go."""
    allowed = max(math.floor(count.managed * share), MIN_ALLOWED)
    if count.rewritten <= allowed or accepted == generation:
        return None
    return (f"{count.words()}, over the {share:.0%} bound ({allowed}): holding them for "
            f"policy generation {generation}; fix the policy, or confirm with "
            f"--accept-rewrites {generation} (the chart's reconciler.acceptRewrites)")
