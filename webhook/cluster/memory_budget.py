"""Whether the container's memory limit holds the caches: the sizing model and the check.

Pure: the container's figures are read at the edge (cgroup.py) and passed in.

What is counted: the kernel charges the container's cgroup for every page of every
process in it once, so the figure compared with the limit is the container's working
set (the cgroup's usage less its inactive file pages, what the kubelet evicts and
reports by), not one process's resident size. `serve` runs a gunicorn master and
`--workers` workers; each worker keeps its own watch caches, so the caches count once
per worker. The cache holds every pod of the cluster, compacted (no managedFields, only
the fields poolguard reads), plus nodes, namespaces and the workload objects, which are
few beside the pods. The figures below are docs/performance.md "Sizing".
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 2**20
PODS_PER_UNIT = 10_000  # the sizing table's unit

# The share of the limit past which the check warns: the initial list and a relist after
# a watch expired briefly hold a page of decoded objects on top of the cache, and the
# kernel kills at the limit, not near it.
WARN_SHARE = 0.9


@dataclass(frozen=True)
class Footprint:
    """Memory of one component: `fixed` for the container, `per_cache` for each process
    that keeps a cache, and `per_10k_pods` for each cache per 10,000 pods (bytes)."""

    fixed: int
    per_cache: int
    per_10k_pods: int

    def need(self, pods: int, caches: int = 1) -> int:
        """Bytes the container needs with `caches` caches of `pods` pods each."""
        return self.fixed + caches * (self.per_cache + pods * self.per_10k_pods // PODS_PER_UNIT)

    def pods_within(self, limit: int, caches: int = 1) -> int:
        """The most pods whose need stays within WARN_SHARE of `limit` (0 if none)."""
        room = int(limit * WARN_SHARE) - self.fixed - caches * self.per_cache
        return max(room * PODS_PER_UNIT // (caches * self.per_10k_pods), 0)


# `serve`: the gunicorn master (fixed) and each worker with empty caches (per_cache).
# The chart's "poolguard.resources" (charts/poolguard/templates/_helpers.tpl) holds the
# same figures.
SERVE = Footprint(fixed=50 * MIB, per_cache=45 * MIB, per_10k_pods=60 * MIB)
# The reconciler: one process, one cache (pods, nodes and namespaces only).
RECONCILER = Footprint(fixed=0, per_cache=60 * MIB, per_10k_pods=60 * MIB)


@dataclass(frozen=True)
class MemoryCheck:
    """The check's answer: `warning` is None when the limit holds the caches."""

    limit: int | None  # bytes; None: no limit set, or none could be read
    used: int | None  # the container's working set, bytes
    projected: int  # what the caches of `pods` pods need, bytes
    pods: int
    warning: str | None

    @property
    def ok(self) -> bool:
        """True when there is nothing to warn about."""
        return self.warning is None


def check_memory(footprint: Footprint, limit: int | None, used: int | None, pods: int,
                 caches: int = 1) -> MemoryCheck:
    """Judge the container's memory `limit` against its working set `used` and against
    what `caches` caches of `pods` pods need by the sizing table."""
    projected = footprint.need(pods, caches)
    warning = None
    if limit is not None:
        bound = limit * WARN_SHARE
        holders = f"{caches} caches of them need" if caches > 1 else "their cache needs"
        if projected > bound:
            warning = (f"the memory limit {_mib(limit)} is too low for {pods:,} pods: "
                       f"{holders} about {_mib(projected)} with the processes "
                       f"(docs/performance.md#sizing), over {WARN_SHARE:.0%} of the limit; "
                       "raise it, or the container is OOM-killed and poolguard fails open")
        elif used is not None and used > bound:
            warning = (f"the container uses {_mib(used)} of its {_mib(limit)} memory limit, "
                       f"over {WARN_SHARE:.0%}; raise the limit (docs/performance.md#sizing), "
                       "or the container is OOM-killed and poolguard fails open")
    return MemoryCheck(limit=limit, used=used, projected=projected, pods=pods, warning=warning)


def _mib(size: int) -> str:
    return f"{size / MIB:,.0f} MiB"
