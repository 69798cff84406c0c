"""Prometheus metrics for the admission server, correct across gunicorn workers.

With several workers each process counts on its own; prometheus_client's multiprocess
mode sums them at scrape time from files in one directory. `serve` turns it on with
`use_multiprocess_dir` before the workers start; without it (tests that build the app in
process) the metrics live in this process only.

Why the metrics are made on first use, not at import: prometheus_client picks how a metric
stores its value (in memory, or in a file of the multiprocess directory) when the metric is
created, from the storage class it chose when it was first imported. By the time `serve`
runs, the CLI has already imported prometheus_client (the reconciler's metrics) in the
in-memory mode; metrics made then would count in memory while /metrics reads the (empty)
directory, and the served page would be empty. So `use_multiprocess_dir` switches the
storage first, and the admission metrics are created afterwards, on first use.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)

from ..cluster.memory_budget import MemoryCheck

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


@dataclass(frozen=True)
class AdmissionMetrics:
    """The admission server's metrics (docs/install.md "Metrics and alerts" lists them)."""

    requests: Counter
    latency: Histogram
    decisions: Counter
    violations: Counter
    cache_synced: Gauge
    policy_errors: Counter
    policy_loaded: Gauge
    certificate_expiry: Gauge
    owner_decided: Counter
    scale_clamped: Counter


@cache
def admission() -> AdmissionMetrics:
    """The metrics, created on first use (after `use_multiprocess_dir`, under `serve`)."""
    if os.environ.get(MULTIPROC_ENV) and not _stores_in_files():
        raise RuntimeError(f"{MULTIPROC_ENV} is set but prometheus_client stores values in "
                           "memory: call metrics.use_multiprocess_dir() before the first use")
    return AdmissionMetrics(
        requests=Counter("poolguard_admission_requests_total",
                         "Admission requests by endpoint and result (allowed, patched, "
                         "warned, denied, bad-request, error)", ["endpoint", "result"]),
        latency=Histogram("poolguard_admission_duration_seconds",
                          "Time to answer an admission request", ["endpoint"],
                          buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                   0.5, 1.0, 2.5)),
        decisions=Counter("poolguard_admission_decisions_total",
                          "What admission decided, by endpoint and outcome (set, keep, "
                          "violation:RULE, denied, warned, ...)", ["endpoint", "outcome"]),
        violations=Counter("poolguard_scale_violations_total",
                           "Scale-downs that broke a policy rule, by rule and enforcement",
                           ["rule", "enforcement"]),
        cache_synced=Gauge("poolguard_cache_synced",
                           "1 when the cluster cache is synced and fresh, else 0",
                           multiprocess_mode="livemin"),
        policy_errors=Counter("poolguard_policy_reload_errors_total",
                              "Policy reloads rejected because the new file was invalid"),
        policy_loaded=Gauge("poolguard_policy_loaded_timestamp_seconds",
                            "When the policy in use was loaded", multiprocess_mode="livemax"),
        # The earliest over the workers: one that has not reloaded a renewed certificate yet
        # still serves the old one.
        certificate_expiry=Gauge("poolguard_serving_certificate_expiry_timestamp_seconds",
                                 "When the serving certificate in use expires (Unix time)",
                                 multiprocess_mode="livemin"),
        owner_decided=Counter("poolguard_scale_owner_decided_total",
                              "Replica changes of ReplicaSets and StatefulSets sized by a "
                              "non-Deployment owner, allowed unchecked", ["kind", "owner_kind"]),
        scale_clamped=Counter("poolguard_scale_clamped_total",
                              "Autoscaler scale-downs lowered to the smallest safe count",
                              ["kind", "namespace"]),
    )


@dataclass(frozen=True)
class MemoryMetrics:
    """The container's memory against what the caches need (cluster/memory_budget.py)."""

    limit: Gauge
    used: Gauge
    projected: Gauge

    def publish(self, check: MemoryCheck) -> None:
        """Set the gauges from one check; no limit (or none readable) is 0."""
        self.limit.set(check.limit or 0)
        self.used.set(check.used or 0)
        self.projected.set(check.projected)


@cache
def memory() -> MemoryMetrics:
    """The memory gauges, created on first use like `admission()`; every worker reads
    the same cgroup, so the highest live value is the container's."""
    return MemoryMetrics(
        limit=Gauge("poolguard_memory_limit_bytes", "The container's memory limit (its "
                    "cgroup), 0 when none is set", multiprocess_mode="livemax"),
        used=Gauge("poolguard_memory_used_bytes", "The container's working set (cgroup "
                   "usage less inactive file pages)", multiprocess_mode="livemax"),
        projected=Gauge("poolguard_memory_projected_bytes", "Memory the caches of the pods "
                        "cached now need by the sizing table (every worker's cache)",
                        multiprocess_mode="livemax"),
    )


def outcome_counter(outcome: str) -> Counter:
    """The metric of a decision outcome that has its own (owner-decided, clamped)."""
    measured = admission()
    return {"owner-decided": measured.owner_decided, "clamped": measured.scale_clamped}[outcome]


def _stores_in_files() -> bool:
    return values.ValueClass is not values.MutexValue


def use_multiprocess_dir(directory: str) -> None:
    """Share the metrics of every process started from here through `directory`.

    Must run before the first `admission()` (it raises otherwise: those metrics would not
    be shared). Sets the environment variable for the worker processes and switches
    prometheus_client's value storage, which it chose at import time, to files.
    """
    if admission.cache_info().currsize:
        raise RuntimeError("use_multiprocess_dir() after the metrics were created")
    os.environ[MULTIPROC_ENV] = directory
    values.ValueClass = values.get_value_class()


def render() -> tuple[bytes, str]:
    """The exposition text for /metrics, aggregated over workers when they share a dir."""
    admission()  # the metrics exist (with their zero values) before the first request
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    """Drop a dead worker's live gauges (gunicorn child_exit hook)."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(pid)
