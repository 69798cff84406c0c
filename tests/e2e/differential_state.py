"""The experiment every differential run makes of one seed (tests/e2e/test_differential*.py):
build a random workload in its own namespace, let `plan` predict a scale-down, perform it,
and judge the prediction on the pods the real controllers delete.

The pods deleted while the scale-down stalls (the pods as they were: unready ones unready,
new ones unscheduled) are compared with plan (tests/e2e/workloads.py `compare`): every
deleted pod a victim or possible victim, every certain victim deleted, no blocked pod (or
held pod, or group) deleted. When more can go (a pod not Running and Ready or not yet
available, possible victims or blocked pods), a kind's state with recovery then heals every
pod round after round until the controllers rest (tests/e2e/differential_run.py
`recover`), and every pod deleted by then must have been a victim, possible victim or
blocked. The verdict is judged on both observations (tests/e2e/rule_judge.py): a rule the
real deletions broke that plan allowed is a missed denial, a mismatch.

`DifferentialState.run` is that experiment, in one order for every kind; a kind's state
says how to build its workload and settle it, which scale-down to make and how, and what
classes its state falls in:

1. the namespace, then `build` (a kind giving its pods fates as they come uses `drive`);
2. `choose_target` (the random count, and how the scale is sent: `scale_command`);
3. `situation` (the classes of the state plan reads), then `plan_and_scale`: `plan
   --save-state` and the scale, the active pods read in between;
4. `settle_scaled`; with `stall_margin`, a scale-down with blocked pods is watched that
   much longer (the controller deletes what it does not wait on within a sync);
   `after_scale` (problems seen before the deletions are counted);
5. the pods deleted while the scale-down stalls; with `recovery_rounds`, when more can go,
   every pod is healed round after round (`recover`) and the pods deleted by then too;
6. `judge` on both (`pods_per_replica` for the rules), `predicted` classes; a mismatch's
   plan, deletions and state are kept, a match's state file removed.

A seed's draws of its random generator (`rng`) come in the order its kind's state makes
them, so a seed builds the same state run after run.
"""

from __future__ import annotations

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
    recover,
)
from tests.e2e.harness import Environment
from tests.e2e.workloads import active_pods
from tests.e2e.workloads import plan as plan_json

PLACED = "e2e.poolguard.dev/placed"  # the driver has decided this pod's fate
NAMESPACE_LABELS = {"e2e.poolguard.dev/differential": "true"}


class DifferentialState:
    """One seed's random workload in namespace PREFIX-SEED: built, scaled and judged
    by `run`. A kind's state sets the class attributes and the hooks below."""

    prefix = ""  # the namespace's
    kind = ""  # the workload's kind, for the summary's counts per kind
    stall_margin = 0.0  # seconds a scale-down with blocked pods is watched more; 0: not
    recovery_rounds = 0  # rounds of healing for the second observation; 0: none
    min_ready = 0  # the workload's minReadySeconds (a pod not yet available can go later)
    pods_per_replica = 1  # pods of one replica, for minProtectedReplicas

    def __init__(self, env: Environment, seed: int, out: Path) -> None:
        self.env, self.seed, self.out = env, seed, out
        self.rng = random.Random(seed)
        self.ns = f"{self.prefix}-{seed}"
        self.description = ""

    # -- what a kind's state says --

    def build(self) -> None:
        """Create the workload in the (new) namespace and drive it to a settled cluster."""
        raise NotImplementedError

    def settle(self, quiet: bool = True) -> None:
        """Until the controllers caught up; with `quiet`, and nothing moved for a while."""
        raise NotImplementedError

    def place(self, pod: Mapping[str, Any]) -> None:
        """Give a new pod its fate (as its scheduler and kubelet), for `drive`."""
        raise NotImplementedError

    def choose_target(self) -> int:
        """The count to scale down to (and how; both added to the description)."""
        raise NotImplementedError

    def workload_ref(self) -> str:
        """The workload as `plan --workload` names it."""
        raise NotImplementedError

    def scale_command(self, target: int) -> list[str]:
        """The kubectl arguments (after `-n NS`) that scale the workload to `target`."""
        raise NotImplementedError

    def situation(self, target: int) -> list[str]:
        """The classes of the state plan reads (before the scale)."""
        raise NotImplementedError

    def predicted(self, document: Mapping[str, Any], target: int,
                  deleted: set[str]) -> list[str]:
        """The classes of what plan predicted (and of what the controllers did with it)."""
        return []

    def settle_scaled(self) -> None:
        """Until the controllers are done with the scale-down."""
        self.settle()

    def after_scale(self, before: Mapping[str, Any]) -> list[str]:
        """Problems seen once the scale-down settled, before its deletions are counted."""
        return []

    def deleted(self, before: Mapping[str, Any]) -> set[str]:
        """The pods of `before` (name -> pod) no longer active, by name."""
        return set(before) - set(active_pods(self.env, self.ns))

    def plan_and_scale(self, target: int, saved: Path) -> tuple[dict[str, Any], dict[str, Any]]:
        """Plan's document for a scale to `target` (its state saved to `saved`), and the
        active pods just before the scale it then performs."""
        document = plan_json(self.env, self.workload_ref(), target, "--save-state", str(saved))
        before = active_pods(self.env, self.ns)
        done = self.env.kubectl("-n", self.ns, *self.scale_command(target))
        assert done.code == 0, str(done)
        return document, before

    # -- shared --

    def drive(self, rounds: int) -> None:
        """Settle, then give every new pod its fate (`place`); `rounds` times."""
        for _ in range(rounds):
            self.settle(quiet=False)  # pods created later get their fate next round
            fresh = [p for p in self.env.pods(self.ns)
                     if PLACED not in (p["metadata"].get("annotations") or {})
                     and not p["metadata"].get("deletionTimestamp")]
            if not fresh:
                return
            for pod in fresh:
                self.place(pod)

    def run(self) -> Outcome:
        """The experiment, judged (see the module's docstring)."""
        laps = _Laps()
        self.env.new_namespace(self.ns, NAMESPACE_LABELS)
        self.build()
        laps.lap("build")
        target = self.choose_target()
        saved = self.out / f"seed-{self.seed}.state.json"
        classes = self.situation(target)
        document, before = self.plan_and_scale(target, saved)
        laps.lap("plan and scale")
        self.settle_scaled()
        if self.stall_margin and document.get("blocked"):  # the controller waits: it must
            time.sleep(self.stall_margin)  # go on waiting
            self.settle_scaled()
        problems = self.after_scale(before)
        laps.lap("settle")
        deleted = self.deleted(before)
        recovered = None
        if self.recovery_rounds and needs_recovery(self.env, self.ns, document, self.min_ready):
            recover(self.env, self.ns, self.rng, self.settle, rounds=self.recovery_rounds)
            recovered = self.deleted(before)
            laps.lap("recovery")
        self.description += (
            f" victims={len(document['victims'])} blocked={len(document.get('blocked') or [])}"
            f" deleted={len(deleted)}"
            + (f" recovered={len(recovered)}" if recovered is not None else "")
            + f" [{laps}]")
        judged = judge(self.env, document, deleted, recovered, self.pods_per_replica)
        problems += judged.problems
        classes += self.predicted(document, target, deleted) + judged.classes
        if problems:
            keep_mismatch(self.out, self.seed, self.description, document, deleted, problems,
                          recovered)
        else:
            saved.unlink(missing_ok=True)
        return Outcome(self.seed, self.description, problems, classes=classes, kind=self.kind)


class _Laps:
    """The seconds each phase of a state took, for its line in the run's log."""

    def __init__(self) -> None:
        self.since = time.monotonic()
        self.laps: list[str] = []

    def lap(self, phase: str) -> None:
        now = time.monotonic()
        self.laps.append(f"{phase} {now - self.since:.1f}s")
        self.since = now

    def __str__(self) -> str:
        return ", ".join(self.laps)
