"""The server's live state: the policy (reloaded from its file) and the cluster view."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .admission import Context
from .core.cluster import ClusterView
from .core.policy import Policy, PolicyError
from .state import load_policy

log = logging.getLogger("poolguard")


@dataclass
class Settings:
    """Operational knobs of `serve`, with their defaults."""

    max_staleness_seconds: float = 120.0  # a cache older than this is not trusted
    fail_closed: bool = False  # when the cache is not trusted: deny (True) or allow scale-downs
    policy_check_seconds: float = 5.0  # how often the policy file is checked for changes
    # A Binding can reach us before the pod's watch event: wait this long for the pod.
    pod_wait_seconds: float = 0.25


class PolicyHolder:
    """The last good policy; re-reads its file when it changes and keeps the old on error."""

    def __init__(self, path: str | None, on_error: Callable[[], None] = lambda: None,
                 on_load: Callable[[], None] = lambda: None) -> None:
        self.path = path
        self._on_error, self._on_load = on_error, on_load
        self.policy: Policy = load_policy(path)  # a bad file at start stops startup
        self.error: str | None = None
        self._stamp = self._file_stamp()
        self._lock = threading.Lock()
        on_load()

    def _file_stamp(self) -> tuple[float, int] | None:
        if self.path is None:
            return None
        try:
            # ConfigMap updates swap a symlink, so stat the resolved file.
            stat = Path(self.path).resolve().stat()
        except OSError:
            return None
        return (stat.st_mtime, stat.st_size)

    def refresh(self) -> None:
        """Reload the file if it changed; an invalid file leaves the last good policy."""
        stamp = self._file_stamp()
        if stamp == self._stamp or self.path is None:
            return
        with self._lock:
            if stamp == self._stamp:
                return
            self._stamp = stamp
            try:
                self.policy = load_policy(self.path)
            except PolicyError as err:
                self.error = str(err)
                self._on_error()
                log.error("policy reload rejected, keeping the last good policy: %s", err)
                return
            self.error = None
            self._on_load()
            log.info("policy reloaded from %s", self.path)


class Runtime:
    """Everything a request handler needs, shared by the threads of one worker."""

    def __init__(self, policy: PolicyHolder, view: ClusterView,
                 settings: Settings | None = None) -> None:
        self.policy = policy
        self.view = view
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
        """The pod from the view; a live view gets a moment to catch up with a new pod."""
        pod = self.view.pod(namespace, name)
        if pod is not None or not hasattr(self.view, "staleness_seconds"):
            return pod  # a state file never changes: no point waiting
        if self.view_problem():
            return None  # a watch that is down will not deliver it in time either
        deadline = time.monotonic() + self.settings.pod_wait_seconds
        while pod is None and time.monotonic() < deadline:
            time.sleep(0.01)
            pod = self.view.pod(namespace, name)
        return pod

    def view_problem(self) -> str | None:
        """Why the cluster view cannot be trusted now, or None (a state file always can)."""
        synced = getattr(self.view, "synced", True)
        if not synced:
            return "the cluster cache has not synced yet"
        staleness = getattr(self.view, "staleness_seconds", None)
        if staleness is not None:
            age = staleness()
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
        status = getattr(self.view, "sync_status", None)
        if status is not None:
            details["resources"] = status()
        details["pid"] = os.getpid()
        return problem is None, details
