"""Prometheus metrics for the reconciler, and its /metrics and /healthz HTTP endpoint.

Same style as webhook.admission.metrics: one module per program declares every metric
and renders the exposition text. The reconciler is one process, so its metrics live in a
registry of their own (one per Service, which keeps tests independent); the admission
server's are shared by gunicorn workers through prometheus_client's multiprocess mode.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import prometheus_client as prom

from ..cluster.memory_budget import MemoryCheck
from .decide import FAILED, KEPT, PATCHED, SKIPPED, UNCHANGED_POD, WRITE_REASONS

log = logging.getLogger(__name__)
# A connection that sends nothing (or stalls mid-request) for this long is closed: each
# holds a thread, and a scraper or probe that gave up must not keep one forever.
IDLE_TIMEOUT_S = 10.0
REBALANCE_RESULTS = ("evicted", "landed", "blocked", "failed", "bounced", "timeout",
                     "abandoned")


class Metrics:
    """The reconciler's Prometheus metrics, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = prom.CollectorRegistry()
        self._foreign_seen: set[tuple[str]] = set()
        reg = self.registry
        self.patches = prom.Counter("poolguard_reconciler_patches", "Pod patch requests by "
                                    "result: patched, conflict, gone, error", ["result"],
                                    registry=reg)
        self.writes = prom.Counter("poolguard_reconciler_writes", "Pod cost writes by "
                                   "reason: new (no cost of poolguard's yet), pool (the pool "
                                   "or its cost changed), rank (the node's rank moved)",
                                   ["reason"], registry=reg)
        self.free_nodes = prom.Gauge("poolguard_pool_free_nodes", "Nodes of the pool with no "
                                     "pod holding a GPU (on nodes offering none: no pod but "
                                     "DaemonSets'), at the last resync", ["pool"],
                                     registry=reg)
        self.pods = prom.Counter("poolguard_reconciler_pods", "Pod evaluations by outcome: "
                                 "patched, unchanged, kept, skipped, failed", ["outcome"],
                                 registry=reg)
        self.skipped = prom.Counter("poolguard_reconciler_pods_skipped", "Pods left alone, by "
                                    "reason", ["reason"], registry=reg)
        self.events = prom.Counter("poolguard_reconciler_events", "Kubernetes Events about "
                                   "re-costed pods: sent, dropped (rate limit), failed",
                                   ["result"], registry=reg)
        self.resyncs = prom.Counter("poolguard_reconciler_resyncs", "Full passes over every "
                                    "cached pod", registry=reg)
        self.leader = prom.Gauge("poolguard_reconciler_leader", "1 while this instance holds "
                                 "the Lease and may write", registry=reg)
        self.queue_depth = prom.Gauge("poolguard_reconciler_queue_depth", "Pods waiting in the "
                                      "work queue", registry=reg)
        self.staleness = prom.Gauge("poolguard_reconciler_cache_staleness_seconds", "Seconds "
                                    "since the least recently heard-from watch heard from the "
                                    "API server", registry=reg)
        self.foreign_cost_pods = prom.Gauge(
            "poolguard_foreign_cost_pods", "Governed pods whose deletion cost another "
            "controller owns (its managedFields manager), at the last resync; poolguard "
            "keeps their cost", ["manager"], registry=reg)
        self.rebalance_moves = prom.Counter(
            "poolguard_rebalance_moves", "Rebalance moves by result: evicted, landed (the "
            "replacement is Ready at home), blocked (429: a PodDisruptionBudget said wait), "
            "failed, bounced (the replacement landed outside its home), timeout and "
            "abandoned (moves dropped with their batch)", ["result"], registry=reg)
        self.rebalance_bounces = prom.Counter(
            "poolguard_rebalance_bounces", "Replacements of rebalanced pods that the "
            "scheduler placed outside their home pool (the workload is then held back)",
            registry=reg)
        for result in REBALANCE_RESULTS:
            self.rebalance_moves.labels(result)
        for result in (PATCHED, "conflict", "gone", "error"):
            self.patches.labels(result)
        for outcome in (PATCHED, UNCHANGED_POD, KEPT, SKIPPED, FAILED):
            self.pods.labels(outcome)
        for reason in WRITE_REASONS:
            self.writes.labels(reason)
        self._pools_seen: set[tuple[str]] = set()
        # The container's memory against its cache's need (cluster/memory_budget.py).
        self.memory_limit = prom.Gauge("poolguard_memory_limit_bytes", "The container's "
                                       "memory limit (its cgroup), 0 when none is set",
                                       registry=reg)
        self.memory_used = prom.Gauge("poolguard_memory_used_bytes", "The container's working "
                                      "set (cgroup usage less inactive file pages)",
                                      registry=reg)
        self.memory_projected = prom.Gauge("poolguard_memory_projected_bytes", "Memory the "
                                           "cache of the pods cached now needs by the sizing "
                                           "table", registry=reg)

    def render(self) -> tuple[bytes, str]:
        """The exposition text for /metrics and its content type."""
        return prom.generate_latest(self.registry), prom.CONTENT_TYPE_LATEST

    def set_foreign_cost_pods(self, counts: Mapping[str, int]) -> None:
        """One series per manager seen at this resync; managers gone since are removed."""
        for (manager,) in self._foreign_seen - {(m,) for m in counts}:
            self.foreign_cost_pods.remove(manager)
        for manager, count in counts.items():
            self.foreign_cost_pods.labels(manager).set(count)
        self._foreign_seen = {(m,) for m in counts}

    def set_free_nodes(self, counts: Mapping[str, int]) -> None:
        """One series per pool of the policy; pools gone since are removed."""
        for (pool,) in self._pools_seen - {(p,) for p in counts}:
            self.free_nodes.remove(pool)
        for pool, count in counts.items():
            self.free_nodes.labels(pool).set(count)
        self._pools_seen = {(p,) for p in counts}

    def publish_memory(self, check: MemoryCheck) -> None:
        """Set the memory gauges from one check; no limit (or none readable) is 0."""
        self.memory_limit.set(check.limit or 0)
        self.memory_used.set(check.used or 0)
        self.memory_projected.set(check.projected)

    def record(self, outcome: str, reason: str = "") -> None:
        self.pods.labels(outcome).inc()
        if outcome == SKIPPED:
            self.skipped.labels(reason).inc()


def serve_http(port: int, metrics: Metrics, health: Callable[[], tuple[bool, dict[str, Any]]],
               host: str = "") -> ThreadingHTTPServer:
    """Serve /metrics (Prometheus text) and /healthz (JSON) over plain HTTP in a thread."""

    class Handler(BaseHTTPRequestHandler):
        timeout = IDLE_TIMEOUT_S

        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/metrics":
                body, content_type = metrics.render()
                self._send(200, content_type, body)
            elif self.path.split("?")[0] == "/healthz":
                ok, details = health()
                self._send(200 if ok else 503, "application/json",
                           json.dumps({"ok": ok, **details}).encode())
            else:
                self._send(404, "text/plain", b"not found\n")

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = _MetricsServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="metrics").start()
    return server


class _MetricsServer(ThreadingHTTPServer):
    """One thread per connection; a client that leaves early is not an error."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A probe that timed out or a scraper that hung up (broken pipe, reset, read
        timeout) is routine: no traceback on stderr. Anything else is logged once."""
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return
        log.warning("metrics endpoint: request from %s failed: %r", client_address, error)
