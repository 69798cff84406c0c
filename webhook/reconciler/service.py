"""The reconciler: sets the deletion cost on scheduled pods the webhooks missed.

Pods that existed before poolguard was installed, pods bound while the binding
webhook was unavailable (its failure policy is Ignore) and pods whose node moved to
another pool get the cost here. The decision is the webhooks' own (`decide_cost`):
a governed, scheduled pod on a known node gets its pool's cost; a value a person set
(no poolguard marker, or a marker that no longer matches) is kept.

Writes are merge patches of the three annotations poolguard owns, guarded by the
pod's resourceVersion (a concurrent change answers 409 and we decide again on the
fresh pod); a pod that already carries the right value costs no write. Only the
holder of the Lease writes, at most --qps writes a second (token bucket).

Modes: `Service` runs forever (watch-fed cache, work queue, periodic resync);
`run_once` and `run_cleanup` make one pass over a fresh list and return a Summary.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import urllib3
from kubernetes import client

from ..cluster.kubeclient import MERGE_PATCH, ApiError, describe_error, request_json
from ..cluster.live import NAMESPACES, NODES, PODS, LiveCluster, read_snapshot
from ..cluster.state import PolicyHolder
from ..core.deletion_cost import (
    DELETION_COST_ANNOTATION,
    MANAGED_COST_ANNOTATION,
    POOL_ANNOTATION,
)
from ..core.kube import annotations_of, labels_of, meta, name_of, namespace_of, spec_of, status_of
from ..core.mutation import KEEP, SET, UNCHANGED, CostDecision, decide_cost, is_governed
from ..core.policy import Policy
from ..errors import ConflictError, LeaseHeldError, NotFoundError
from .lease import LeaderElector, micro_time
from .metrics import (
    CLEANED,
    FAILED,
    KEPT,
    PATCHED,
    SKIPPED,
    UNCHANGED_POD,
    UNTOUCHED,
    Metrics,
)
from .workqueue import TokenBucket, WorkQueue

log = logging.getLogger("poolguard.reconciler")

Obj = Mapping[str, Any]
PodKey = tuple[str, str]

OWNED_ANNOTATIONS = (DELETION_COST_ANNOTATION, MANAGED_COST_ANNOTATION, POOL_ANNOTATION)
CONFLICT_RETRIES = 3


@dataclass(frozen=True)
class Options:
    """Settings shared by every mode (the `reconcile` command's flags)."""

    dry_run: bool = False
    qps: float = 5.0
    burst: int = 10
    resync_seconds: float = 600.0
    events: bool = True
    exclude_namespaces: tuple[str, ...] = ("kube-system", "poolguard")
    identity: str = "poolguard-reconciler"
    lease_namespace: str = "poolguard"
    lease_name: str = "poolguard-reconciler"
    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True)
class Verdict:
    """What a pod needs: `patch` (with the decision), or nothing and why."""

    outcome: str  # "patch", UNCHANGED_POD, KEPT or SKIPPED
    reason: str = ""
    decision: CostDecision | None = None


@dataclass
class Summary:
    """Counts of a pass, by outcome and, for skipped pods, by reason."""

    outcomes: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)

    def add(self, outcome: str, reason: str = "") -> None:
        self.outcomes[outcome] += 1
        if outcome == SKIPPED:
            self.skipped[reason] += 1

    @property
    def pods(self) -> int:
        return sum(self.outcomes.values())

    def line(self, dry_run: bool = False) -> str:
        """One line for people, e.g. `1000 pods: patched 3, unchanged 990, ...`."""
        patched = "would patch" if dry_run else PATCHED
        parts = [f"{patched} {self.outcomes[PATCHED]}", f"unchanged {self.outcomes[UNCHANGED_POD]}",
                 f"kept {self.outcomes[KEPT]}", f"skipped {self.outcomes[SKIPPED]}"]
        if self.skipped:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.skipped.items()))
            parts[-1] += f" ({reasons})"
        parts.append(f"failed {self.outcomes[FAILED]}")
        return f"{self.pods} pods: " + ", ".join(parts)

    def cleanup_line(self, dry_run: bool = False) -> str:
        cleaned = "would clean" if dry_run else CLEANED
        return (f"{self.pods} pods: {cleaned} {self.outcomes[CLEANED]}, untouched "
                f"{self.outcomes[UNTOUCHED]}, failed {self.outcomes[FAILED]}")


class PodView(Protocol):
    """What the reconciler reads: a LiveCluster or a Snapshot."""

    def node(self, name: str) -> Obj | None: ...

    def namespace_labels(self, name: str) -> Mapping[str, str]: ...

    def all_pods(self) -> list[Obj]: ...


def _always() -> bool:
    return True


class Reconciler:
    """Decides and writes the cost of one pod at a time."""

    def __init__(self, api: client.ApiClient, view: PodView, policy: Policy | None,
                 options: Options, *, may_write: Callable[[], bool] = _always,
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

    # ----- deciding --------------------------------------------------------------------

    def evaluate(self, pod: Obj) -> Verdict:
        """What `pod` needs, from the cached view (no I/O)."""
        assert self.policy is not None, "reconciling needs a policy"
        skip = self._skip_reason(pod)
        if skip:
            return Verdict(SKIPPED, skip)
        node = self.view.node(spec_of(pod).get("nodeName"))
        decision = decide_cost(self.policy, annotations_of(pod), self.policy.pool_of_node(node),
                               pool_known=node is not None)
        if decision.action == SET:
            return Verdict("patch", decision=decision)
        if decision.action == UNCHANGED:
            return Verdict(UNCHANGED_POD, decision=decision)
        if decision.action == KEEP:
            return Verdict(KEPT)
        return Verdict(SKIPPED, "unknown-node")

    def _skip_reason(self, pod: Obj) -> str:
        namespace = namespace_of(pod)
        if namespace in self.options.exclude_namespaces:
            return "excluded-namespace"
        if meta(pod).get("deletionTimestamp"):
            return "terminating"
        if status_of(pod).get("phase") in ("Succeeded", "Failed"):
            return "finished"
        if not spec_of(pod).get("nodeName"):
            return "unscheduled"
        assert self.policy is not None
        if not is_governed(self.policy, self.view.namespace_labels(namespace), labels_of(pod)):
            return "not-governed"
        return ""

    # ----- writing ---------------------------------------------------------------------

    def reconcile(self, pod: Obj) -> tuple[str, str]:
        """Bring one pod to its wanted cost; returns (outcome, reason) and records it."""
        outcome, reason = self._reconcile(pod)
        self.metrics.record(outcome, reason)
        return outcome, reason

    def _reconcile(self, pod: Obj) -> tuple[str, str]:
        def attempt(current: Obj) -> tuple[str, str] | None:
            verdict = self.evaluate(current)
            if verdict.outcome != "patch":
                return verdict.outcome, verdict.reason
            assert verdict.decision is not None
            if self.options.dry_run:
                self._announce(current, _change_line(current, verdict.decision))
                return PATCHED, ""
            result = self._write(current, _cost_patch(current, verdict.decision))
            if result[0] == PATCHED:
                self._log_and_event(current, verdict.decision)
            return None if result[0] == "conflict" else result

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
            patch = {"metadata": {"resourceVersion": meta(current).get("resourceVersion"),
                                  "annotations": dict.fromkeys(keys)}}
            result, _ = self._write(current, patch)
            if result == PATCHED:
                log.info("removed %s from %s", ", ".join(keys), _pod_name(current))
                return CLEANED
            if result == "conflict":
                return None
            return UNTOUCHED if result == SKIPPED else FAILED

        return self._retry_conflicts(pod, attempt, gone=UNTOUCHED, failed=FAILED)
        return FAILED

    def _write(self, pod: Obj, patch: dict[str, Any]) -> tuple[str, str]:
        """PATCH the pod: (PATCHED, ""), ("conflict", ""), (SKIPPED, why) or (FAILED, "")."""
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
            self.metrics.patches.labels("conflict").inc()
            return "conflict", ""
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
            failure: BaseException = err
        log.warning("re-reading %s failed: %s", _pod_name(pod), describe_error(failure))
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


def owned_keys(annotations: Mapping[str, str]) -> list[str]:
    """The annotations cleanup removes: the marker and pool, and the cost only where
    the marker still matches it (otherwise a person set the cost: it stays)."""
    keys = []
    marker = annotations.get(MANAGED_COST_ANNOTATION)
    if marker is not None and annotations.get(DELETION_COST_ANNOTATION) == marker:
        keys.append(DELETION_COST_ANNOTATION)
    keys += [k for k in (MANAGED_COST_ANNOTATION, POOL_ANNOTATION) if k in annotations]
    return keys


def _cost_patch(pod: Obj, decision: CostDecision) -> dict[str, Any]:
    """A merge patch of poolguard's annotations only, guarded by the resourceVersion."""
    annotations: dict[str, str | None] = dict(decision.annotations)
    annotations.update({key: None for key in decision.stale if key in annotations_of(pod)})
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


def _sorted_pods(pods: list[Obj]) -> list[Obj]:
    return sorted(pods, key=lambda pod: (namespace_of(pod), name_of(pod)))


# ----- one-shot passes ------------------------------------------------------------------


def make_elector(api: client.ApiClient, options: Options,
                 on_change: Callable[[bool], None] | None = None) -> LeaderElector:
    """The Lease candidate for `options` (namespace, name, identity, timings)."""
    return LeaderElector(api, options.lease_namespace, options.lease_name, options.identity,
                         lease_duration=options.lease_duration,
                         renew_deadline=options.renew_deadline,
                         retry_period=options.retry_period, on_change=on_change)


@contextlib.contextmanager
def holding_lease(elector: LeaderElector | None,
                  stop: threading.Event) -> Iterator[Callable[[], bool]]:
    """Acquire the Lease (LeaseHeldError if another holder keeps it), renew it in the
    background, release it at the end; yields the may-write check."""
    if elector is None:
        yield _always
        return
    # The first round raises on connection errors; later ones wait out a stale holder.
    if not elector.try_acquire_or_renew():
        wait = elector.lease_duration + 2 * elector.retry_period
        if not elector.acquire(wait, stop):
            raise LeaseHeldError(
                f"lease {elector.namespace}/{elector.name} is held by {elector.holder}: "
                "another reconciler is running (stop it, or let it do the work)")
    renew_stop = threading.Event()
    renewer = threading.Thread(target=elector.run, args=(renew_stop, elector.retry_period),
                               daemon=True, name="lease-renew")
    renewer.start()
    try:
        yield elector.is_leader
    finally:
        renew_stop.set()
        renewer.join(timeout=elector.retry_period + 35)
        elector.release()


def run_once(api: client.ApiClient, policy: Policy, options: Options, *,
             out: Callable[[str], None] = print, metrics: Metrics | None = None,
             stop: threading.Event | None = None) -> Summary:
    """One pass over every pod (listed fresh); takes the Lease unless dry-run."""
    stop = stop or threading.Event()
    elector = None if options.dry_run else make_elector(api, options)
    summary = Summary()
    with holding_lease(elector, stop) as may_write:
        view = read_snapshot(api, (NAMESPACES, NODES, PODS))
        reconciler = Reconciler(api, view, policy, options, may_write=may_write,
                                metrics=metrics, out=out, stop=stop)
        for pod in _sorted_pods(view.all_pods()):
            summary.add(*reconciler.reconcile(pod))
    return summary


def run_cleanup(api: client.ApiClient, options: Options, *,
                out: Callable[[str], None] = print, stop: threading.Event | None = None
                ) -> Summary:
    """Remove poolguard's annotations from every pod; takes the Lease unless dry-run."""
    stop = stop or threading.Event()
    elector = None if options.dry_run else make_elector(api, options)
    summary = Summary()
    with holding_lease(elector, stop) as may_write:
        view = read_snapshot(api, (PODS,))
        reconciler = Reconciler(api, view, None, options, may_write=may_write, out=out,
                                stop=stop)
        for pod in _sorted_pods(view.all_pods()):
            summary.add(reconciler.cleanup(pod))
    return summary


# ----- the long-running service ---------------------------------------------------------


class Service:
    """Watches pods, nodes and namespaces and keeps costs right while it leads."""

    def __init__(self, api: client.ApiClient, policy: Policy, options: Options, *,
                 out: Callable[[str], None] = print, metrics: Metrics | None = None,
                 cluster: LiveCluster | None = None,
                 policy_file: PolicyHolder | None = None) -> None:
        self.options = options
        self.policy_file = policy_file  # re-read when it changes, as the webhook does
        self.metrics = metrics or Metrics()
        self.cluster = cluster or LiveCluster(api, (PODS, NODES, NAMESPACES))
        self.queue = WorkQueue()
        self.elector = None if options.dry_run else make_elector(api, options,
                                                                 self._on_leadership)
        self.reconciler = Reconciler(api, self.cluster, policy, options,
                                     may_write=self.is_leader, metrics=self.metrics, out=out)
        self._failures: Counter[PodKey] = Counter()
        self._worker_died = False
        self.cluster.on_event(self._on_event)
        self.metrics.queue_depth.set_function(lambda: len(self.queue))
        self.metrics.staleness.set_function(self.cluster.staleness_seconds)
        self.metrics.leader.set_function(lambda: 1 if self.is_leader() else 0)

    def is_leader(self) -> bool:
        """May this instance write now (always true in dry-run, which writes nothing)."""
        return self.elector.is_leader() if self.elector else True

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, details) for /healthz: unhealthy only if the worker died."""
        status = self.cluster.sync_status()
        return not self._worker_died, {"leader": self.is_leader(), "queueDepth": len(self.queue),
                                    "synced": status["synced"],
                                    "stalenessSeconds": status["stalenessSeconds"]}

    def run(self, stop: threading.Event) -> None:
        """Run until `stop` is set; then release the Lease and stop the watches."""
        self.reconciler.stop = stop
        self.cluster.start()
        threads: list[threading.Thread] = []
        try:
            log.info("waiting for the pod, node and namespace caches to sync")
            while not self.cluster.wait_for_sync(0.5):
                if stop.is_set():
                    return
            threads = self._start_threads(stop)
            self._resync_loop(stop)
        finally:
            for thread in threads:
                thread.join(timeout=5)
            if self.elector is not None:
                self.elector.release()
            self.cluster.stop()

    def _start_threads(self, stop: threading.Event) -> list[threading.Thread]:
        threads = [threading.Thread(target=self._work, args=(stop,), daemon=True,
                                    name="reconcile-worker")]
        if self.elector is not None:
            threads.append(threading.Thread(target=self.elector.run, args=(stop,),
                                            daemon=True, name="lease"))
        else:
            self.enqueue_all()
        for thread in threads:
            thread.start()
        return threads

    def _resync_loop(self, stop: threading.Event) -> None:
        next_resync = time.monotonic() + self.options.resync_seconds
        while not stop.wait(min(1.0, max(next_resync - time.monotonic(), 0.0))):
            if self._policy_changed():
                next_resync = time.monotonic()  # every pod may want another cost now
            if time.monotonic() >= next_resync:
                next_resync = time.monotonic() + self.options.resync_seconds
                if self.is_leader():
                    self.enqueue_all()

    def _policy_changed(self) -> bool:
        """Reload the policy file if it changed (an invalid file keeps the last good one)."""
        if self.policy_file is None:
            return False
        self.policy_file.refresh()
        if self.policy_file.policy is self.reconciler.policy:
            return False
        self.reconciler.policy = self.policy_file.policy
        log.info("policy changed: re-evaluating every pod")
        return True

    def enqueue_all(self) -> Summary:
        """Evaluate every cached pod; queue those that need a write (a full resync)."""
        summary = Summary()
        for pod in self.cluster.all_pods():
            verdict = self.reconciler.evaluate(pod)
            if verdict.outcome == "patch":
                self.queue.add((namespace_of(pod), name_of(pod)))
            else:
                summary.add(verdict.outcome, verdict.reason)
                self.metrics.record(verdict.outcome, verdict.reason)
        self.metrics.resyncs.inc()
        log.info("resync: %d pods queued, %s", len(self.queue), summary.line())
        return summary

    def _on_leadership(self, leading: bool) -> None:
        if leading:
            self.enqueue_all()

    def _on_event(self, resource: str, event_type: str, obj: Obj, old: Obj | None) -> None:
        if resource == "pods" and event_type == "DELETED":
            self.reconciler.forget((namespace_of(obj), name_of(obj)))
        if event_type == "DELETED" or not self.is_leader():
            return
        if resource == "pods":
            self._enqueue_if_needed(obj)
        elif resource == "nodes" and (old is None or self._pool(old) != self._pool(obj)):
            for pod in self.cluster.all_pods():
                if spec_of(pod).get("nodeName") == name_of(obj):
                    self._enqueue_if_needed(pod)
        elif resource == "namespaces" and (old is None or labels_of(old) != labels_of(obj)):
            for pod in self.cluster.pods(name_of(obj)):
                self._enqueue_if_needed(pod)

    def _pool(self, node: Obj) -> str | None:
        assert self.reconciler.policy is not None
        return self.reconciler.policy.pool_of_node(node)

    def _enqueue_if_needed(self, pod: Obj) -> None:
        if self.reconciler.evaluate(pod).outcome == "patch":
            self.queue.add((namespace_of(pod), name_of(pod)))

    def _work(self, stop: threading.Event) -> None:
        try:
            while not stop.is_set():
                key = self.queue.get(timeout=0.2)
                if key is None:
                    continue
                try:
                    self._process(key)  # type: ignore[arg-type]
                except Exception:
                    log.exception("reconciling %s/%s failed", *key)  # type: ignore[misc]
                finally:
                    self.queue.done(key)
        finally:
            self._worker_died = not stop.is_set()

    def _process(self, key: PodKey) -> None:
        pod = self.cluster.pod(*key)
        if pod is None:
            self._failures.pop(key, None)  # deleted while a retry was pending
            return
        outcome, _ = self.reconciler.reconcile(pod)
        if outcome == FAILED:
            self._failures[key] += 1
            self.queue.add_after(key, min(0.5 * 2 ** (self._failures[key] - 1), 60.0))
        else:
            self._failures.pop(key, None)


# ----- /metrics and /healthz ------------------------------------------------------------
