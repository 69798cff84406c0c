"""The server's live state: the policy (reloaded from its file) and the cluster view.

`build_runtime` makes it in each worker from `serve`'s arguments: a state file read once,
or a live view the watches keep current.
"""

from __future__ import annotations

import argparse
import gc
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..cluster.memory_budget import SERVE
from ..cluster.memory_watch import MemoryWatch
from ..cluster.state import PolicyHolder, load_state
from ..cluster.view import WatchedView
from ..core.view.cluster import ClusterView
from .handlers import Context

log = logging.getLogger("poolguard")


@dataclass
class Settings:
    """Operational knobs of `serve`, with their defaults."""

    max_staleness_seconds: float = 120.0  # a cache older than this is not trusted
    fail_closed: bool = False  # when the cache is not trusted: deny (True) or allow scale-downs
    policy_check_seconds: float = 5.0  # how often the policy file is checked for changes
    # A Binding can reach us before the pod's watch event: the pod is then read from the
    # API server, with this bound on connecting and on the answer (one attempt).
    pod_read_seconds: float = 1.0


class Runtime:
    """Everything a request handler needs, shared by the threads of one worker."""

    def __init__(self, policy: PolicyHolder, view: ClusterView,
                 settings: Settings | None = None) -> None:
        self.policy = policy
        self.view = view
        # A watch-fed view can lag; a state file cannot (it never changes).
        self.watched: WatchedView | None = view if isinstance(view, WatchedView) else None
        self.settings = settings or Settings()
        self._next_policy_check = 0.0
        self.memory: MemoryWatch | None = None  # set by build_runtime

    def _refresh_policy(self) -> None:
        now = time.monotonic()
        if now >= self._next_policy_check:
            self._next_policy_check = now + self.settings.policy_check_seconds
            self.policy.refresh()

    def context(self) -> Context:
        """The context of one request: the policy in force now and the cluster view."""
        self._refresh_policy()
        return Context(policy=self.policy.policy, view=self.view, now_ns=time.time_ns,
                       view_problem=self.view_problem, fail_closed=self.settings.fail_closed,
                       find_pod=self.find_pod)

    def find_pod(self, namespace: str, name: str) -> Any:
        """The pod from the view; one the watch has not delivered yet, from the API server.

        A Binding is sent once the scheduler saw the pod, so the API server has it even
        when our watch lags behind (a burst of creations on a busy node): one bounded
        read instead of waiting for the watch. None when the read fails or is slow: the
        binding is then allowed unchanged and the reconciler sets the cost.
        """
        pod = self.view.pod(namespace, name)
        if pod is not None or self.watched is None:
            return pod  # a state file never changes: nothing more to read
        if self.view_problem():
            return None  # the API server is unreachable or the cache unsynced
        try:
            return self.watched.fetch_pod(namespace, name, self.settings.pod_read_seconds)
        except Exception as err:  # any failure: answer now, the reconciler repairs
            from ..cluster.kubeclient import describe_error  # the live mode's client only

            log.info("pod %s/%s is not cached and could not be read: %s", namespace, name,
                     describe_error(err))
            return None

    def view_problem(self) -> str | None:
        """Why the cluster view cannot be trusted now, or None (a state file always can)."""
        if self.watched is None:
            return None
        if not self.watched.synced:
            return "the cluster cache has not synced yet"
        age = self.watched.staleness_seconds()
        if age > self.settings.max_staleness_seconds:
            return (f"the cluster cache is {age:.0f}s old, over the "
                    f"{self.settings.max_staleness_seconds:.0f}s staleness bound")
        return None

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, details) for /readyz."""
        self._refresh_policy()  # probes alone must notice a policy file gone bad
        problem = self.view_problem()
        details: dict[str, Any] = {"policy": "ok" if self.policy.error is None else "stale",
                                   "cache": problem or "ok"}
        if self.policy.error:
            details["policyError"] = self.policy.error
        if self.watched is not None:
            details["resources"] = self.watched.sync_status()
        # A memory warning is named, never a reason to be unready: an unready webhook
        # fails open just as an OOM-killed one does.
        if self.memory is not None and self.memory.latest is not None:
            details["memory"] = self.memory.latest.warning or "ok"
        return problem is None, details


READINESS_METRIC_SECONDS = 5.0


def build_runtime(args: argparse.Namespace) -> Runtime:
    """The Runtime for this worker: policy holder and a state-file or live cluster view."""
    from . import metrics

    measured = metrics.admission()

    def loaded() -> None:
        measured.policy_loaded.set_to_current_time()

    policy = PolicyHolder(args.policy, on_error=measured.policy_errors.inc, on_load=loaded)
    settings = Settings(max_staleness_seconds=args.max_staleness, fail_closed=args.fail_closed)
    if args.state:
        snapshot = getattr(args, "snapshot", None)  # parsed once by `serve` before forking
        if snapshot is None:
            snapshot = load_state(args.state)
        snapshot.read_all_facts()  # now, not during the first scale check
        gc.collect()
        gc.freeze()  # the loaded state is never garbage: keep collections off it
        runtime = Runtime(policy, snapshot, settings)
    else:
        from ..cluster.kubeclient import api_client_from  # the live mode's client only
        from ..cluster.live import LiveCluster

        # Watches are re-opened every minute, so even a quiet resource is heard from well
        # inside the default staleness bound.
        view = LiveCluster(api_client_from(args.kubeconfig, args.context), watch_timeout=60)
        view.start()
        runtime = Runtime(policy, view, settings)
    _report_readiness(runtime, measured.cache_synced)
    _watch_memory(runtime, args.workers)
    return runtime


def _watch_memory(runtime: Runtime, workers: int) -> None:
    """Check the container's memory limit against this worker's cache now and every
    half minute: every worker keeps a cache of its own, so the need counts `workers`."""
    from . import metrics

    view = runtime.view
    # A live cache counts the pods its first list will bring before they are all in.
    count = getattr(view, "pod_count", None) or (lambda: len(view.all_pods()))
    runtime.memory = MemoryWatch(SERVE, count, caches=workers,
                                 on_check=metrics.memory().publish)
    runtime.memory.start()


def _report_readiness(runtime: Runtime, gauge: Any,
                      period: float = READINESS_METRIC_SECONDS) -> None:
    """Keep this worker's cache_synced gauge current, whether or not probes reach it.

    The metric is the minimum over the workers, and a probe or scrape lands on one worker:
    a worker that answered none would otherwise hold it at 0. Checking readiness also
    re-reads a changed policy file, so a bad policy is counted without any traffic.
    """
    def loop() -> None:
        while True:
            ready, _ = runtime.readiness()
            gauge.set(1 if ready else 0)
            time.sleep(period)

    threading.Thread(target=loop, daemon=True, name="readiness-metric").start()
