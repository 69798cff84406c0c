"""Differential fidelity for Argo Rollouts: `plan --workload ro/NS/NAME` against what the
real Argo Rollouts controller (v1.10.2, tests/e2e/rollouts.py) and the real ReplicaSet
controller delete.

Each seed builds a random Rollout in its own namespace: canary (a setWeight step then a
pause, or, in the class `short-pause`, a setWeight step, a 1 s pause, a higher setWeight
and an indefinite pause, so a scale that completes the first step lets the next one act
seconds later; maxSurge/maxUnavailable as counts or percentages; sometimes a third revision that
leaves an intermediate ReplicaSet; sometimes paused by the user, which halts the
controller's scaling) or blue-green (active and preview, with previewReplicaCount
sometimes; sometimes promoted, so the old active stays within its scale-down delay).
Its pods get the same random fates as in tests/e2e/test_differential.py (pools, nodes,
phases, readiness, ages, restarts, persons' costs), so new ReplicaSets often have
unavailable pods and a rollout stops where the controller's rules stop it. Then `plan`
predicts the victims of a scale-down (saving the state it read), `kubectl scale rollout/w`
performs it (a user-paused canary is resumed once nothing went meanwhile), and the
deletions are compared and judged, while the scale-down stalls and after recovery, as
tests/e2e/differential_state.py says.

E2E_ROLLOUT_STATES (default 50), E2E_ROLLOUT_SEED (first seed, default 1), E2E_PARALLEL
(default 8); rerun seeds with E2E_ROLLOUT_SEEDS=N,M,... (tests/e2e/differential_run.py).
A failing seed's state, plan document and deletions are kept in
RUN_DIR/differential-rollouts/.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tests.e2e.differential_run import run_differential, seeds
from tests.e2e.differential_state import DifferentialState
from tests.e2e.harness import Environment
from tests.e2e.rollouts import (
    VERSION,
    RolloutsController,
    get_rollout,
    promote_as_user,
    wait_rollout_settled,
)
from tests.e2e.rollouts_manifests import blue_green_rollout, canary_rollout, services
from tests.e2e.test_differential import MIN_READY, draw_workload, give_fate, revision_template
from tests.e2e.workloads import active_pods, apply

WEIGHTS = (10, 20, 25, 33, 50, 60, 75, 90)
FENCEPOSTS = (0, 1, 2, "25%", "50%")


class RolloutState(DifferentialState):
    """One random Rollout in namespace diff-ro-SEED, its pods given the main differential's
    fates."""

    prefix = "diff-ro"
    kind = "Rollout"
    recovery_rounds = 20

    def __init__(self, env: Environment, seed: int, out: Path) -> None:
        super().__init__(env, seed, out)
        # The main differential's first draws (its kind and count set aside), so that a
        # seed builds the Rollout it always built.
        _, _, self.sidecar = draw_workload(self.rng)
        self.strategy = self.rng.choice(["canary", "canary", "blueGreen"])
        self.replicas = self.rng.randint(2, 8)
        rng = self.rng
        self.revisions = rng.choice([1, 2, 2, 2, 3])
        self.min_ready = rng.choice([0, 0, MIN_READY])
        self.weight = rng.choice(WEIGHTS)
        self.surge, self.unavailable = rng.choice(FENCEPOSTS), rng.choice(FENCEPOSTS)
        self.user_paused = rng.random() < 0.2
        self.preview = rng.randint(1, self.replicas) if rng.random() < 0.3 else None
        self.promote = (self.strategy == "blueGreen" and self.revisions > 1
                        and rng.random() < 0.4)
        # A second setWeight above the first, after a 1 s pause (the class `short-pause`).
        self.next_weight = (rng.choice([w for w in WEIGHTS if w > self.weight] or [100])
                            if self.strategy == "canary" and rng.random() < 0.4 else None)
        self.description = (
            f"Rollout {self.strategy} replicas={self.replicas} revisions={self.revisions}"
            f" minReady={self.min_ready}"
            + (f" weight={self.weight} surge={self.surge} unavail={self.unavailable}"
               + (f" short-pause next={self.next_weight}" if self.next_weight else "")
               + f"{' user-paused' if self.user_paused else ''}"
               if self.strategy == "canary" else
               f" preview={self.preview}{' promoted' if self.promote else ''}"))

    def manifest(self, revision: int) -> dict[str, Any]:
        template = revision_template(self.rng, revision, self.sidecar)
        if self.strategy == "blueGreen":
            return blue_green_rollout("w", self.replicas, template, scale_down_delay=600,
                                      preview_replicas=self.preview,
                                      min_ready_seconds=self.min_ready)
        # the user's pause comes with a new revision: it holds the rollout mid-way
        steps: list[dict[str, Any]] = [{"setWeight": self.weight}]
        if self.next_weight:
            steps += [{"pause": {"duration": 1}}, {"setWeight": self.next_weight}]
        return canary_rollout("w", self.replicas, template,
                              steps=[*steps, {"pause": {}}],
                              max_surge=self.surge, max_unavailable=self.unavailable,
                              paused=self.user_paused and revision > 1,
                              min_ready_seconds=self.min_ready)

    def build(self) -> None:
        first = self.manifest(1)
        apply(self.env, self.ns, first,
              *(services(first) if self.strategy == "blueGreen" else []))
        self.drive(rounds=3)
        for revision in range(2, self.revisions + 1):
            apply(self.env, self.ns, self.manifest(revision))
            self.drive(rounds=self.rng.randint(1, 3))
        if self.promote:
            promote_as_user(self.env, self.ns, "w")
            self.drive(rounds=2)
        self.settle()

    def settle(self, quiet: bool = True) -> None:
        """Until the Rollouts controller observed the spec and neither it nor the ReplicaSet
        controller moved for a while (longer before plan reads and deletions count)."""
        wait_rollout_settled(self.env, self.ns, "w", timeout=180, quiet=2.0 if quiet else 0.5)

    def place(self, pod: Mapping[str, Any]) -> None:
        give_fate(self.env, self.ns, pod["metadata"]["name"], self.rng)

    def choose_target(self) -> int:
        current = get_rollout(self.env, self.ns, "w")["spec"]["replicas"]
        target = self.rng.randint(0, current - 1)
        self.description += f" -> {target}"
        return target

    def workload_ref(self) -> str:
        return f"ro/{self.ns}/w"

    def scale_command(self, target: int) -> list[str]:
        return ["scale", "rollout/w", f"--replicas={target}"]

    def situation(self, target: int) -> list[str]:
        return [f"Rollout {self.strategy}{' short-pause' if self.next_weight else ''}"]

    def after_scale(self, before: Mapping[str, Any]) -> list[str]:
        """A user-paused canary: the controller scales nothing (`haltProgress`) until the
        user resumes it, and `plan` predicts what it does then; so check that nothing
        went, resume, and let the comparison judge what goes after."""
        if not self.rollout_paused():
            return []
        early = sorted(set(before) - set(active_pods(self.env, self.ns)))
        self.env.kubectl("-n", self.ns, "patch", "rollout/w", "--type=merge", "-p",
                         '{"spec":{"paused":false}}', check=True)
        self.settle()
        return [f"deleted while the rollout was paused: {early}"] if early else []

    def rollout_paused(self) -> bool:
        return bool(get_rollout(self.env, self.ns, "w")["spec"].get("paused"))


def test_differential_rollouts_plan_matches_the_controllers(
        env: Environment, rollouts_controller: RolloutsController) -> None:
    env.start_reconciler()
    env.set_policy(enforcement="warn")  # judge the prediction, not the verdict
    run_differential(env, "differential-rollouts", RolloutState, seeds("E2E_ROLLOUT", 50),
                     version=VERSION)
