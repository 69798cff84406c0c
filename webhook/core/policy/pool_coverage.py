"""The policy checked against the nodes it governs: which nodes each pool matches.

A policy can be valid and still name nothing in the cluster: a `poolLabel` no node
carries (`node.pool` where the nodes carry `node.usage`), a protected pool spelled
otherwise than its nodes' label (`inferense`). Under such a policy every pod gets the
default cost and no pod is on a protected pool, so every scale-down looks safe and the
reconciler rewrites every cost: poolguard is off without a word. This module finds those
mistakes from the nodes' labels alone (pure: no I/O); `policy check`, `plan`, `serve`'s
policy reloads and the reconciler report or refuse on its findings.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..objects.kube import labels_of, name_of
from .policy import Policy

# What is wrong, as a stable word (metrics labels, JSON); `disarms`: the finding leaves
# protected pods unprotected (their scale-downs unchecked, their costs rewritten).
NO_NODES = "no-nodes"
NO_POOL_LABEL = "no-pool-label"
EMPTY_PROTECTED_POOL = "empty-protected-pool"
EMPTY_POOL = "empty-pool"
UNLISTED_VALUE = "unlisted-pool-value"


@dataclass(frozen=True)
class Finding:
    """One thing the nodes say about the policy, in words."""

    problem: str
    subject: str  # the pool, label or label value it is about
    message: str
    disarms: bool = False

    @property
    def key(self) -> tuple[str, str]:
        """What it is about, whatever the words (to compare two policies' findings)."""
        return self.problem, self.subject


@dataclass(frozen=True)
class PoolCoverage:
    """The nodes each pool of a policy matches, and what is wrong."""

    pool_label: str
    node_count: int
    nodes_by_pool: Mapping[str, tuple[str, ...]]  # every pool, in the policy's order
    unlisted_values: Mapping[str, int]  # a label value naming no pool -> its nodes
    unlabelled: int  # nodes without the pool label
    findings: tuple[Finding, ...]

    @property
    def disarmed(self) -> bool:
        """Does a finding leave the protected pools (or every pool) without nodes?"""
        return any(finding.disarms for finding in self.findings)

    @property
    def disarming(self) -> list[Finding]:
        """The findings that leave protected pools without nodes."""
        return [finding for finding in self.findings if finding.disarms]


def pool_coverage(policy: Policy, nodes: Iterable[Mapping[str, Any]]) -> PoolCoverage:
    """Which nodes each pool of `policy` matches among `nodes`, and what is wrong."""
    node_list = list(nodes)
    label = policy.pool_label
    members: dict[str, list[str]] = {pool.name: [] for pool in policy.pools}
    unlisted_counts: Counter[str] = Counter()
    unlabelled = 0
    for node in node_list:  # one pass: a large cluster's nodes are read once
        value = labels_of(node).get(label)
        if value is None:
            unlabelled += 1
        elif value in members:
            members[value].append(name_of(node))
        else:
            unlisted_counts[value] += 1
    by_pool = {name: tuple(sorted(names)) for name, names in members.items()}
    unlisted = dict(sorted(unlisted_counts.items()))
    findings = _findings(policy, node_list, by_pool, unlisted)
    return PoolCoverage(label, len(node_list), by_pool, unlisted, unlabelled, tuple(findings))


def _findings(policy: Policy, nodes: list[Mapping[str, Any]],
              by_pool: Mapping[str, tuple[str, ...]],
              unlisted: Mapping[str, int]) -> list[Finding]:
    label = policy.pool_label
    if not nodes:
        return [Finding(NO_NODES, "", "there are no nodes to check the policy against")]
    if not any(by_pool.values()) and not unlisted:
        return [Finding(NO_POOL_LABEL, label, f"no node carries the pool label {label}: every pod "
                        f"gets defaultDeletionCost {policy.default_deletion_cost} and no pod "
                        f"is on a protected pool; {pool_like_labels(policy, nodes)}",
                        disarms=True)]
    findings = []
    for pool in policy.pools:
        if by_pool[pool.name]:
            continue
        hint = _close_value(pool.name, unlisted)
        empty = f"has no node (no node carries {label}={pool.name})"
        if pool.protected:
            findings.append(Finding(
                EMPTY_PROTECTED_POOL, pool.name, f"protected pool {pool.name!r} {empty}, so "
                f"nothing is protected there{hint}", disarms=True))
        else:
            findings.append(Finding(EMPTY_POOL, pool.name, f"pool {pool.name!r} {empty}{hint}"))
    for value, count in unlisted.items():
        findings.append(Finding(
            UNLISTED_VALUE, value, f"{_nodes(count)} {'carry' if count != 1 else 'carries'} "
            f"{label}={value}, which names no pool: their pods get defaultDeletionCost "
            f"{policy.default_deletion_cost}"))
    return findings


def pool_like_labels(policy: Policy, nodes: Iterable[Mapping[str, Any]]) -> str:
    """The node labels whose values name pools of `policy`, in words (what `poolLabel`
    was probably meant to be)."""
    names = {pool.name for pool in policy.pools}
    matches: dict[str, Counter[str]] = {}
    for node in nodes:
        for key, value in labels_of(node).items():
            if value in names:
                matches.setdefault(key, Counter())[value] += 1
    if not matches:
        return (f"no node label has a value that names a pool "
                f"({', '.join(sorted(names))})")
    ranked = sorted(matches.items(), key=lambda item: (-sum(item[1].values()), item[0]))
    shown = "; ".join(f"{key} ({_values(values)})" for key, values in ranked)
    return f"node labels whose values name pools: {shown}"


def _values(values: Counter[str]) -> str:
    return ", ".join(f"{value} on {_nodes(count)}" for value, count in sorted(values.items()))


def _close_value(name: str, unlisted: Mapping[str, int]) -> str:
    """`; did you mean VALUE?` for a label value spelled like `name`, else ""."""
    close = difflib.get_close_matches(name, list(unlisted), n=1, cutoff=0.75)
    if not close:
        return ""
    count = unlisted[close[0]]
    verb = "carries" if count == 1 else "carry"
    return f"; {_nodes(count)} {verb} {close[0]!r}, which names no pool: a typo?"


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"


def coverage_lines(coverage: PoolCoverage, shown: int = 5) -> list[str]:
    """Each pool's nodes (the first `shown` named), then the nodes in no pool."""
    width = max([len(name) for name in coverage.nodes_by_pool] + [len("other nodes")])
    lines = []
    for pool, names in coverage.nodes_by_pool.items():
        listed = ", ".join(names[:shown]) + (f" and {len(names) - shown} more"
                                             if len(names) > shown else "")
        lines.append(f"  {pool:<{width}}  {_nodes(len(names))}" + (f": {listed}" if names
                                                                     else ""))
    others = [f"{value} on {_nodes(count)}" for value, count in coverage.unlisted_values.items()]
    if coverage.unlabelled:
        others.append(f"{_nodes(coverage.unlabelled)} without {coverage.pool_label}")
    outside = sum(coverage.unlisted_values.values()) + coverage.unlabelled
    lines.append(f"  {'other nodes':<{width}}  {_nodes(outside)}"
                 + (f" ({'; '.join(others)})" if others else ""))
    return lines
