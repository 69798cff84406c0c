"""Differential fidelity: `plan`'s prediction against what the real controllers delete.

For each seed, a random but realistic state is built in its own namespace: a Deployment
(sometimes mid-rollout with two or three ReplicaSets, paused or left where its new
ReplicaSet's unavailable pods stop it; sometimes with minReadySeconds), a bare ReplicaSet or
a StatefulSet (OrderedReady or Parallel, sometimes with ordinals.start; either every pod
given a random fate as it is created, or all made Running and Ready and then some of the
pods the scale-down condemns, sometimes one it keeps, turned Pending, not ready, Unknown
with Ready=True, Unknown or Failed); pods placed on the fake Nodes of every pool (several
per node) or left unscheduled, with the costs poolguard's binding webhook sets and some a
person set, phases Running/Pending/Unknown/Failed, ready or not, ready for seconds to
days, restarts, sidecars. The driver is these pods' scheduler (schedulerName e2e-driver, bound
through pods/binding) and kubelet (it writes their status). Then `plan` predicts the
victims of a scale-down, `kubectl scale` performs it, and the pods the controllers really
deleted are compared:

  pass = every deleted pod is a predicted victim or possible victim, every victim
         plan marked certain (not left to the controller's tie-break) was deleted, and no
         pod plan called blocked (a StatefulSet's condemned pod the controller waits
         before deleting) was deleted; a scale-down with blocked pods is watched for
         STALL_MARGIN seconds more after the controller's deletions settled; and no rule
         plan allowed was broken by the real deletions (tests/e2e/rule_judge.py: a missed
         denial).

The class of each state (which kind, which rollout or StatefulSet situation, what plan
predicted) is counted in RUN_DIR/differential.json and printed by tests/e2e/summary.py.

E2E_STATES (default 200), E2E_SEED (first seed, default 1), E2E_PARALLEL (default 8);
rerun seeds with E2E_SEEDS=N,M,... (tests/e2e/differential_run.py). A failing seed is
printed; its state (plan --save-state), plan document and deletions are kept in
RUN_DIR/differential/seed-N.*.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.e2e.controlplane import wait_for
from tests.e2e.differential_run import (
    POOL_WEIGHTS,
    run_differential,
    seeds,
    tolerating_deletion,
)
from tests.e2e.differential_state import PLACED, DifferentialState
from tests.e2e.fake_kubelet import STRATEGIC, pod_status
from tests.e2e.harness import COST_ANNOTATION, NODES, Environment, is_active, node_names
from tests.e2e.workloads import (
    apply,
    bind,
    deployment,
    pod_template,
    replica_sets,
    replicaset,
    running_ready,
    statefulset,
    wait_settled,
)

SCHEDULER = "e2e-driver"
AGES = (3, 20, 90, 600, 3600, 5 * 3600, 86400, 3 * 86400)  # seconds ready
MIN_READY = 1800  # seconds; between AGES' 600 and 3600 with their +-20%
# How a StatefulSet pod turns unhealthy: (phase, Ready condition). Unknown with Ready=True
# is a node that stopped reporting: the controller reads only the Ready condition to find
# the first unavailable pod, but wants phase Running too before deleting one.
UNHEALTHY = {"Pending": ("Pending", False), "NotReady": ("Running", False),
             "UnknownReady": ("Unknown", True), "Unknown": ("Unknown", False),
             "Failed": ("Failed", False)}
# After the controller's deletions settled, how long a scale-down with blocked pods is
# watched more: the controller deletes the next condemned pod on the event of the last
# one's removal, within a sync (well under a second here), so a blocked pod it did not
# wait on would be gone long before this.
STALL_MARGIN = 10.0


def draw_workload(rng: random.Random) -> tuple[str, int, bool]:
    """A state's first draws: its kind, replicas and whether its pods have a sidecar."""
    kind = rng.choices(["Deployment", "ReplicaSet", "StatefulSet"], [6, 2, 3])[0]
    replicas = rng.randint(2, 10 if kind != "StatefulSet" else 7)
    return kind, replicas, rng.random() < 0.3


def revision_template(rng: random.Random, revision: int, sidecar: bool) -> dict[str, Any]:
    """The pod template of a revision; sometimes with a cost (every pod of that revision)."""
    annotations = {"e2e.poolguard.dev/revision": str(revision)}
    if rng.random() < 0.1:
        annotations[COST_ANNOTATION] = str(rng.choice([-50, 0, 50, 2000]))
    return pod_template("w", manual=True, scheduler=SCHEDULER, sidecar=sidecar,
                        annotations=annotations)


def give_fate(env: Environment, namespace: str, name: str, rng: random.Random, *,
              healthy: bool = False, person_cost: bool = True) -> None:
    """Mark, bind and give a status to one pod (`healthy`: Running and Ready), with
    (`person_cost`) sometimes a person's cost; a pod a controller deleted meanwhile (a
    rollout scaling an old ReplicaSet down as others turn ready) is skipped, at whichever
    of these steps its deletion shows (a 404, or a binding refused)."""
    tolerating_deletion(env, namespace, name,
                        lambda: _give_fate(env, namespace, name, rng, healthy, person_cost))


def _give_fate(env: Environment, namespace: str, name: str, rng: random.Random,
               healthy: bool, person_cost: bool) -> None:
    marks = {PLACED: "true"}
    if rng.random() < 0.15 and person_cost:
        marks[COST_ANNOTATION] = str(rng.choice([-1000, -100, -1, 0, 7, 1000, 5000]))
    env.core.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": marks}})
    if rng.random() < 0.08 and not healthy:
        return  # left unscheduled (no node fits, say)
    pool = rng.choices(list(POOL_WEIGHTS), list(POOL_WEIGHTS.values()))[0]
    node = rng.choices(node_names(pool), [3, 2, 1][:NODES[pool]])[0]
    bind(env, namespace, name, node)
    bound = env.api_get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    if bound.get("kind") != "Pod":  # a Status: deleted since the binding
        return
    phase = rng.choices(["Running", "Pending", "Unknown", "Failed"], [85, 8, 4, 3])[0]
    ready = phase == "Running" and rng.random() < 0.8
    if healthy:
        phase, ready = "Running", True
    now = dt.datetime.now(dt.UTC)
    ready_for = rng.choice(AGES) * rng.uniform(0.8, 1.2)
    status = pod_status(
        bound, phase=phase, ready=ready,
        ready_since=now - dt.timedelta(seconds=ready_for),
        started=now - dt.timedelta(seconds=ready_for + 5),
        restarts=rng.choice([0, 0, 0, 1, 2, 7]),
        sidecar_restarts=rng.choice([0, 0, 1, 3]))
    env.core.patch_namespaced_pod_status(name, namespace, {"status": status},
                                         _content_type=STRATEGIC)


class State(DifferentialState):
    """One random Deployment, ReplicaSet or StatefulSet in namespace diff-SEED."""

    prefix = "diff"
    stall_margin = STALL_MARGIN

    def __init__(self, env: Environment, seed: int, out: Path) -> None:
        super().__init__(env, seed, out)
        self.kind, self.replicas, self.sidecar = draw_workload(self.rng)
        self.description = f"{self.kind} replicas={self.replicas}"
        self.policy, self.start = "", 0  # a StatefulSet's podManagementPolicy, ordinals.start
        self.paused = False
        self.target: int | None = None  # chosen while building when the state depends on it

    # -- building --

    def template(self, revision: int) -> dict[str, Any]:
        return revision_template(self.rng, revision, self.sidecar)

    def build(self) -> None:
        rng = self.rng
        if self.kind == "ReplicaSet":
            apply(self.env, self.ns, replicaset("w", self.replicas, self.template(1)))
            self.drive(rounds=3)
        elif self.kind == "StatefulSet":
            self.build_statefulset()
        else:
            revisions = rng.choice([1, 1, 2, 2, 3])
            # 100%: the new ReplicaSet comes up at full size beside the old one, and a
            # scale-down to its available count then splits so that the Deployment
            # controller's next sync may read a stale saturation.
            surge = rng.choice([1, 2, "25%", "50%", "100%"])
            unavailable = rng.choice([0, 1, "25%"])
            # Pods ready for less than minReadySeconds are not available. No pod's age
            # (AGES, +-20%) comes near 1800 s, so none turns available while a state runs.
            min_ready = rng.choice([0, 0, MIN_READY])
            self.description += (f" revisions={revisions} surge={surge} unavail={unavailable}"
                                 f" minReady={min_ready}")
            for revision in range(1, revisions + 1):
                apply(self.env, self.ns, deployment("w", self.replicas, self.template(revision),
                                                    max_surge=surge,
                                                    max_unavailable=unavailable,
                                                    min_ready_seconds=min_ready))
                self.drive(rounds=rng.randint(1, 3))
            # Hold the rollout where it is (only the scale acts), or leave it running: then
            # it stands where the new ReplicaSet's unavailable pods stop it.
            if revisions > 1 and rng.random() < 0.5:
                self.env.kubectl("-n", self.ns, "rollout", "pause", "deployment/w", check=True)
                self.description += " paused"
                self.paused = True
                self.drive(rounds=1)
            elif revisions > 1:
                self.description += " unpaused"
                self.drive(rounds=1)
        self.settle()

    def build_statefulset(self) -> None:
        """Random fates as pods are created, or (degraded) every pod Running and Ready,
        then some the coming scale-down condemns turned unhealthy (a node gone, a probe
        failing, a crash), sometimes one it keeps too."""
        rng = self.rng
        self.policy = rng.choice(["OrderedReady", "Parallel"])
        self.start = rng.choice([0, 0, 0, 1, 4])
        degraded = rng.random() < 0.6
        self.description += f" {self.policy} start={self.start}"
        apply(self.env, self.ns, statefulset("w", self.replicas, self.template(1),
                                             policy=self.policy, start=self.start))
        if not degraded:
            self.drive(rounds=self.replicas + 2 if self.policy == "OrderedReady" else 3)
            return
        self.all_healthy()
        self.target = rng.randint(0, self.replicas - 1)
        first = self.start + self.target  # the lowest condemned ordinal
        condemned = list(range(first, self.start + self.replicas))
        chosen = rng.sample(condemned, rng.randint(1, len(condemned)))
        if self.target and rng.random() < 0.4:
            chosen.append(rng.randrange(self.start, first))
        fates = []
        for ordinal in sorted(chosen):
            how = rng.choice(list(UNHEALTHY))
            self.make_unhealthy(f"w-{ordinal}", *UNHEALTHY[how])
            fates.append(f"{ordinal}:{how}")
        self.description += f" unhealthy={','.join(fates)}"
        # A Failed pod the controller reaches in range is deleted and created again.
        self.drive(rounds=2)

    def all_healthy(self) -> None:
        """Every pod of the StatefulSet created, bound and Running and Ready."""
        wanted = {f"w-{o}" for o in range(self.start, self.start + self.replicas)}

        def check() -> bool:
            self.env.plane.check_alive()
            pods = [p for p in self.env.pods(self.ns) if is_active(p)]
            for pod in pods:
                if PLACED not in (pod["metadata"].get("annotations") or {}):
                    self.place(pod, healthy=True)
            return wanted <= {p["metadata"]["name"] for p in pods} and all(
                PLACED in (p["metadata"].get("annotations") or {}) for p in pods)

        wait_for(f"every pod of w in {self.ns} Running and Ready", check, timeout=180,
                 interval=0.5)
        self.settle(quiet=False)

    def make_unhealthy(self, name: str, phase: str, ready: bool) -> None:
        """What the kubelet (or the node controller, for Unknown) writes when a pod
        stops being Running and Ready: `phase`, and the Ready condition `ready`."""
        pod = self.env.api_get(f"/api/v1/namespaces/{self.ns}/pods/{name}")
        now = dt.datetime.now(dt.UTC)
        status = pod_status(pod, phase=phase, ready=False,
                            ready_since=now - dt.timedelta(seconds=30),
                            started=now - dt.timedelta(seconds=3600))
        if ready:  # pod_status ties Ready to Running; a lost node's pod keeps Ready=True
            for condition in status["conditions"]:
                if condition["type"] in ("Ready", "ContainersReady"):
                    condition["status"] = "True"
        self.env.core.patch_namespaced_pod_status(name, self.ns, {"status": status},
                                                  _content_type=STRATEGIC)

    def settle(self, quiet: bool = True) -> None:
        """Until the controllers caught up; with `quiet`, and then nothing moved for a
        while (before plan reads the state, and before the deletions are counted)."""
        wait_settled(self.env, self.ns, timeout=120,
                     quiet=(2.0 if self.kind == "StatefulSet" else 1.0) if quiet else 0.0)

    def place(self, pod: Mapping[str, Any], healthy: bool = False) -> None:
        give_fate(self.env, self.ns, pod["metadata"]["name"], self.rng, healthy=healthy,
                  person_cost=self.kind != "StatefulSet")

    def new_replicaset_available(self) -> int | None:
        """The newest ReplicaSet's status.availableReplicas mid-rollout, else None."""
        if self.kind != "Deployment":
            return None
        replicasets = self.env.api_get(
            f"/apis/apps/v1/namespaces/{self.ns}/replicasets")["items"]
        active = [rs for rs in replicasets if rs["spec"].get("replicas")]
        if len(active) < 2:
            return None
        newest = max(replicasets, key=lambda rs: (rs["metadata"]["creationTimestamp"],
                                                  rs["metadata"]["name"]))
        return int((newest.get("status") or {}).get("availableReplicas") or 0)

    # -- what the state exercises --

    def situation(self, target: int) -> list[str]:
        """The classes of the state plan reads (before the scale)."""
        if self.kind == "ReplicaSet":
            return ["ReplicaSet"]
        if self.kind == "StatefulSet":
            pods = [p for p in self.env.pods(self.ns) if not p["metadata"].get("deletionTimestamp")]
            condemned = [p for p in pods if self.ordinal(p["metadata"]["name"])
                         >= self.start + target]
            health = ("unhealthy" if any(not running_ready(p) for p in condemned)
                      else "healthy")
            classes = [f"StatefulSet {self.policy}, {health} condemned pods"]
            return classes + (["StatefulSet with ordinals.start"] if self.start else [])
        replicasets = replica_sets(self.env, self.ns)
        if len([rs for rs in replicasets if rs["spec"].get("replicas")]) < 2:
            return ["Deployment, one ReplicaSet"]
        newest = max(replicasets, key=lambda rs: (rs["metadata"]["creationTimestamp"],
                                                  rs["metadata"]["name"]))
        status = newest.get("status") or {}
        unavailable = int(status.get("replicas") or 0) - int(status.get("availableReplicas") or 0)
        return [f"Deployment mid-rollout {'paused' if self.paused else 'unpaused'}, new "
                f"ReplicaSet {'with' if unavailable > 0 else 'without'} unavailable pods"]

    def predicted(self, document: Mapping[str, Any], target: int,
                  deleted: set[str]) -> list[str]:
        classes = []
        if any("availableReplicas may still count" in w for w in document["warnings"]):
            classes.append("Deployment stale-availability race predicted")
        blocked = document.get("blocked") or []
        if blocked:
            on_condemned = self.ordinal(blocked[0]["waitingOn"]) >= self.start + target
            classes.append("StatefulSet stall predicted at a condemned pod" if on_condemned
                           else "StatefulSet wait predicted on the new range")
        if document["possibleVictims"] and deleted & set(document["possibleVictims"]):
            classes.append("a possible victim deleted")
        return classes

    @staticmethod
    def ordinal(name: str) -> int:
        """The ordinal of a pod of StatefulSet w."""
        return int(name.rsplit("-", 1)[1])

    # -- the experiment --

    def workload_ref(self) -> str:
        return f"{self.kind.lower()}/{self.ns}/w"

    def choose_target(self) -> int:
        current = self.env.api_get(
            f"/apis/apps/v1/namespaces/{self.ns}/{self.kind.lower()}s/w")["spec"]["replicas"]
        target = self.rng.randint(0, current - 1) if self.target is None else self.target
        available = self.new_replicaset_available()
        if available is not None and 0 < available < current and self.rng.random() < 0.75:
            # The count a stale availableReplicas can reach: the Deployment controller's
            # next sync may then find the new ReplicaSet saturated. Mostly this count: the
            # race also needs the proportional split to give the new ReplicaSet exactly
            # it, which only some rollouts do (a percentage maxSurge, the new ReplicaSet
            # at full size).
            target = available
        self.description += f" -> {target}"
        return target

    def scale_command(self, target: int) -> list[str]:
        return ["scale", f"{self.kind.lower()}/w", f"--replicas={target}"]


def test_differential_plan_matches_the_real_controllers(env: Environment) -> None:
    env.start_reconciler()  # as installed: the binding webhook and the reconciler
    env.set_policy(enforcement="warn")  # judge the prediction, not the verdict
    run_differential(env, "differential", State, seeds("E2E", 200))
