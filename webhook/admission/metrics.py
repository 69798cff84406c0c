"""Prometheus metrics for the admission server, correct across gunicorn workers.

With several workers each process counts on its own; prometheus_client's multiprocess
mode (PROMETHEUS_MULTIPROC_DIR, set by `serve` before the workers start) sums them at
scrape time. Without that variable the metrics live in this process only (tests).
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

REQUESTS = Counter("poolguard_admission_requests_total",
                   "Admission requests by endpoint and result", ["endpoint", "result"])
LATENCY = Histogram("poolguard_admission_duration_seconds",
                    "Time to answer an admission request", ["endpoint"],
                    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                             1.0, 2.5))
DECISIONS = Counter("poolguard_admission_decisions_total",
                    "What admission decided, by endpoint and outcome (set, keep, "
                    "violation:RULE, denied, warned, ...)", ["endpoint", "outcome"])
VIOLATIONS = Counter("poolguard_scale_violations_total",
                     "Scale-downs that broke a policy rule, by rule and enforcement",
                     ["rule", "enforcement"])
CACHE_SYNCED = Gauge("poolguard_cache_synced",
                     "1 when the cluster cache is synced and fresh, else 0",
                     multiprocess_mode="livemin")
POLICY_ERRORS = Counter("poolguard_policy_reload_errors_total",
                        "Policy reloads rejected because the new file was invalid")
POLICY_LOADED = Gauge("poolguard_policy_loaded_timestamp_seconds",
                      "When the policy in use was loaded", multiprocess_mode="livemax")


def render() -> tuple[bytes, str]:
    """The exposition text for /metrics, aggregated over workers when they share a dir."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    from prometheus_client import REGISTRY

    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    """Drop a dead worker's live gauges (gunicorn child_exit hook)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(pid)
