"""Pure parts of `make bench-scale` (bench/bench_scale.py): its settings from the
environment, the cluster it builds, and quantiles from Prometheus histograms.

No I/O here, so tests/bench/test_scale_plan.py checks it in milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

# The e2e setup's pools and their proportions (tests/e2e/harness.NODES is 3:3:2).
POOL_SHARES = {"inference": 3, "hybrid": 3, "training": 2}
PODS_PER_NODE_MAX = 60  # fake nodes allow 110; leave room for uneven spreading
DEPLOYMENT_SIZE = 1_000  # pods per Deployment beside the big one
TEAM_NAMESPACES = 10
BIG_NAMESPACE, BIG_NAME = "serving", "big"
# What each other Deployment may run on, in turn: an inference service (inference, spilling
# into hybrid), a training job pinned to its pool (cost known at create), anything.
PLACEMENTS: tuple[tuple[str, ...] | None, ...] = (("inference", "hybrid"), ("training",), None)


class SettingsError(ValueError):
    """An environment variable of bench-scale is out of bounds; the message names it."""


@dataclass(frozen=True)
class Settings:
    """How big and how long: BENCH_SCALE_PODS, _NODES, _BIG, _TIMEOUT (seconds)."""

    pods: int = 30_000
    nodes: int = 1_000
    big: int = 5_000  # the Deployment whose scale-down is checked
    timeout: float = 2_400.0  # the whole run, control plane start to teardown

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read the BENCH_SCALE_* variables; SettingsError names a bad one."""
        defaults = cls()
        values = {field: _positive_int(environ, f"BENCH_SCALE_{field.upper()}",
                                       getattr(defaults, field))
                  for field in ("pods", "nodes", "big", "timeout")}
        settings = cls(pods=values["pods"], nodes=values["nodes"],
                       big=min(values["big"], values["pods"]), timeout=float(values["timeout"]))
        settings.check()
        return settings

    def check(self) -> None:
        if self.nodes < len(POOL_SHARES) * 2:
            raise SettingsError(f"BENCH_SCALE_NODES={self.nodes}: at least "
                                f"{len(POOL_SHARES) * 2} (two nodes per pool)")
        if self.pods > self.nodes * PODS_PER_NODE_MAX:
            raise SettingsError(
                f"BENCH_SCALE_PODS={self.pods}: more than {PODS_PER_NODE_MAX} per node on "
                f"{self.nodes} nodes; raise BENCH_SCALE_NODES to at least "
                f"{math.ceil(self.pods / PODS_PER_NODE_MAX)}")
        if self.timeout < 300:
            raise SettingsError(f"BENCH_SCALE_TIMEOUT={self.timeout:.0f}: at least 300 "
                                "seconds (the control plane alone takes about a minute)")


def _positive_int(environ: Mapping[str, str], name: str, default: int | float) -> int:
    text = environ.get(name, "").strip().replace("_", "").replace(",", "")
    if not text:
        return int(default)
    try:
        value = int(text)
    except ValueError:
        raise SettingsError(f"{name}={environ[name]!r}: not a whole number") from None
    if value < 1:
        raise SettingsError(f"{name}={value}: must be 1 or more")
    return value


def node_pools(nodes: int) -> dict[str, int]:
    """How many nodes each pool gets: two each, the rest in the e2e proportions; the counts
    add up to `nodes` (at least six)."""
    total, spread = sum(POOL_SHARES.values()), nodes - 2 * len(POOL_SHARES)
    counts = {pool: 2 + spread * share // total for pool, share in POOL_SHARES.items()}
    for pool in list(POOL_SHARES)[: nodes - sum(counts.values())]:
        counts[pool] += 1  # the remainder goes to the most protected pools first
    return counts


@dataclass(frozen=True)
class Workload:
    """One Deployment to create: where, how many pods, which pools it may run on."""

    namespace: str
    name: str
    replicas: int
    pools: tuple[str, ...] | None  # None: any node


def workloads(settings: Settings) -> list[Workload]:
    """The big Deployment first, then Deployments of at most DEPLOYMENT_SIZE pods over the
    team namespaces, cycling through PLACEMENTS; replicas add up to settings.pods."""
    planned = [Workload(BIG_NAMESPACE, BIG_NAME, settings.big, ("inference", "hybrid"))]
    left, index = settings.pods - settings.big, 0
    while left > 0:
        size = min(DEPLOYMENT_SIZE, left)
        planned.append(Workload(f"team-{index % TEAM_NAMESPACES}", f"app-{index:03d}", size,
                                PLACEMENTS[index % len(PLACEMENTS)]))
        left -= size
        index += 1
    return planned


# --- Prometheus histograms -----------------------------------------------------------------

Buckets = list[tuple[float, float]]  # (upper bound, cumulative count), ascending, +Inf last


def histograms(text: str, metric: str, label: str,
               where: Mapping[str, str] | None = None) -> dict[str, Buckets]:
    """Cumulative buckets of histogram `metric` in exposition `text`, per value of `label`,
    summed over the other labels, among samples whose labels include `where`."""
    found: dict[str, dict[float, float]] = {}
    for family in text_string_to_metric_families(_only(text, metric)):
        if family.name != metric:
            continue
        for sample in family.samples:
            labels = sample.labels
            if not sample.name.endswith("_bucket") or label not in labels:
                continue
            if any(labels.get(k) != v for k, v in (where or {}).items()):
                continue
            bound = float(labels["le"])
            per_bound = found.setdefault(labels[label], {})
            per_bound[bound] = per_bound.get(bound, 0.0) + sample.value
    return {key: sorted(bounds.items()) for key, bounds in found.items()}


def counter_sum(text: str, metric: str, where: Mapping[str, str] | None = None) -> float:
    """The sum of counter `metric` over the samples whose labels include `where`."""
    total = 0.0
    for family in text_string_to_metric_families(_only(text, metric)):
        if family.name != metric.removesuffix("_total"):
            continue
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            if all(sample.labels.get(k) == v for k, v in (where or {}).items()):
                total += sample.value
    return total


def _only(text: str, metric: str) -> str:
    """The lines of `text` about `metric` (an API server's page is megabytes: parse less)."""
    return "\n".join(line for line in text.splitlines()
                     if line.startswith(metric) or (line.startswith("#") and metric in line))


def delta(before: Buckets | None, after: Buckets) -> Buckets:
    """The observations between two scrapes of the same histogram."""
    earlier = dict(before or [])
    return [(bound, count - earlier.get(bound, 0.0)) for bound, count in after]


def quantile(buckets: Iterable[tuple[float, float]], q: float) -> float | None:
    """Prometheus' histogram_quantile: linear within the bucket holding rank q * count.

    None without observations; the highest finite bound when the rank falls in +Inf.
    """
    rows = sorted(buckets)
    if not rows or rows[-1][1] <= 0:
        return None
    rank = q * rows[-1][1]
    lower_bound, lower_count = 0.0, 0.0
    for bound, count in rows:
        if count >= rank:
            if math.isinf(bound):
                return lower_bound
            if count == lower_count:
                return bound
            return lower_bound + (bound - lower_bound) * (rank - lower_count) / (
                count - lower_count)
        lower_bound, lower_count = bound, count
    return lower_bound


def bucket_range(buckets: Iterable[tuple[float, float]], q: float) -> str:
    """The bounds of the bucket holding rank q * count, as "0.1-0.5 s" ("> 25 s" for +Inf;
    "" without observations): what a coarse histogram really says about a quantile."""
    rows = sorted(buckets)
    if not rows or rows[-1][1] <= 0:
        return ""
    rank, lower = q * rows[-1][1], 0.0
    for bound, count in rows:
        if count >= rank:
            return f"> {lower:g} s" if math.isinf(bound) else f"{lower:g}-{bound:g} s"
        lower = bound
    return f"> {lower:g} s"


def load_range(loads: Iterable[str]) -> str:
    """The spread of the 1-minute load averages sampled ("9.5-20.6")."""
    ones = [float(load.split()[0]) for load in loads]
    return f"{min(ones):.1f}-{max(ones):.1f}" if ones else "n/a"


def count_of(buckets: Buckets) -> int:
    """Observations in a histogram (its +Inf bucket)."""
    return int(buckets[-1][1]) if buckets else 0


def percentile_ms(samples: list[float], q: float) -> float:
    """The q-quantile of `samples` (seconds) in milliseconds, nearest rank."""
    ordered = sorted(samples)
    return 1000 * ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]
