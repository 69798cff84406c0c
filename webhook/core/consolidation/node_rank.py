"""A pod's place inside its pool's band: how cheaply its node can be emptied.

The ReplicaSet controller deletes lower costs first (rule 4), among the pods that
rules 1-3 leave tied (scheduled, Running, ready: the steady state). Inside one cost it
deletes from the node with more related pods first and then by ready time, restarts
and age, which scatters the victims over nodes. So in a pool that consolidates, the cost
itself orders the nodes, and the key is chosen so that for every k the k cheapest pods of
one workload free as many nodes as any k of its pods could:

- a node can be freed by a scale-down of workload W only when every pod holding it (see
  `node_occupancy`) belongs to W; freeing it costs as many deletions as W has pods there.
  Taking such nodes cheapest first frees the most nodes for any number of deletions (the
  k smallest prices fit in k whenever any m prices do), so those nodes come first,
  ordered by W's count of pods on them;
- nodes that another workload's pods also hold come next: this scale-down cannot free
  them;
- W's pods that hold nothing on their node (no GPU on a GPU node) come last: deleting
  them frees nothing;
- nodes with the same count must not interleave, or the controller's later rules would
  take one pod from each; each node gets its own value inside its slot, a hash of its
  name, so the order needs no numbering of the cluster and a change on one node moves
  only that node's pods.

Layout, from the band's low end: SLOTS slots of `spacing = width // SLOTS` values; slot
c-1 for freeable nodes holding c pods of W (counts above RANK_COUNTS share the last
such slot), then the slot of nodes others hold, then the slot of pods that hold nothing;
inside a slot, the node's hash modulo `spacing`. Two nodes whose hashes meet in the same
slot can interleave (with the default band width, about one pair in 32 million).
"""

from __future__ import annotations

import hashlib

from ..policy.pool_bands import RANK_COUNTS, SLOTS, Band
from .node_occupancy import NodeLoad

SHARED_SLOT = RANK_COUNTS  # nodes another workload also holds
IDLE_SLOT = RANK_COUNTS + 1  # the workload's pods that hold nothing on their node


def node_slot(load: NodeLoad, owner: str) -> int:
    """Which slot `owner`'s pods on this node take (lower slots are deleted first)."""
    mine, others = load.holders(owner)
    if not mine:
        return IDLE_SLOT
    if others:
        return SHARED_SLOT
    return min(mine, RANK_COUNTS) - 1


def node_tie_break(node: str, spacing: int) -> int:
    """The node's value inside a slot: stable across processes and restarts."""
    digest = hashlib.sha256(node.encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:8], "big") % spacing


def ranked_cost(band: Band, load: NodeLoad, owner: str) -> int:
    """The cost of `owner`'s pods on the node of `load`, inside `band`.

    A band too narrow for the slots (fewer than SLOTS values) cannot rank: its pods get
    the band's top, as a flat pool's do."""
    spacing = band.width // SLOTS
    if spacing < 1:
        return band.high
    return band.low + node_slot(load, owner) * spacing + node_tie_break(load.node, spacing)
