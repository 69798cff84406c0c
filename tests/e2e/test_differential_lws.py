"""Differential fidelity for LeaderWorkerSets: `plan`'s prediction against what the real LWS
controller (tests/e2e/lws.py), the StatefulSet controller and the garbage collector delete.

For each seed, a random LeaderWorkerSet is built in its own namespace: 2-5 groups of 1-4
pods, startup policy LeaderCreated or LeaderReady, a maxSurge that makes the controller keep
unready groups for a while, sometimes mid rolling update (a second template revision that
unready groups stop): in the class `unready-update` the new revision's pods are mostly not
ready (the update stands with its replacements unready), in `partition-surge` a partition
holds the update with maxSurge set (the controller keeps the surge groups while it holds).
The driver is its pods' scheduler and kubelet, as in
tests/e2e/test_differential.py: each pod goes to a node of a random pool or stays
unscheduled, and is Running and Ready, Running and not ready, Pending or Unknown (never
restarted: a restart makes the LWS controller recreate the whole group, which the driver
would then repeat forever). Then `plan --workload lws/NS/w` predicts a scale-down to a
random count, through `kubectl scale` or a `spec.replicas` patch, and the deletions are
compared and judged, while the scale-down stalls (the groups `plan` reports blocked left
standing) and after recovery, as tests/e2e/differential_state.py says.

E2E_LWS_STATES (default 50), E2E_LWS_SEED (first seed, default 1), E2E_LWS_SEEDS (replay),
E2E_PARALLEL (default 8). Failing seeds keep their state, plan and deletions in
RUN_DIR/differential-lws/.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.e2e.controlplane import wait_for
from tests.e2e.differential_run import random_fate, run_differential, seeds, tolerating_deletion
from tests.e2e.differential_state import PLACED, DifferentialState
from tests.e2e.fake_kubelet import MANUAL_LABEL
from tests.e2e.harness import Environment, is_active
from tests.e2e.lws import API, LwsController, deleted_since, leader_worker_set, lws_template
from tests.e2e.workloads import active_pods, apply, wait_settled

REVISION = "e2e.poolguard.dev/revision"
# A state's update class: none, a plain update, an update whose replacements are mostly not
# ready, a partition holding an update with maxSurge set.
CLASSES = {"steady": 4, "update": 2, "unready-update": 2, "partition-surge": 2}
# After the controller settled with blocked groups, how long they are watched more (as the
# main differential's STALL_MARGIN: a group deleted on the next sync is gone well before).
STALL_MARGIN = 5.0


class LwsState(DifferentialState):
    """One random LeaderWorkerSet in namespace lwsdiff-SEED."""

    prefix = "lwsdiff"
    kind = "LeaderWorkerSet"
    stall_margin = STALL_MARGIN
    recovery_rounds = 30

    def __init__(self, env: Environment, seed: int, out: Path) -> None:
        super().__init__(env, seed, out)
        rng = self.rng
        self.replicas = rng.randint(2, 5)
        self.size = self.pods_per_replica = rng.randint(1, 4)
        self.surge = rng.choice([0, 0, 1, 2])
        self.unavailable = rng.choice([1, 1, 2])
        self.startup = rng.choice(["LeaderCreated", "LeaderCreated", "LeaderReady"])
        self.update = rng.choices(list(CLASSES), list(CLASSES.values()))[0]
        self.revisions = 1 if self.update == "steady" else 2
        self.partition = 0
        if self.update == "partition-surge":
            self.surge = rng.randint(1, 2)
            self.partition = rng.randint(1, self.replicas - 1)
        self.unhealthy = rng.choice([0.0, 0.1, 0.3, 0.5])  # chance of a pod not Running and Ready
        self.description = (f"LWS {self.update} replicas={self.replicas} size={self.size} "
                            f"surge={self.surge} unavail={self.unavailable} {self.startup} "
                            f"partition={self.partition} unhealthy={self.unhealthy}")

    def manifest(self, revision: int) -> dict[str, Any]:
        def template(role: str) -> dict[str, Any]:
            made = lws_template("w", role)
            made["metadata"]["labels"][MANUAL_LABEL] = "true"
            made["metadata"]["annotations"] = {"e2e.poolguard.dev/revision": str(revision)}
            return made

        lws = leader_worker_set("w", self.replicas, self.size, template("leader"),
                                template("worker"))
        lws["spec"]["startupPolicy"] = self.startup
        lws["spec"]["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": {
            "maxSurge": self.surge, "maxUnavailable": self.unavailable,
            "partition": self.partition if revision > 1 else 0}}
        return lws

    # -- building --

    def build(self) -> None:
        for revision in range(1, self.revisions + 1):
            apply(self.env, self.ns, self.manifest(revision))
            self.drive(rounds=self.size + 3)
        self.settle()

    def caught_up(self) -> bool:
        """The LWS controller observed its spec, and the garbage collector has removed every
        worker StatefulSet whose leader is gone and every pod whose StatefulSet is."""
        lws = self.env.api_get(f"/apis/{API}/namespaces/{self.ns}/leaderworkersets/w")
        if (lws.get("status") or {}).get("observedGeneration") != lws["metadata"]["generation"]:
            return False
        pods = {p["metadata"]["uid"]: p for p in self.env.pods(self.ns) if is_active(p)}
        sets = self.env.api_get(f"/apis/apps/v1/namespaces/{self.ns}/statefulsets")["items"]
        set_uids = {s["metadata"]["uid"] for s in sets}
        for sts in sets:
            for ref in sts["metadata"].get("ownerReferences") or []:
                if ref.get("kind") == "Pod" and ref["uid"] not in pods:
                    return False
        for pod in pods.values():
            for ref in pod["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref["uid"] not in set_uids:
                    return False
        return True

    def settle(self, quiet: bool = True) -> None:
        """Until the LWS controller, the StatefulSet controller and the garbage collector
        caught up (and, with `quiet`, nothing moved for 2 s)."""
        for _ in range(5):
            wait_for(f"the LWS controller in {self.ns} to catch up", self.caught_up,
                     timeout=120, interval=0.5)
            wait_settled(self.env, self.ns, timeout=120, quiet=2.0 if quiet else 0.0)
            if self.caught_up():
                return
        raise TimeoutError(f"{self.ns} never settled")

    def place(self, pod: Mapping[str, Any]) -> None:
        """A new pod's random fate; a replacement of an `unready-update` mostly not ready."""
        name = pod["metadata"]["name"]
        revision = (pod["metadata"].get("annotations") or {}).get(REVISION, "1")
        unhealthy = (0.8 if self.update == "unready-update" and revision != "1"
                     else self.unhealthy)

        def fate() -> None:
            self.env.core.patch_namespaced_pod(name, self.ns, {"metadata": {"annotations": {
                PLACED: "true"}}})
            random_fate(self.env, self.ns, name, self.rng, unhealthy, restarts=False)

        tolerating_deletion(self.env, self.ns, name, fate)

    # -- the experiment --

    def choose_target(self) -> int:
        current = self.env.api_get(
            f"/apis/{API}/namespaces/{self.ns}/leaderworkersets/w")["spec"]["replicas"]
        # During an update, mostly a count that keeps some groups: their fate is the question.
        lowest = 1 if self.update != "steady" and current > 1 and self.rng.random() < 0.8 else 0
        target = self.rng.randint(lowest, current - 1)
        self.how = self.rng.choice(["scale", "patch"])
        self.description += f" -> {target} by {self.how}"
        return target

    def workload_ref(self) -> str:
        return f"lws/{self.ns}/w"

    def scale_command(self, target: int) -> list[str]:
        if self.how == "scale":
            return ["scale", "leaderworkerset/w", f"--replicas={target}"]
        return ["patch", "leaderworkerset", "w", "--type=merge", "-p",
                json.dumps({"spec": {"replicas": target}})]

    def situation(self, target: int) -> list[str]:
        return [f"LWS {self.update}"]

    def deleted(self, before: Mapping[str, Any]) -> set[str]:
        """By uid: a leader the StatefulSet controller replaced has its old name again."""
        return deleted_since(before, active_pods(self.env, self.ns))


def test_differential_plan_matches_the_real_lws_controller(
        env: Environment, lws_controller: LwsController) -> None:
    env.start_reconciler()
    env.set_policy(enforcement="warn")  # judge the prediction, not the verdict
    run_differential(env, "differential-lws", LwsState, seeds("E2E_LWS", 50))
