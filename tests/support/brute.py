"""Brute force over the controllers' unknowable choices, for tests of the sound models."""

from __future__ import annotations

import itertools
from typing import Any


def tie_breaks(deletion: Any) -> list[frozenset[str]]:
    """Every victim set of one sync the comparator's unknowable tie-breaking can produce.

    `deletion` is one sync's prediction: at most one tie group, at its cut.
    """
    if not deletion.tie_groups:
        return [frozenset(p.name for p in deletion.victims)]
    (group,) = deletion.tie_groups
    members = {p.name for p in group.members}
    sure = frozenset(p.name for p in deletion.victims if p.name not in members)
    return [sure | frozenset(chosen)
            for chosen in itertools.combinations(sorted(members), group.removed)]
