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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..cluster.memory_budget import SERVE
from ..cluster.memory_watch import MemoryWatch
from ..cluster.state import PolicyHolder, load_state
from ..cluster.view import WatchedView
from ..core.policy.policy import Policy
from ..core.policy.policy_change import change_refusal
from ..core.policy.pool_coverage import pool_coverage
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
        # policy_nodes_problem's last answer: (the policy, when it expires, the problem)
        self._nodes_checked: tuple[Policy, float, str | None] | None = None

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

    def _nodes(self) -> list[Any]:
        return list(self.view.nodes())

    def vet_policy(self, current: Policy, new: Policy) -> str | None:
        """Why a new policy must not replace the one in force (`policy_change`), or None;
        None too while the cache cannot be trusted (the degraded metric then tells)."""
        if self.view_problem() is not None:
            return None
        return change_refusal(current, new, self._nodes())

    def policy_nodes_problem(self) -> str | None:
        """What leaves the policy in force without protected nodes, in words, or None
        (also while the cache cannot be trusted, or the view has no nodes).

        Read again at most every policy_check_seconds for the same policy: the check
        reads every node (some 20 ms for 10,000), and probes and the readiness thread ask
        often, on the worker that answers admission requests.
        """
        if self.view_problem() is not None:
            return None
        policy, now = self.policy.policy, time.monotonic()
        last = self._nodes_checked
        if last is not None and last[0] is policy and now < last[1]:
            return last[2]
        coverage = pool_coverage(policy, self._nodes())
        problem = "; ".join(finding.message for finding in coverage.disarming) or None
        self._nodes_checked = (policy, now + self.settings.policy_check_seconds, problem)
        return problem

    def readiness(self) -> tuple[bool, dict[str, Any]]:
        """(ready, details) for /readyz.

        A policy that protects no node leaves readiness alone (poolguard fails open and
        serves); `policyNodes` says what is wrong and the degraded metric is 1.
        """
        self._refresh_policy()  # probes alone must notice a policy file gone bad
        problem = self.view_problem()
        details: dict[str, Any] = {"policy": "ok" if self.policy.error is None else "stale",
                                   "cache": problem or "ok",
                                   "policyNodes": self.policy_nodes_problem() or "ok"}
        if self.policy.error:
            details["policyError"] = self.policy.error
        if self.policy.refused:
            details["policyRefused"] = self.policy.refused
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
    api = None  # the live mode's client, for the refused policy's Event
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
        api = api_client_from(args.kubeconfig, args.context)
        view = LiveCluster(api, watch_timeout=60)
        view.start()
        runtime = Runtime(policy, view, settings)
    policy.vet = runtime.vet_policy
    policy.on_refused = _refusal_reporter(getattr(args, "policy_configmap", None), api,
                                          measured.policy_rejected)
    _report_readiness(runtime, measured.cache_synced, measured.policy_degraded)
    _watch_memory(runtime, args.workers)
    return runtime


def _watch_memory(runtime: Runtime, workers: int) -> None:
    """Check the container's memory limit against this worker's cache now and every
    half minute: every worker keeps a cache of its own, so the need counts `workers`."""
    from . import metrics

    view = runtime.view
    # A live cache counts the pods its first list will bring before they are all in.
    count = runtime.watched.pod_count if runtime.watched else (lambda: len(view.all_pods()))
    runtime.memory = MemoryWatch(SERVE, count, caches=workers,
                                 on_check=metrics.memory().publish)
    runtime.memory.start()


def _refusal_reporter(configmap: str | None, api: Any,
                      counter: Any) -> Callable[[str], None]:
    """What a refused policy change does beside the log line: the metric, and an Event on
    the policy's ConfigMap when live (`api`) and `--policy-configmap` names it."""
    def refused(reason: str) -> None:
        counter.inc()
        if configmap is not None and api is not None:
            from ..cluster.policy_event import configmap_ref, post_policy_event

            post_policy_event(api, configmap_ref(configmap), "PolicyRefused",
                              f"poolguard-webhook kept the last good policy: {reason}",
                              "poolguard-webhook")

    return refused


def _report_readiness(runtime: Runtime, gauge: Any, degraded: Any,
                      period: float = READINESS_METRIC_SECONDS) -> None:
    """Keep this worker's cache_synced and policy_degraded gauges current, whether or not
    probes reach it.

    The metric is the minimum over the workers, and a probe or scrape lands on one worker:
    a worker that answered none would otherwise hold it at 0. Checking readiness also
    re-reads a changed policy file, so a bad policy is counted without any traffic.
    """
    def loop() -> None:
        reported = "ok"
        while True:
            ready, details = runtime.readiness()
            gauge.set(1 if ready else 0)
            nodes_problem = details["policyNodes"]
            degraded.set(0 if nodes_problem == "ok" else 1)
            if nodes_problem != reported:  # once per change: the metric is the alert's
                if nodes_problem != "ok":
                    log.warning("degraded: the policy in force protects no node: %s",
                                nodes_problem)
                reported = nodes_problem
            time.sleep(period)

    threading.Thread(target=loop, daemon=True, name="readiness-metric").start()
