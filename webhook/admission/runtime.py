"""The server's live state: the policy (reloaded from its file) and the cluster view."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from ..cluster.state import PolicyHolder
from ..cluster.view import WatchedView
from ..core.cluster import ClusterView
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

    def _refresh_policy(self) -> None:
        now = time.monotonic()
        if now >= self._next_policy_check:
            self._next_policy_check = now + self.settings.policy_check_seconds
            self.policy.refresh()

    def context(self) -> Context:
        """A fresh per-request context (its outcome list is the request's own)."""
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
        return problem is None, details
