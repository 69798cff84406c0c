"""Which GPU pods on an unprotected pool's node may move home, and why the others stay.

A pod moves (a `Mover`) when all of these hold, else it stays (a `Stayer`, with the
first reason that keeps it):

- it holds its node (`node_occupancy`: it requests GPUs on a GPU node);
- it belongs to a serving workload (`settled`: not training, not a DaemonSet's);
- its home (`home_pool`) is a protected pool of the policy, and it runs elsewhere, in an
  unprotected pool: moves only go toward a more protected pool;
- its workload is settled (`settled`) and not held back (the live rebalancer holds back a
  workload whose replacement landed outside its home);
- some node of its home pool would admit it, resources aside (`scheduling_fit`); which
  ones is kept for the packing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...objects.kube import name_of, namespace_of
from ...objects.ownership import Controller, controller_of
from ...policy.policy import Policy
from ...view.cluster import ClusterView
from .home_pool import home_of
from .resource_requests import CPU, MEMORY, pod_requests
from .scheduling_fit import admits
from .settled import unsettled_reason, workload_of


@dataclass(frozen=True)
class Mover:
    """A pod that may go home: where it is, where it goes, what it needs there."""

    namespace: str
    name: str
    workload: str
    node: str
    pool: str
    to_pool: str
    gpus: int
    requests: Mapping[str, int]
    eligible: tuple[str, ...]  # the home pool's nodes that admit it, resources aside
    why: str  # why it moves, in words

    @property
    def ref(self) -> tuple[str, str]:
        return (self.namespace, self.name)


@dataclass(frozen=True)
class Stayer:
    """A GPU pod of an unprotected pool that does not move, and why."""

    namespace: str
    name: str
    node: str
    reason: str


@dataclass(frozen=True)
class TargetNode:
    """A node of a protected pool that replacements may land on."""

    name: str
    pool: str
    node: Mapping[str, Any]


class Classifier:
    """Classifies the GPU pods of one view, reading each controller's pods once."""

    def __init__(self, view: ClusterView, policy: Policy, targets: Sequence[TargetNode],
                 held: Mapping[str, str] | None = None) -> None:
        self.view = view
        self.policy = policy
        self.held = held or {}  # workload -> why it is held back (a replacement bounced)
        self.resources = (*policy.gpu_resources, CPU, MEMORY)
        self.targets_by_pool: dict[str, list[TargetNode]] = defaultdict(list)
        for target in targets:
            self.targets_by_pool[target.pool].append(target)
        self._siblings: dict[str, dict[Controller, list[Mapping[str, Any]]]] = {}

    def classify(self, pod: Mapping[str, Any], node: str, pool: str,
                 gpus: int) -> Mover | Stayer:
        """`pod`, a GPU holder on `node` of the unprotected `pool`: a Mover or a Stayer."""
        namespace, name = namespace_of(pod), name_of(pod)

        def stay(reason: str) -> Stayer:
            return Stayer(namespace, name, node, reason)

        workload = workload_of(self.view, pod, namespace)
        if not workload.ref:
            return stay(workload.why_not)
        if workload.ref in self.held:
            return stay(f"{workload.ref} is held back: {self.held[workload.ref]}")
        home = home_of(pod, self.policy)
        if home.pool is None:
            return stay(f"no home pool: {home.describe()}")
        if home.pool == pool:
            return stay(f"it is at home: {home.describe()}")
        if self.policy.pool_by_name(home.pool) is None:
            return stay(f"its home {home.describe()} is not a pool of the policy")
        if not self.policy.is_protected(home.pool):
            return stay(f"its home {home.describe()} is not protected; pods move only "
                        "toward a protected pool")
        unsettled = unsettled_reason(workload, self._sibling_pods(pod, namespace))
        if unsettled:
            return stay(f"{workload.ref} is not settled: {unsettled}")
        requests = pod_requests(pod, self.resources)
        eligible, refused = self._eligible(pod, home.pool)
        if not eligible:
            return stay(f"no node of its home pool {home.pool} would admit it: "
                        + ("; ".join(refused) or "the pool has no node"))
        return Mover(namespace, name, workload.ref, node, pool, home.pool, gpus, requests,
                     eligible, f"away from its home, {home.describe()}; {workload.ref} is "
                     "settled")

    def _eligible(self, pod: Mapping[str, Any], pool: str) -> tuple[tuple[str, ...], list[str]]:
        """(names of `pool`'s nodes that admit `pod`, why each other one does not)."""
        eligible, refused = [], []
        for target in self.targets_by_pool.get(pool, ()):
            why = admits(pod, target.node)
            if why is None:
                eligible.append(target.name)
            else:
                refused.append(f"{target.name} {why}")
        return tuple(eligible), refused

    def _sibling_pods(self, pod: Mapping[str, Any], namespace: str
                      ) -> list[Mapping[str, Any]]:
        """The pods of `pod`'s direct controller in `namespace`."""
        by_controller = self._siblings.get(namespace)
        if by_controller is None:
            by_controller = defaultdict(list)
            for other in self.view.pods(namespace):
                controller = controller_of(other)
                if controller is not None:
                    by_controller[_key(controller)].append(other)
            self._siblings[namespace] = by_controller
        controller = controller_of(pod)
        return by_controller.get(_key(controller), []) if controller else [pod]


def _key(controller: Controller) -> Controller:
    """A controller reference as a key: by UID when it has one, else kind and name."""
    uid, kind, name = controller
    return (uid, "", "") if uid else ("", kind, name)

