"""Which comparator rule put a victim before a survivor, in a few words.

The rules are `ActivePodsWithRanks.Less`'s (pkg/controller/controller_utils.go), as
replicaset/active_pods_with_ranks.py ports them; `plan` gives each victim its rule.
"""

from __future__ import annotations

from .ranked_pod import RankedPod


def deciding_rule(victim: RankedPod, survivor: RankedPod) -> str:
    """In a few words, the first comparator rule that puts `victim` before `survivor`."""
    if bool(victim.node_name) != bool(survivor.node_name):
        return "not scheduled"
    if victim.phase_ordinal != survivor.phase_ordinal:
        return {0: "phase Pending", 1: "phase Unknown"}.get(victim.phase_ordinal, "phase")
    if victim.ready != survivor.ready:
        return "not ready"
    if victim.deletion_cost != survivor.deletion_cost:
        return f"deletion cost {victim.deletion_cost} < {survivor.deletion_cost}"
    if victim.rank != survivor.rank:
        return f"{victim.rank} related pods on its node > {survivor.rank}"
    return (f"tied with {survivor.name} on rules 1-5: age, restarts and the controller's "
            "order decide")

