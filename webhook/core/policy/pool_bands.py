"""Deletion-cost bands: the int32 values each pool's pods may carry, and how they nest.

A pool with flat costs has a band of one value, its `deletionCost`. A pool that
consolidates nodes owns the `bandWidth` values that end at its `deletionCost`:

    [deletionCost - bandWidth + 1, deletionCost]

and each of its pods carries a value inside that band that says how cheaply its node can be
emptied (see `node_rank`). The ReplicaSet controller deletes lower costs first, so bands
are what keeps the pool order independent of the ranks: when every value of a more
protected band is above every value of a less protected one, no rank, fresh or stale,
can put a protected pod before an unprotected one. Bands must therefore never share a
value; the policy parser refuses overlapping bands.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..objects.deletion_cost import INT32_MIN

CONSOLIDATE_NODES = "nodes"
CONSOLIDATE_NONE = "none"
CONSOLIDATE_MODES = (CONSOLIDATE_NODES, CONSOLIDATE_NONE)
# Wide enough that nodes with equal counts rarely share a tie-break value (see node_rank).
DEFAULT_BAND_WIDTH = 1 << 30
# A consolidating band is cut into SLOTS slots of node ranks (see node_rank): one per count
# of a workload's pods on a node up to RANK_COUNTS, one for nodes another workload also
# holds, one for pods that hold nothing. A band needs a value per slot to rank at all, so
# the policy refuses a narrower one.
RANK_COUNTS = 31  # pod counts told apart on one node; GPU nodes hold at most 8 or 16
SLOTS = RANK_COUNTS + 2


@dataclass(frozen=True)
class Band:
    """The costs one pool's pods may carry; `pool` None is the default (unlisted pools)."""

    pool: str | None
    low: int
    high: int
    protected: bool = False

    @property
    def width(self) -> int:
        return self.high - self.low + 1

    def overlaps(self, other: Band) -> bool:
        return self.low <= other.high and other.low <= self.high

    @property
    def where(self) -> str:
        return "defaultDeletionCost" if self.pool is None else f"pool {self.pool!r}"

    def describe(self) -> str:
        """`[low, high]`, or the single value of a flat band."""
        return str(self.high) if self.width == 1 else f"[{self.low}, {self.high}]"


def band_of(pool: str | None, top: int, width: int, protected: bool = False) -> Band:
    """The band of `width` values ending at `top`; ValueError when it leaves int32."""
    low = top - width + 1
    if width < 1 or low < INT32_MIN:
        raise ValueError(f"a band of {width} values below {top} leaves the int32 range "
                         f"(its lowest value would be {low}, the minimum is {INT32_MIN})")
    return Band(pool, low, top, protected)


def band_conflict(bands: list[Band]) -> str:
    """Why `bands` cannot be used together, or "" when they can.

    A consolidating band (more than one value) may share no value with any other band,
    and every protected band must lie wholly above every unprotected one it meets. Flat
    bands keep the long-standing rule (a protected cost at least an unprotected one),
    checked elsewhere, so that policies without consolidation load as before.
    """
    for index, band in enumerate(bands):
        for other in bands[index + 1:]:
            if band.width == 1 and other.width == 1:
                continue
            if band.overlaps(other):
                return (f"the band of {band.where} {band.describe()} overlaps the band of "
                        f"{other.where} {other.describe()}; bands must not share a value")
            for high, low in ((band, other), (other, band)):
                if high.protected and not low.protected and high.low < low.high:
                    return (f"the band of protected {high.where} {high.describe()} is below "
                            f"the band of {low.where} {low.describe()}; protected bands "
                            "must be above every unprotected one")
    return ""
