"""Differential fidelity for OpenKruise CloneSets: the prediction against what the real
CloneSet controller (tests/e2e/kruise.py, kruise v1.8.0) deletes.

For each seed, a random CloneSet is built in its own namespace: 2-8 pods, sometimes a second
template revision that a partition keeps some pods from (the update runs with
maxUnavailable 100% to finish quickly; the CloneSet's own maxUnavailable and
minReadySeconds are set afterwards). In the class `below-count`, `scaleStrategy.maxUnavailable`
is 1, a pod is turned not ready and another deleted, so the controller stays below its count
(creation held back) or has an unscheduled replacement, and the scale-down names one or two
pods in `scaleStrategy.podsToDelete`. The driver is its pods' scheduler and kubelet, as in
tests/e2e/test_differential.py: each pod goes to a node of a random pool (through
`pods/binding`, so poolguard's binding webhook sets its cost) or stays unscheduled, and is
Running and Ready for seconds to days, Running and not ready, Pending or Unknown, with 0-2
restarts; some get a person's deletion cost. Then a scale-down to a random count goes through
`kubectl scale` (`clonesets/scale`) or a `spec.replicas` patch (sometimes naming a pod in
`scaleStrategy.podsToDelete`), and the pods the controller deletes are compared with the
plan (`plan --workload clone/NS/c --output json`, run just before; tests/e2e/kruise.py
`predicted`, which also holds plan on the live cluster to plan on the state it saved),
and judged, while the scale-down stalls (no held pod deleted) and after recovery, as
tests/e2e/differential_state.py says.

E2E_CLONESET_STATES (default 50), E2E_CLONESET_SEED (first seed, default 1),
E2E_CLONESET_SEEDS (replay), E2E_PARALLEL (default 8). Failing seeds keep their state,
prediction and deletions in RUN_DIR/differential-cloneset/.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.e2e.differential_run import random_fate, run_differential, seeds, tolerating_deletion
from tests.e2e.differential_state import DifferentialState
from tests.e2e.fake_kubelet import STRATEGIC, pod_status
from tests.e2e.harness import COST_ANNOTATION, Environment, is_active
from tests.e2e.kruise import (
    CloneSetController,
    cloneset,
    drive,
    predicted,
    settle_after_scale,
)
from tests.e2e.lws import deleted_since
from tests.e2e.workloads import active_pods, apply


class CloneSetState(DifferentialState):
    """One random CloneSet `c` in namespace csdiff-SEED."""

    prefix = "csdiff"
    kind = "CloneSet"
    recovery_rounds = 20

    def __init__(self, env: Environment, seed: int, out: Path) -> None:
        super().__init__(env, seed, out)
        rng = self.rng
        self.replicas = rng.randint(2, 8)
        self.revisions = rng.choice([1, 1, 2])
        self.partition = rng.randint(0, self.replicas - 1) if self.revisions == 2 else 0
        self.max_unavailable = rng.choice(["20%", "20%", 1, 2, "50%"])
        self.min_ready = rng.choice([0, 0, 0, 3600])
        self.unhealthy = rng.choice([0.0, 0.1, 0.3])
        self.by_hand = rng.choice([0.0, 0.0, 0.3])  # chance of a person's cost on a pod
        self.below_count = rng.random() < 0.3
        self.description = (f"CloneSet{' below-count' if self.below_count else ''} "
                            f"replicas={self.replicas} revisions={self.revisions} "
                            f"partition={self.partition} maxUnavailable={self.max_unavailable} "
                            f"minReadySeconds={self.min_ready} unhealthy={self.unhealthy}")

    def build(self) -> None:
        placed: set[str] = set()
        apply(self.env, self.ns, cloneset("c", self.replicas, max_unavailable="100%"))
        drive(self.env, self.ns, "c", self.place, placed)
        if self.revisions == 2:
            apply(self.env, self.ns, cloneset("c", self.replicas, revision=2,
                                              partition=self.partition,
                                              max_unavailable="100%"))
            drive(self.env, self.ns, "c", self.place, placed,
                  updated=self.replicas - self.partition)
        final = cloneset("c", self.replicas, revision=self.revisions, partition=self.partition,
                         max_unavailable=self.max_unavailable, min_ready_seconds=self.min_ready)
        if self.below_count:
            final["spec"]["scaleStrategy"]["maxUnavailable"] = 1
        apply(self.env, self.ns, final)
        drive(self.env, self.ns, "c", self.place, placed)
        if self.below_count:
            self.fall_below_count()

    def fall_below_count(self) -> None:
        """One pod turned not ready (its probe failing), another deleted: with
        `scaleStrategy.maxUnavailable` 1 the controller holds the replacement back, or
        creates it, and it stays unscheduled (the driver places no more pods)."""
        pods = sorted(p["metadata"]["name"] for p in self.env.pods(self.ns) if is_active(p))
        sick, gone = self.rng.sample(pods, 2)
        pod = self.env.api_get(f"/api/v1/namespaces/{self.ns}/pods/{sick}")
        if pod["spec"].get("nodeName"):
            self.env.core.patch_namespaced_pod_status(
                sick, self.ns, {"status": pod_status(pod, phase="Running", ready=False)},
                _content_type=STRATEGIC)
        self.env.kubectl("-n", self.ns, "delete", "pod", gone, "--grace-period=0", "--force",
                         check=True)
        self.description += f" not-ready={sick} deleted={gone}"
        self.settle()

    def settle(self, quiet: bool = True) -> None:
        """Until the controller observed the spec and the pods stopped changing for 2 s."""
        settle_after_scale(self.env, self.ns, "c", quiet=2.0 if quiet else 0.0)

    def settle_scaled(self) -> None:
        settle_after_scale(self.env, self.ns, "c")

    def place(self, pod: Mapping[str, Any]) -> None:
        name = pod["metadata"]["name"]

        def fate() -> None:
            if self.rng.random() < self.by_hand:
                self.env.core.patch_namespaced_pod(name, self.ns, {"metadata": {"annotations": {
                    COST_ANNOTATION: str(self.rng.choice([-500, 0, 50, 5000]))}}})
            random_fate(self.env, self.ns, name, self.rng, self.unhealthy, restarts=True)

        tolerating_deletion(self.env, self.ns, name, fate)

    def choose_target(self) -> int:
        """A random count, by `/scale` or a patch; what the request sets beside the
        replicas (`beside`), which plan must be told of: the replay reads the CloneSet with
        it (without it, plan on the live cluster and on the state it saved must agree)."""
        rng = self.rng
        target = rng.randint(0, self.replicas - 1)
        self.how = rng.choice(["scale", "patch"])
        self.before = active_pods(self.env, self.ns)
        self.beside: dict[str, Any] = {}
        if self.below_count:  # named pods, ready or not, some maybe held back
            self.how = "patch"
            named = rng.sample(sorted(self.before), min(len(self.before), rng.choice([1, 2])))
            self.beside["scaleStrategy"] = {"maxUnavailable": 1, "podsToDelete": named}
        elif self.how == "patch" and rng.random() < 0.3:
            self.beside["scaleStrategy"] = {"podsToDelete": [rng.choice(sorted(self.before))]}
        self.description += (f" -> {target} by {self.how} "
                             f"{self.beside.get('scaleStrategy', '')}")
        return target

    def scale_command(self, target: int) -> list[str]:
        if self.how == "scale":
            return ["scale", "clonesets.apps.kruise.io/c", f"--replicas={target}"]
        return ["patch", "clonesets.apps.kruise.io", "c", "--type=merge", "-p",
                json.dumps({"spec": {"replicas": target, **self.beside}})]

    def plan_and_scale(self, target: int, saved: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        """The prediction of tests/e2e/kruise.py `predicted` (plan just before the scale,
        replayed on the state it saved after it), with the pods read before either."""
        document, done = predicted(
            self.env, self.ns, "c", target,
            lambda: self.env.kubectl("-n", self.ns, *self.scale_command(target)), self.beside,
            saved=saved)
        assert done.code == 0, str(done)
        return document, self.before

    def situation(self, target: int) -> list[str]:
        return [f"CloneSet{' below-count' if self.below_count else ''}"]

    def deleted(self, before: Mapping[str, Any]) -> set[str]:
        return deleted_since(before, active_pods(self.env, self.ns))


def test_differential_prediction_matches_the_real_cloneset_controller(
        env: Environment, cloneset_controller: CloneSetController) -> None:
    env.set_policy(enforcement="warn")  # judge the prediction, not the verdict
    run_differential(env, "differential-cloneset", CloneSetState, seeds("E2E_CLONESET", 50))
