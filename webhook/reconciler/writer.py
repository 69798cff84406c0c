"""Writing a pod's cost: guarded merge patches, conflict retries, Events and log lines.

Writes are merge patches of the annotations poolguard owns, guarded by the pod's
resourceVersion: a concurrent change answers 409 Conflict, and the pod is read again
and decided again (a person's new value wins). A pod that already carries the right
value costs no write. Only the holder of the Lease writes (`may_write`), at most --qps
writes a second (token bucket); Events come after pod patches and are dropped, not
queued, when the bucket is empty. A dry run prints one line per pod instead.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import urllib3

from ..cluster.kubeclient import MERGE_PATCH, ApiError, describe_error, request_json
from ..core.cost.mutation import CostDecision
from ..core.objects.deletion_cost import DELETION_COST_ANNOTATION
from ..core.objects.kube import Obj, annotations_of, meta, name_of, namespace_of, spec_of
from ..core.policy.policy import Policy
from ..core.view.cluster import ClusterView
from ..errors import ConflictError, NotFoundError
from .brake import REWRITES_HELD, rewrites
from .decide import (
    CLEANED,
    FAILED,
    PATCH,
    PATCHED,
    SKIPPED,
    UNTOUCHED,
    PodKey,
    PodNeed,
    owned_keys,
    verdict_for,
    write_reason,
)
from .lease import always_leading, micro_time
from .metrics import Metrics
from .options import Options
from .workqueue import TokenBucket

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("poolguard.reconciler")

CONFLICT_RETRIES = 3
CONFLICT = "conflict"  # a write answered 409: decide again on the pod as it is now


class Reconciler:
    """Decides (webhook.reconciler.decide) and writes the cost of one pod at a time."""

    def __init__(self, api: client.ApiClient, view: ClusterView, policy: Policy | None,
                 options: Options, *, may_write: Callable[[], bool] = always_leading,
                 limiter: TokenBucket | None = None, metrics: Metrics | None = None,
                 out: Callable[[str], None] = print,
                 stop: threading.Event | None = None) -> None:
        self.api, self.view, self.policy, self.options = api, view, policy, options
        self.may_write = may_write
        self.limiter = limiter or TokenBucket(options.qps, options.burst)
        self.metrics = metrics or Metrics()
        self.out = out
        self.stop = stop or threading.Event()
        self._announced: dict[PodKey, str] = {}
        # brake.py: while set, a write that rewrites a managed cost is held.
        self.hold_rewrites = False

    def evaluate(self, pod: Obj) -> PodNeed:
        """What `pod` needs, from the cached view (no I/O)."""
        assert self.policy is not None, "reconciling needs a policy"
        return verdict_for(pod, self.policy, self.view, self.options.exclude_namespaces)

    def reconcile(self, pod: Obj) -> tuple[str, str]:
        """Bring one pod to its wanted cost; returns (outcome, reason) and records it."""
        outcome, reason = self._reconcile(pod)
        self.metrics.record(outcome, reason)
        return outcome, reason

    def _reconcile(self, pod: Obj) -> tuple[str, str]:
        def attempt(current: Obj) -> tuple[str, str] | None:
            verdict = self.evaluate(current)
            if verdict.outcome != PATCH:
                return verdict.outcome, verdict.reason
            assert verdict.decision is not None
            if self.hold_rewrites and rewrites(self.policy, current, verdict):
                return SKIPPED, REWRITES_HELD
            if self.options.dry_run:
                self._announce(current, _change_line(current, verdict.decision))
                return PATCHED, ""
            result = self._write(current, cost_patch(current, verdict.decision))
            if result[0] == PATCHED:
                self.metrics.writes.labels(write_reason(current, verdict.decision)).inc()
                self._log_and_event(current, verdict.decision)
            return None if result[0] == CONFLICT else result

        return self._retry_conflicts(pod, attempt, gone=(SKIPPED, "gone"), failed=(FAILED, ""))

    def _retry_conflicts(self, pod: Obj, attempt: Callable[[Obj], Any], *, gone: Any,
                         failed: Any) -> Any:
        """Run `attempt` (None means 409 Conflict), re-reading the pod before each retry."""
        current: Obj | None = pod
        for _ in range(CONFLICT_RETRIES):
            if current is None:
                return gone
            result = attempt(current)
            if result is not None:
                return result
            ok, current = self._fetch(current)
            if not ok:
                return failed
        return failed

    def cleanup(self, pod: Obj) -> str:
        """Remove the annotations poolguard owns from one pod; CLEANED or UNTOUCHED."""
        def attempt(current: Obj) -> str | None:
            keys = owned_keys(annotations_of(current))
            if not keys:
                return UNTOUCHED
            if self.options.dry_run:
                self._announce(current, f"would remove from {_pod_name(current)}: "
                               f"{', '.join(keys)}")
                return CLEANED
            result, _ = self._write(current, removal_patch(current, keys))
            if result == PATCHED:
                log.info("removed %s from %s", ", ".join(keys), _pod_name(current))
                return CLEANED
            if result == CONFLICT:
                return None
            return UNTOUCHED if result == SKIPPED else FAILED

        return self._retry_conflicts(pod, attempt, gone=UNTOUCHED, failed=FAILED)

    def _write(self, pod: Obj, patch: dict[str, Any]) -> tuple[str, str]:
        """PATCH the pod: (PATCHED, ""), (CONFLICT, ""), (SKIPPED, why) or (FAILED, "")."""
        if not self.may_write():
            return SKIPPED, "not-leader"
        if not self.limiter.acquire(self.stop):
            return SKIPPED, "stopping"
        if not self.may_write():  # leadership may have lapsed while we waited
            return SKIPPED, "not-leader"
        try:
            request_json(self.api, "PATCH", _pod_path(pod), body=patch,
                         content_type=MERGE_PATCH)
        except ConflictError:
            self.metrics.patches.labels(CONFLICT).inc()
            return CONFLICT, ""
        except NotFoundError:
            self.metrics.patches.labels("gone").inc()
            return SKIPPED, "gone"
        except (ApiError, urllib3.exceptions.HTTPError, OSError) as err:
            return self._failed(pod, err)
        self.metrics.patches.labels(PATCHED).inc()
        return PATCHED, ""

    def _failed(self, pod: Obj, err: BaseException) -> tuple[str, str]:
        self.metrics.patches.labels("error").inc()
        log.warning("patching %s failed: %s", _pod_name(pod), describe_error(err))
        return FAILED, ""

    def _fetch(self, pod: Obj) -> tuple[bool, Obj | None]:
        """(read, pod as the API server has it now): after a conflict; None if deleted."""
        try:
            return True, request_json(self.api, "GET", _pod_path(pod))
        except NotFoundError:
            return True, None
        except (ApiError, urllib3.exceptions.HTTPError, OSError) as err:
            log.warning("re-reading %s failed: %s", _pod_name(pod), describe_error(err))
            return False, None

    def forget(self, key: PodKey) -> None:
        """Drop what was announced for a deleted pod (dry-run bookkeeping)."""
        self._announced.pop(key, None)

    def _announce(self, pod: Obj, line: str) -> None:
        key = (namespace_of(pod), name_of(pod))
        if self._announced.get(key) != line:  # print a pod's pending change once
            self._announced[key] = line
            self.out(line)

    def _log_and_event(self, pod: Obj, decision: CostDecision) -> None:
        log.info("%s", _change_line(pod, decision).replace("would patch", "patched", 1))
        if not self.options.events:
            return
        if not self.limiter.try_acquire():  # pod patches come first
            self.metrics.events.labels("dropped").inc()
            return
        try:
            request_json(self.api, "POST", f"/api/v1/namespaces/{namespace_of(pod)}/events",
                         body=self._event(pod, decision))
            self.metrics.events.labels("sent").inc()
        except Exception as err:  # an Event is a courtesy; never fail the pass for it
            self.metrics.events.labels("failed").inc()
            log.debug("event for %s failed: %s", _pod_name(pod), describe_error(err))

    def _event(self, pod: Obj, decision: CostDecision) -> dict[str, Any]:
        now = micro_time()
        before = annotations_of(pod).get(DELETION_COST_ANNOTATION)
        return {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{name_of(pod)}.", "namespace": namespace_of(pod)},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name_of(pod),
                               "namespace": namespace_of(pod), "uid": meta(pod).get("uid")},
            "type": "Normal", "reason": "DeletionCostSet",
            "message": f"poolguard set {DELETION_COST_ANNOTATION}={decision.cost} for pool "
                       f"{decision.pool or '(none)'} (was {before or 'unset'})",
            "source": {"component": "poolguard-reconciler"},
            "reportingComponent": "poolguard.dev/reconciler",
            "reportingInstance": self.options.identity,
            "firstTimestamp": now[:19] + "Z", "lastTimestamp": now[:19] + "Z", "count": 1,
        }


def cost_patch(pod: Obj, decision: CostDecision) -> dict[str, Any]:
    """The merge patch that gives `pod` the cost `decision` wants (and drops a stale pool)."""
    annotations: dict[str, str | None] = dict(decision.annotations)
    annotations.update({key: None for key in decision.stale if key in annotations_of(pod)})
    return _guarded_patch(pod, annotations)


def removal_patch(pod: Obj, keys: list[str]) -> dict[str, Any]:
    """The merge patch that removes `keys` from `pod`'s annotations (for cleanup)."""
    return _guarded_patch(pod, dict.fromkeys(keys))


def _guarded_patch(pod: Obj, annotations: dict[str, str | None]) -> dict[str, Any]:
    # Only the keys poolguard owns (null deletes one), so a merge patch never drops
    # someone else's annotation; the resourceVersion makes a concurrent change a 409.
    return {"metadata": {"resourceVersion": meta(pod).get("resourceVersion"),
                         "annotations": annotations}}


def _change_line(pod: Obj, decision: CostDecision) -> str:
    before = annotations_of(pod).get(DELETION_COST_ANNOTATION) or "(none)"
    return (f"would patch {_pod_name(pod)}: deletion cost {before} -> {decision.cost} "
            f"(node {spec_of(pod).get('nodeName')}, pool {decision.pool or '(none)'})")


def _pod_name(pod: Obj) -> str:
    return f"{namespace_of(pod)}/{name_of(pod)}"


def _pod_path(pod: Obj) -> str:
    return f"/api/v1/namespaces/{namespace_of(pod)}/pods/{name_of(pod)}"
