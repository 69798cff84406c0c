"""The live rebalancer: carries out the rebalance plan while this reconciler holds the Lease.

Each `tick` reads the cluster once, fully (as `rebalance --dry-run` does, so the two plan
alike), and moves one step:

- without a batch under way, it plans (`core.consolidation.rebalance`); the nodes the plan
  frees get poolguard's NoSchedule taint `poolguard.dev/rebalancing` (as Karpenter taints
  a node it disrupts), so no new pod lands there while they empty, and their pods become
  the batch's moves; a node that cannot be tainted makes it abandon the batch unstarted;
- with a batch, each workload with no move in flight, and settled (a rollout or a scale
  that began since the plan is waited for), evicts its next pod through the Eviction
  API, within a cluster-wide budget of moves a minute. The pod's
  PodDisruptionBudget decides: a 429 is a wait (the pod stays first in line), not an
  error. One pod per workload is in flight until its replacement is scheduled and Ready;
- a replacement that landed outside its home pool is a bounce: the batch is abandoned
  (its taints removed) and the workload held back for a while, so the next plan leaves
  it where it is;
- a node of the batch with no GPU pod left is done: its taint goes. A batch whose moves
  take longer than `move_timeout`, or whose nodes are not empty after `batch_timeout`
  (a PodDisruptionBudget that never allows a disruption), is abandoned.

The batch lives in memory: when the process stops it abandons it, and whoever leads next
(this process after a restart, or another replica after a lost Lease) first removes every
taint of poolguard's it finds (`reset`), so none is left behind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import urllib3

from ..cluster.kubeclient import MERGE_PATCH, describe_error, request_json
from ..core.consolidation.pod_cost import node_load
from ..core.consolidation.rebalance.overflow_pods import Mover
from ..core.consolidation.rebalance.rebalance_plan import plan_rebalance
from ..core.consolidation.rebalance.settled import pod_unsettled, unsettled_reason, workload_of
from ..core.objects.kube import name_of, namespace_of, spec_of, uid_of
from ..core.objects.ownership import controller_of
from ..core.policy.policy import Policy
from ..core.view.snapshot import Snapshot
from ..errors import ApiError, ConflictError, NotFoundError
from .metrics import Metrics
from .workqueue import TokenBucket

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("poolguard.rebalancer")

TAINT_KEY = "poolguard.dev/rebalancing"
TAINT = {"key": TAINT_KEY, "effect": "NoSchedule"}
TOO_MANY_REQUESTS = 429


@dataclass(frozen=True)
class RebalanceSettings:
    """How fast and how patiently moves are made (the `reconcile --rebalance-*` flags)."""

    moves_per_minute: float = 6.0
    move_timeout: float = 600.0  # seconds a move may take before the batch is abandoned
    batch_timeout: float = 1800.0  # seconds a batch may keep its nodes tainted
    hold_back: float = 1800.0  # seconds a workload whose replacement bounced stays put


@dataclass
class InFlight:
    """An evicted pod whose replacement is awaited."""

    mover: Mover
    uid: str
    controller: tuple[str, str, str] | None
    siblings: frozenset[str]  # the UIDs of its controller's pods at eviction
    since: float


@dataclass
class Batch:
    """The nodes being emptied and the moves left."""

    nodes: set[str]
    pending: dict[str, deque[Mover]]  # workload -> its moves, in plan order
    started: float
    in_flight: dict[str, InFlight] = field(default_factory=dict)


class Rebalancer:
    """Steps the rebalance plan forward, one `tick` at a time (see the module docstring)."""

    def __init__(self, api: client.ApiClient, read: Callable[[], Snapshot],
                 metrics: Metrics, settings: RebalanceSettings | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 may_write: Callable[[], bool] = lambda: True) -> None:
        self.api, self.read, self.metrics = api, read, metrics
        self.may_write = may_write  # checked before every write: the Lease may be lost
        self.settings = settings or RebalanceSettings()
        self.clock = clock
        self.budget = TokenBucket(self.settings.moves_per_minute / 60.0, 1, clock)
        self.batch: Batch | None = None
        self.held: dict[str, tuple[float, str]] = {}  # workload -> (until, why)
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget any batch and remove every poolguard taint from the nodes (at the start
        of leadership: a taint left by a stopped or deposed leader must not stay)."""
        with self._lock:
            self.batch = None
            nodes = request_json(self.api, "GET", "/api/v1/nodes").get("items") or []
            for node in nodes:
                if any(t.get("key") == TAINT_KEY for t in spec_of(node).get("taints") or ()):
                    self._set_taint(name_of(node), False)

    def tick(self, policy: Policy) -> None:
        """One step: plan a batch, or advance the one under way."""
        with self._lock:
            view = self.read()
            if self.batch is None:
                self._start(view, policy)
            else:
                self._advance(view, policy)

    def forget(self) -> None:
        """Drop the batch without writing (leadership lost: the next leader resets); a
        step under way writes nothing more (`may_write`)."""
        self.batch = None

    def abandon(self, why: str) -> None:
        """Drop the batch and remove its taints (the policy turned it off, shutdown)."""
        with self._lock:
            self._abandon(why)

    # ----- a batch -------------------------------------------------------------------

    def _start(self, view: Snapshot, policy: Policy) -> None:
        now = self.clock()
        self.held = {w: held for w, held in self.held.items() if held[0] > now}
        plan = plan_rebalance(view, policy, {w: why for w, (_, why) in self.held.items()})
        if not plan.freed:
            return
        pending: dict[str, deque[Mover]] = {}
        for move in plan.moves:
            pending.setdefault(move.mover.workload, deque()).append(move.mover)
        self.batch = Batch({node.node for node in plan.freed}, pending, now)
        for node in sorted(self.batch.nodes):
            if not self._set_taint(node, True):  # no eviction without the taint's guard
                self._abandon(f"node {node} could not be tainted")
                return
        log.info("rebalance: emptying %s (%d moves)", ", ".join(sorted(self.batch.nodes)),
                 len(plan.moves))

    def _advance(self, view: Snapshot, policy: Policy) -> None:
        assert self.batch is not None
        if self.clock() - self.batch.started > self.settings.batch_timeout:
            # a budget that never allows a disruption, a pod that tolerates the taint
            self._abandon(f"its nodes were not empty after {self.settings.batch_timeout:.0f}s")
            return
        for workload, flight in list(self.batch.in_flight.items()):
            if self._landing(view, policy, workload, flight):
                return  # the batch was abandoned
        for node in sorted(self.batch.nodes):
            load = node_load(policy, node, view.node(node), view.pods_on_node(node))
            if load.free and not any(m.node == node for q in self.batch.pending.values()
                                     for m in q):
                self._set_taint(node, False)
                self.batch.nodes.discard(node)
                log.info("rebalance: node %s has no GPU pod left", node)
        for workload, queue in self.batch.pending.items():
            if queue and workload not in self.batch.in_flight:
                self._evict_next(view, workload, queue)
        if not self.batch.nodes and not self.batch.in_flight:
            self.batch = None

    def _landing(self, view: Snapshot, policy: Policy, workload: str,
                 flight: InFlight) -> bool:
        """Check an in-flight move; True when it made the batch be abandoned."""
        assert self.batch is not None
        if self.clock() - flight.since > self.settings.move_timeout:
            del self.batch.in_flight[workload]
            self.metrics.rebalance_moves.labels("timeout").inc()
            self._abandon(f"the move of {flight.mover.namespace}/{flight.mover.name} took "
                          f"more than {self.settings.move_timeout:.0f}s")
            return True
        replacement = _replacement(view, flight)
        if replacement is None or not spec_of(replacement).get("nodeName"):
            return False
        pool = policy.pool_of_node(view.node(spec_of(replacement)["nodeName"]))
        if pool != flight.mover.to_pool:
            del self.batch.in_flight[workload]
            self.metrics.rebalance_bounces.inc()
            self.metrics.rebalance_moves.labels("bounced").inc()
            why = (f"its replacement {name_of(replacement)} landed in pool {pool}, not "
                   f"{flight.mover.to_pool}")
            self.held[workload] = (self.clock() + self.settings.hold_back, why)
            self._abandon(f"{workload}: {why}")
            return True
        if pod_unsettled(replacement) is None:
            self.metrics.rebalance_moves.labels("landed").inc()
            del self.batch.in_flight[workload]
        return False

    def _evict_next(self, view: Snapshot, workload: str, queue: deque[Mover]) -> None:
        assert self.batch is not None
        mover = queue[0]
        pod = view.pod(mover.namespace, mover.name)
        if pod is None or spec_of(pod).get("nodeName") != mover.node:
            queue.popleft()  # gone already (a person, the controller): nothing to evict
            return
        workload_now = workload_of(view, pod, mover.namespace)
        if not workload_now.ref or unsettled_reason(workload_now, _siblings(view, pod)):
            return  # a rollout or a scale began since the plan: wait until it settles
        if not self.may_write() or not self.budget.try_acquire():
            return
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": mover.name, "namespace": mover.namespace}}
        path = f"/api/v1/namespaces/{mover.namespace}/pods/{mover.name}/eviction"
        try:
            request_json(self.api, "POST", path, body=body, retry=False)
        except NotFoundError:
            queue.popleft()
            return
        except ApiError as err:
            result = "blocked" if err.status == TOO_MANY_REQUESTS else "failed"
            self.metrics.rebalance_moves.labels(result).inc()
            # the causes name the budget and its healthy pods: the reason a person acts on
            log.info("rebalance: evicting %s/%s: %s (will retry)", mover.namespace,
                     mover.name, " ".join((err.message, *err.causes)))
            return
        except (urllib3.exceptions.HTTPError, OSError) as err:
            self.metrics.rebalance_moves.labels("failed").inc()
            log.warning("rebalance: evicting %s/%s: %s", mover.namespace, mover.name,
                        describe_error(err))
            return
        queue.popleft()
        self.metrics.rebalance_moves.labels("evicted").inc()
        siblings = frozenset(uid_of(p) for p in _siblings(view, pod))
        self.batch.in_flight[workload] = InFlight(mover, uid_of(pod), controller_of(pod),
                                                  siblings, self.clock())
        log.info("rebalance: evicted %s/%s from %s (%s) for %s", mover.namespace, mover.name,
                 mover.node, mover.pool, mover.to_pool)

    def _abandon(self, why: str) -> None:
        if self.batch is None:
            return
        left = sum(len(q) for q in self.batch.pending.values()) + len(self.batch.in_flight)
        if left:
            self.metrics.rebalance_moves.labels("abandoned").inc(left)
        for node in sorted(self.batch.nodes):
            self._set_taint(node, False)
        log.warning("rebalance: abandoned the batch (%s)", why)
        self.batch = None

    # ----- the taint -------------------------------------------------------------------

    def _set_taint(self, node: str, present: bool) -> bool:
        """Add or remove poolguard's taint, guarded by the node's resourceVersion; False
        when that failed (logged) or this process may not write any more."""
        if not self.may_write():
            return False
        for _ in range(3):
            try:
                current = request_json(self.api, "GET", f"/api/v1/nodes/{node}")
                taints = [t for t in spec_of(current).get("taints") or ()
                          if t.get("key") != TAINT_KEY]
                if present:
                    taints.append(dict(TAINT))
                patch = {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
                         "spec": {"taints": taints}}
                request_json(self.api, "PATCH", f"/api/v1/nodes/{node}", body=patch,
                             content_type=MERGE_PATCH)
                return True
            except ConflictError:
                continue
            except NotFoundError:
                return not present  # a node that is gone holds no taint
            except (ApiError, urllib3.exceptions.HTTPError, OSError) as err:
                log.warning("rebalance: %s the taint on node %s failed: %s",
                            "adding" if present else "removing", node, describe_error(err))
                return False
        log.warning("rebalance: node %s kept changing; its taint was not %s", node,
                    "added" if present else "removed")
        return False


def _siblings(view: Snapshot, pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    controller = controller_of(pod)
    return [p for p in view.pods(namespace_of(pod)) if controller_of(p) == controller]


def _replacement(view: Snapshot, flight: InFlight) -> Mapping[str, Any] | None:
    """The pod the controller made after the eviction: one of its pods that was not
    there before (None while the evicted pod is still terminating, or none is made)."""
    pods = [p for p in view.pods(flight.mover.namespace)
            if controller_of(p) == flight.controller]
    if any(uid_of(p) == flight.uid for p in pods):
        return None
    new = sorted((p for p in pods if uid_of(p) not in flight.siblings), key=name_of)
    return new[0] if new else None
