"""The long-running reconciler: a watch-fed cache, a work queue, resyncs and leadership.

`Service` watches pods, nodes and namespaces. A pod event queues that pod, or, on a node
of a pool that consolidates, the node when the pod came, went or stopped holding it (one
queued node stands for any number of events: its pods are re-ranked once, and only
they); a node whose pool or GPUs changed queues itself, a namespace whose labels
changed queues its pods,
and every --resync-seconds (and whenever the policy file changes) every cached pod is
evaluated again. One worker thread writes, and only while this instance holds the Lease;
a failed write is retried with exponential backoff.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..cluster.listing import read_snapshot
from ..cluster.live import LiveCluster
from ..cluster.memory_budget import RECONCILER
from ..cluster.memory_watch import MemoryWatch
from ..cluster.policy_event import configmap_ref, post_policy_event
from ..cluster.state import PolicyHolder
from ..core.consolidation.pod_cost import needs_load, view_node_load
from ..core.objects.kube import Obj, labels_of, meta, name_of, namespace_of, spec_of, status_of
from ..core.policy.policy import Policy
from ..core.policy.policy_change import change_refusal
from ..core.policy.pool_coverage import pool_coverage
from ..core.view.resource import NAMESPACES, NODES, PODS
from .brake import REWRITES_HELD, brake_reason, count_pass, policy_generation, rewrites
from .decide import FAILED, KEPT, PATCH, SKIPPED, PodKey, PodNeed
from .lease import make_elector
from .metrics import Metrics
from .options import Options
from .passes import Summary
from .rebalancer import Rebalancer, RebalanceSettings
from .workqueue import WorkQueue
from .writer import Reconciler

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("poolguard.reconciler")


@dataclass(frozen=True)
class NodeKey:
    """A queued node: every pod on it is evaluated again (its ranks may have moved)."""

    name: str


def occupancy_changed(old: Obj | None, new: Obj, event_type: str) -> bool:
    """Did the event change what the pod holds on its node (came, went, finished)?"""
    if old is None or event_type == "DELETED":
        return True
    return (status_of(old).get("phase") != status_of(new).get("phase")
            or bool(meta(old).get("deletionTimestamp")) != bool(meta(new).get("deletionTimestamp"))
            or spec_of(old) != spec_of(new))


class Service:
    """Watches pods, nodes and namespaces and keeps costs right while it leads."""

    def __init__(self, api: client.ApiClient, policy: Policy, options: Options, *,
                 out: Callable[[str], None] = print, metrics: Metrics | None = None,
                 cluster: LiveCluster | None = None,
                 policy_file: PolicyHolder | None = None) -> None:
        self.options, self.api = options, api
        self.policy_file = policy_file  # re-read when it changes, as the webhook does
        self.metrics = metrics or Metrics()
        self.cluster = cluster or LiveCluster(api, (PODS, NODES, NAMESPACES))
        self.queue = WorkQueue()
        self.elector = None if options.dry_run else make_elector(api, options,
                                                                 self._on_leadership)
        self.reconciler = Reconciler(api, self.cluster, policy, options,
                                     may_write=self.is_leader, metrics=self.metrics, out=out)
        # Moving overflow home reads the cluster fully at each step (the watch cache keeps
        # too little of pods and nodes for the plan), and only while the policy enables it.
        self.rebalancer = None if options.dry_run else Rebalancer(
            api, lambda: read_snapshot(api), self.metrics,
            RebalanceSettings(moves_per_minute=options.rebalance_moves_per_minute),
            may_write=self.is_leader)
        self._rebalance_reset = threading.Event()  # set when leadership begins
        self._failures: Counter[PodKey] = Counter()
        self._worker_died = False
        self.cluster.on_event(self._on_event)
        self.generation = policy_generation(policy_file.path if policy_file else None)
        self._held: str | None = None  # why rewrites are held (brake.py)
        if policy_file is not None:
            policy_file.vet = self._vet_policy
            policy_file.on_refused = self._policy_refused
        self.metrics.queue_depth.set_function(lambda: len(self.queue))
        self.metrics.staleness.set_function(self.cluster.staleness_seconds)
        self.metrics.leader.set_function(lambda: 1 if self.is_leader() else 0)
        self.memory = MemoryWatch(RECONCILER, self.cluster.pod_count,
                                  on_check=self.metrics.publish_memory)

    def is_leader(self) -> bool:
        """May this instance write now (always true in dry-run, which writes nothing)."""
        return self.elector.is_leader() if self.elector else True

    def health(self) -> tuple[bool, dict[str, Any]]:
        """(healthy, details) for /healthz: unhealthy only if the worker died."""
        status = self.cluster.sync_status()
        details = {"leader": self.is_leader(), "queueDepth": len(self.queue),
                   "synced": status["synced"], "stalenessSeconds": status["stalenessSeconds"]}
        if self.memory.latest is not None:  # named, never a reason to be unhealthy
            details["memory"] = self.memory.latest.warning or "ok"
        return not self._worker_died, details

    def run(self, stop: threading.Event) -> None:
        """Run until `stop` is set; then release the Lease and stop the watches."""
        self.reconciler.stop = stop
        self.cluster.start()
        self.memory.start(stop=stop)
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
            if self.rebalancer is not None and self.is_leader():
                self._guarded(functools.partial(self.rebalancer.abandon, "stopping"))
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
        if self.rebalancer is not None:
            threads.append(threading.Thread(target=self._rebalance_loop, args=(stop,),
                                            daemon=True, name="rebalance"))
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
        self.generation = policy_generation(self.policy_file.path)
        log.info("policy changed: re-evaluating every pod")
        return True

    def _vet_policy(self, current: Policy, new: Policy) -> str | None:
        """A policy change that leaves a protected pool without nodes is refused
        (`policy_change`): its writes would move every protected pod's cost."""
        if not self.cluster.synced:
            return None  # the first full pass's brake judges it instead
        return change_refusal(current, new, self.cluster.nodes())

    def _policy_refused(self, reason: str) -> None:
        self.metrics.policy_refused.inc()
        if self.is_leader():  # one Event, not one per replica
            self._post_event("PolicyRefused", f"poolguard-reconciler kept the last good "
                             f"policy: {reason}")

    def _post_event(self, reason: str, message: str) -> None:
        if self.options.policy_configmap is not None and not self.options.dry_run:
            post_policy_event(self.api, configmap_ref(self.options.policy_configmap), reason,
                              message, "poolguard-reconciler")

    def _brake(self, needs: list[tuple[Obj, PodNeed]]) -> None:
        """Hold every rewrite of a managed cost when a full pass would rewrite too many
        (brake.py); say so once per new reason, and again when released."""
        policy = self.reconciler.policy
        assert policy is not None
        count = count_pass(policy, needs)
        reason = brake_reason(count, self.options.max_rewrite_share, self.generation,
                              self.options.accept_rewrites)
        self.reconciler.hold_rewrites = reason is not None
        self.metrics.rewrites_held.set(count.rewritten if reason else 0)
        if reason is not None and reason != self._held:
            log.error("rewrites held: %s", reason)
            self._post_event("RewritesHeld", f"poolguard-reconciler: {reason}")
        elif reason is None and self._held is not None:
            log.info("rewrites no longer held: %s", count.words())
        self._held = reason
        writes = sum(need.outcome == PATCH for _, need in needs)
        if reason is None and writes:
            for finding in pool_coverage(policy, self.cluster.nodes()).disarming:
                # never silently: costs written under a policy that protects no node
                log.warning("writing %d costs under a policy that protects no node: %s",
                            writes, finding.message)

    def enqueue_all(self) -> Summary:
        """Evaluate every cached pod; queue those that need a write (a full resync)."""
        self.metrics.set_free_nodes(self._free_nodes())
        summary = Summary()
        foreign: Counter[str] = Counter()
        needs = [(facts.pod, self.reconciler.evaluate(facts.pod), facts.cost_writer)
                 for facts in self.cluster.all_pod_facts()]
        self._brake([(pod, verdict) for pod, verdict, _ in needs])
        for pod, verdict, cost_writer in needs:
            if verdict.outcome == PATCH and self.reconciler.hold_rewrites and rewrites(
                    self.reconciler.policy, pod, verdict):
                summary.add(SKIPPED, REWRITES_HELD)
                self.metrics.record(SKIPPED, REWRITES_HELD)
            elif verdict.outcome == PATCH:
                self.queue.add((namespace_of(pod), name_of(pod)))
            else:
                summary.add(verdict.outcome, verdict.reason)
                self.metrics.record(verdict.outcome, verdict.reason)
                if verdict.outcome == KEPT and cost_writer:
                    foreign[cost_writer] += 1
        self.metrics.set_foreign_cost_pods(foreign)
        self.metrics.resyncs.inc()
        log.info("resync: %d pods queued, %s", len(self.queue), summary.line())
        return summary

    def _on_leadership(self, leading: bool) -> None:
        if leading:
            self._rebalance_reset.set()  # the rebalance thread removes a former leader's taints
            self.enqueue_all()
        else:  # only the leader counts: a former leader's numbers would go stale
            self.metrics.set_foreign_cost_pods({})
            if self.rebalancer is not None:
                self.rebalancer.forget()  # the next leader removes its taints

    def _rebalance_loop(self, stop: threading.Event) -> None:
        """Step the rebalance plan every --rebalance-interval while leading and enabled."""
        assert self.rebalancer is not None
        rebalancer = self.rebalancer
        while not stop.wait(self.options.rebalance_interval):
            policy = self.reconciler.policy
            if not self.is_leader() or policy is None:
                continue
            if self._rebalance_reset.is_set():  # whatever the policy: no taint may stay
                self._rebalance_reset.clear()
                self._guarded(rebalancer.reset)
            if policy.rebalance.enabled:
                self._guarded(functools.partial(rebalancer.tick, policy))
            else:
                self._guarded(lambda: rebalancer.abandon("rebalance.enabled is false"))

    @staticmethod
    def _guarded(step: Callable[[], None]) -> None:
        """Run a rebalance step; a failure is logged, and the next step tries again."""
        try:
            step()
        except Exception:
            log.exception("rebalance step failed")

    def _free_nodes(self) -> dict[str, int]:
        """Per pool of the policy, its nodes with no pod holding them."""
        policy = self.reconciler.policy
        assert policy is not None
        counts = {pool.name: 0 for pool in policy.pools}
        for node in self.cluster.nodes():
            pool = policy.pool_of_node(node)
            if pool in counts and view_node_load(policy, self.cluster, name_of(node), node).free:
                counts[pool] += 1
        return counts

    def _on_event(self, resource: str, event_type: str, obj: Obj, old: Obj | None) -> None:
        if resource == "pods" and event_type == "DELETED":
            self.reconciler.forget((namespace_of(obj), name_of(obj)))
        if not self.is_leader():
            return
        if resource == "pods":
            node = spec_of(obj).get("nodeName")
            if node and self._ranks_on(node) and occupancy_changed(old, obj, event_type):
                self.queue.add(NodeKey(node))
            elif event_type != "DELETED":
                self._enqueue_if_needed(obj)
        elif event_type == "DELETED":
            return
        elif resource == "nodes" and (old is None or self._pool(old) != self._pool(obj)
                                      or status_of(old) != status_of(obj)):
            self.queue.add(NodeKey(name_of(obj)))
        elif resource == "namespaces" and (old is None or labels_of(old) != labels_of(obj)):
            for pod in self.cluster.pods(name_of(obj)):
                self._enqueue_if_needed(pod)

    def _ranks_on(self, node_name: str) -> bool:
        """Do the costs of pods on this node depend on each other (a consolidating pool)?"""
        assert self.reconciler.policy is not None
        pool = self.reconciler.policy.pool_of_node(self.cluster.node(node_name))
        return needs_load(self.reconciler.policy, pool)

    def _pool(self, node: Obj) -> str | None:
        assert self.reconciler.policy is not None
        return self.reconciler.policy.pool_of_node(node)

    def _enqueue_if_needed(self, pod: Obj) -> None:
        if self.reconciler.evaluate(pod).outcome == PATCH:
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

    def _process(self, key: PodKey | NodeKey) -> None:
        if isinstance(key, NodeKey):
            for pod in self.cluster.pods_on_node(key.name):
                if self.reconciler.evaluate(pod).outcome == PATCH:
                    self._process((namespace_of(pod), name_of(pod)))
            return
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
