"""Pods tied with the cut: which of them go is not knowable, only how many.

Go sorts with the unstable `sort.Sort` over an informer list whose order we cannot see,
so pods that tie with the cut on the comparator's rules 1-5 are reported as uncertain
rather than pretended away; a victim in such a group is not certain.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ranked_pod import RankedPod


@dataclass
class TieGroup:
    """Pods tied with the cut on rules 1-5: `removed` of them go, which ones is not knowable.

    Members that are also `blocked` in the prediction are not counted in `removed` (it
    counts what goes without waiting); they go too once the controller stops waiting.

    `why` says why the members may go when it is not such a tie (a race between
    controllers whose outcome decides whether they go at all)."""

    members: list[RankedPod]
    removed: int
    why: str | None = None


def possible_victims(victims: list[RankedPod], tie_groups: list[TieGroup]) -> list[RankedPod]:
    """Members of the tie groups that are not predicted victims."""
    victim_ids = {id(p) for p in victims}
    return [p for g in tie_groups for p in g.members if id(p) not in victim_ids]


def is_certain(victim: RankedPod, tie_groups: list[TieGroup]) -> bool:
    """No other pod may go in this victim's place: it is in no tie group of which only
    some members go (a group whose members may all go, a race's, keeps it certain)."""
    return not any(g.removed < len(g.members) and any(p is victim for p in g.members)
                   for g in tie_groups)

