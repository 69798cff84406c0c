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
`predicted`, which also holds plan on the live cluster to plan on the state it saved) by
tests/e2e/workloads.py `compare` on the pods deleted while the scale-down stalls (unready
pods unready, new ones unscheduled): every deleted pod predicted, every certain victim
deleted, no held pod deleted. When more can go (a pod not Running and Ready or not yet
available, possible victims or held pods), every pod is then healed round after round
until the controller rests (tests/e2e/differential_run.py `recover`), and every pod deleted
by then must have been a victim, possible victim or held pod. The verdict is judged on both
observations (tests/e2e/rule_judge.py): a rule the real deletions broke that plan allowed
is a missed denial, a mismatch.

E2E_CLONESET_STATES (default 50), E2E_CLONESET_SEED (first seed, default 1),
E2E_CLONESET_SEEDS (replay), E2E_PARALLEL (default 8). Failing seeds keep their state,
prediction and deletions in RUN_DIR/differential-cloneset/.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.e2e.differential_run import (
    Outcome,
    judge,
    keep_mismatch,
    needs_recovery,
    random_fate,
    recover,
    run_differential,
    seeds,
    tolerating_deletion,
)
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


class CloneSetState:
    """One random CloneSet in namespace csdiff-SEED, driven to a settled cluster."""

    def __init__(self, env: Environment, seed: int, out: Path) -> None:
        self.env, self.seed, self.out = env, seed, out
        rng = self.rng = random.Random(seed)
        self.ns = f"csdiff-{seed}"
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
        self.env.new_namespace(self.ns, {"e2e.poolguard.dev/differential": "true"})
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
        settle_after_scale(self.env, self.ns, "c", quiet=2.0)

    def place(self, pod: Mapping[str, Any]) -> None:
        name = pod["metadata"]["name"]

        def fate() -> None:
            if self.rng.random() < self.by_hand:
                self.env.core.patch_namespaced_pod(name, self.ns, {"metadata": {"annotations": {
                    COST_ANNOTATION: str(self.rng.choice([-500, 0, 50, 5000]))}}})
            random_fate(self.env, self.ns, name, self.rng, self.unhealthy, restarts=True)

        tolerating_deletion(self.env, self.ns, name, fate)

    def run(self) -> Outcome:
        started = time.monotonic()
        self.build()
        built = time.monotonic()
        rng = self.rng
        target = rng.randint(0, self.replicas - 1)
        how = rng.choice(["scale", "patch"])
        before = active_pods(self.env, self.ns)
        # What the request sets beside the replicas, which plan must be told of (the
        # replay reads the CloneSet with it); without it, plan on the live cluster and on
        # the state it saved must agree.
        beside: dict[str, Any] = {}
        if self.below_count:  # named pods, ready or not, some maybe held back
            how = "patch"
            named = rng.sample(sorted(before), min(len(before), rng.choice([1, 2])))
            beside["scaleStrategy"] = {"maxUnavailable": 1, "podsToDelete": named}
        elif how == "patch" and rng.random() < 0.3:
            beside["scaleStrategy"] = {"podsToDelete": [rng.choice(sorted(before))]}
        self.description += f" -> {target} by {how} {beside.get('scaleStrategy', '')}"
        state = self.out / f"seed-{self.seed}.state.json"
        if how == "scale":
            scale = ["scale", "clonesets.apps.kruise.io/c", f"--replicas={target}"]
        else:
            scale = ["patch", "clonesets.apps.kruise.io", "c", "--type=merge", "-p",
                     json.dumps({"spec": {"replicas": target, **beside}})]
        predicted_at = time.monotonic()
        document, done = predicted(self.env, self.ns, "c", target,
                                   lambda: self.env.kubectl("-n", self.ns, *scale), beside,
                                   saved=state)
        assert done.code == 0, str(done)
        settle_after_scale(self.env, self.ns, "c")
        deleted = deleted_since(before, active_pods(self.env, self.ns))
        recovered = None
        if needs_recovery(self.env, self.ns, document, self.min_ready):
            recover(self.env, self.ns, rng,
                    lambda: settle_after_scale(self.env, self.ns, "c", quiet=2.0), rounds=20)
            recovered = deleted_since(before, active_pods(self.env, self.ns))
        self.description += (
            f" victims={len(document['victims'])} blocked={len(document['blocked'])}"
            f" deleted={len(deleted)}"
            + (f" recovered={len(recovered)}" if recovered is not None else "")
            + f" [build {built - started:.0f}s, plan and scale "
            f"{time.monotonic() - predicted_at:.0f}s]")
        judged = judge(self.env, document, deleted, recovered)
        if judged.problems:
            keep_mismatch(self.out, self.seed, self.description, document, deleted,
                          judged.problems, recovered)
        else:
            state.unlink(missing_ok=True)
        classes = [f"CloneSet{' below-count' if self.below_count else ''}", *judged.classes]
        return Outcome(self.seed, self.description, judged.problems, classes=classes,
                       kind="CloneSet")


def test_differential_prediction_matches_the_real_cloneset_controller(
        env: Environment, cloneset_controller: CloneSetController) -> None:
    env.set_policy(enforcement="warn")  # judge the prediction, not the verdict
    run_differential(env, "differential-cloneset", CloneSetState, seeds("E2E_CLONESET", 50))
