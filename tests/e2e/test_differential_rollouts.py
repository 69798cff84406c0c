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
performs it, the controllers come to rest, and the pods deleted while the scale-down
stalls (new pods left unscheduled, unready ones unready) are compared (tests/e2e/workloads.py
`compare`). When more can go (a pod not Running and Ready or not yet available, possible
victims), every pod is then healed round after round until the controllers rest
(tests/e2e/differential_run.py `recover`), and every pod deleted by then must have been a
victim or possible victim. The verdict is judged on both observations
(tests/e2e/rule_judge.py): a rule the real deletions broke that plan allowed is a missed
denial, a mismatch.

E2E_ROLLOUT_STATES (default 50), E2E_ROLLOUT_SEED (first seed, default 1), E2E_PARALLEL
(default 8); rerun seeds with E2E_ROLLOUT_SEEDS=N,M,... (tests/e2e/differential_run.py).
A failing seed's state, plan document and deletions are kept in
RUN_DIR/differential-rollouts/.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import tests.e2e.test_differential as differential
from tests.e2e.differential_run import (
    Outcome,
    judge,
    keep_mismatch,
    needs_recovery,
    recover,
    run_differential,
    seeds,
)
from tests.e2e.harness import Environment
from tests.e2e.rollouts import (
    VERSION,
    RolloutsController,
    get_rollout,
    promote_as_user,
    wait_rollout_settled,
)
from tests.e2e.rollouts_manifests import blue_green_rollout, canary_rollout, services
from tests.e2e.workloads import active_pods, apply
from tests.e2e.workloads import plan as plan_json

WEIGHTS = (10, 20, 25, 33, 50, 60, 75, 90)
FENCEPOSTS = (0, 1, 2, "25%", "50%")


class RolloutState(differential.State):
    """One random Rollout in namespace diff-ro-SEED, driven to a settled cluster."""

    def __init__(self, env: Environment, seed: int, out: Path) -> None:
        super().__init__(env, seed, out)
        self.ns = f"diff-ro-{seed}"
        self.kind = "Rollout"
        self.strategy = self.rng.choice(["canary", "canary", "blueGreen"])
        self.replicas = self.rng.randint(2, 8)
        rng = self.rng
        self.revisions = rng.choice([1, 2, 2, 2, 3])
        self.min_ready = rng.choice([0, 0, differential.MIN_READY])
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
        template = self.template(revision)
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
        self.env.new_namespace(self.ns, {"e2e.poolguard.dev/differential": "true"})
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

    def run(self) -> Outcome:
        started = time.monotonic()
        self.build()
        built = time.monotonic()
        current = get_rollout(self.env, self.ns, "w")["spec"]["replicas"]
        target = self.rng.randint(0, current - 1)
        self.description += f" -> {target}"
        saved = self.out / f"seed-{self.seed}.state.json"
        document = plan_json(self.env, f"ro/{self.ns}/w", target, "--save-state", str(saved))
        before = active_pods(self.env, self.ns)
        scaled = self.env.kubectl("-n", self.ns, "scale", "rollout/w", f"--replicas={target}")
        assert scaled.code == 0, str(scaled)
        self.settle()
        problems = self.resume_if_paused(before)
        deleted = set(before) - set(active_pods(self.env, self.ns))
        recovered = None
        if needs_recovery(self.env, self.ns, document, self.min_ready):
            recover(self.env, self.ns, self.rng, self.settle, rounds=20)
            recovered = set(before) - set(active_pods(self.env, self.ns))
        self.description += (f" deleted={len(deleted)}"
                             + (f" recovered={len(recovered)}" if recovered is not None else "")
                             + f" [build {built - started:.0f}s, scale "
                             f"{time.monotonic() - built:.0f}s]")
        judged = judge(self.env, document, deleted, recovered)
        problems += judged.problems
        if not problems:
            saved.unlink(missing_ok=True)
        else:
            keep_mismatch(self.out, self.seed, self.description, document, deleted,
                          problems, recovered)
        classes = [f"Rollout {self.strategy}{' short-pause' if self.next_weight else ''}",
                   *judged.classes]
        return Outcome(self.seed, self.description, problems, classes=classes, kind="Rollout")


    def resume_if_paused(self, before: dict[str, Any]) -> list[str]:
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
