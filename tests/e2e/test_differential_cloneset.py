"""Differential fidelity for OpenKruise CloneSets: the prediction against what the real
CloneSet controller (tests/e2e/kruise.py, kruise v1.8.0) deletes.

For each seed, a random CloneSet is built in its own namespace: 2-8 pods, sometimes a second
template revision that a partition keeps some pods from (the update runs with
maxUnavailable 100% to finish quickly; the CloneSet's own maxUnavailable and
minReadySeconds are set afterwards). The driver is its pods' scheduler and kubelet, as in
tests/e2e/test_differential.py: each pod goes to a node of a random pool (through
`pods/binding`, so poolguard's binding webhook sets its cost) or stays unscheduled, and is
Running and Ready for seconds to days, Running and not ready, Pending or Unknown, with 0-2
restarts; some get a person's deletion cost. Then a scale-down to a random count goes through
`kubectl scale` (`clonesets/scale`) or a `spec.replicas` patch (sometimes naming a pod in
`scaleStrategy.podsToDelete`), and the pods the controller deletes are compared with the
plan (`plan --workload clone/NS/c --output json`, run just before; tests/e2e/kruise.py
`predicted`, which also holds plan on the live cluster to plan on the state it saved) by
tests/e2e/workloads.py `compare`:
every deleted pod predicted, every certain victim deleted, no held pod deleted.

E2E_CLONESET_STATES (default 50), E2E_CLONESET_SEED (first seed, default 1),
E2E_CLONESET_SEEDS (replay), E2E_PARALLEL (default 8). Failing seeds keep their state,
prediction and deletions in RUN_DIR/differential-cloneset/.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import time
import traceback
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.e2e.fake_kubelet import STRATEGIC, pod_status
from tests.e2e.harness import Environment, node_names
from tests.e2e.kruise import (
    CloneSetController,
    cloneset,
    drive,
    predicted,
    settle_after_scale,
)
from tests.e2e.lws import deleted_since
from tests.e2e.workloads import active_pods, apply, bind, compare

POOL_WEIGHTS = {"inference": 4, "hybrid": 4, "training": 2}
AGES = (20, 600, 3600, 86400)  # seconds ready
COST = "controller.kubernetes.io/pod-deletion-cost"
RESULTS = "differential-cloneset.json"
LABEL = "cloneset differential (kruise v1.8.0)"


@pytest.fixture(scope="module")
def kruise(env: Environment) -> Iterator[CloneSetController]:
    controller = CloneSetController(env)
    controller.start()
    try:
        yield controller
    finally:
        controller.stop()


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
        self.description = (f"CloneSet replicas={self.replicas} revisions={self.revisions} "
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
        apply(self.env, self.ns, final)
        drive(self.env, self.ns, "c", self.place, placed)

    def place(self, pod: Mapping[str, Any]) -> None:
        try:
            self._place(pod["metadata"]["name"])
        except ApiException:  # deleted meanwhile (the update replaced it)
            current = self.env.api_get(f"/api/v1/namespaces/{self.ns}/pods/"
                                       f"{pod['metadata']['name']}")
            if current.get("kind") == "Pod" and not current["metadata"].get("deletionTimestamp"):
                raise

    def _place(self, name: str) -> None:
        rng, core = self.rng, self.env.core
        if rng.random() < self.by_hand:
            core.patch_namespaced_pod(name, self.ns, {"metadata": {"annotations": {
                COST: str(rng.choice([-500, 0, 50, 5000]))}}})
        if rng.random() < self.unhealthy / 3:
            return  # left unscheduled
        pool = rng.choices(list(POOL_WEIGHTS), list(POOL_WEIGHTS.values()))[0]
        bind(self.env, self.ns, name, rng.choice(node_names(pool)))
        bound = self.env.api_get(f"/api/v1/namespaces/{self.ns}/pods/{name}")
        if bound.get("kind") != "Pod":
            return
        healthy = rng.random() >= self.unhealthy
        phase = "Running" if healthy else rng.choice(["Running", "Running", "Pending",
                                                      "Unknown"])
        ready_for = rng.choice(AGES) * rng.uniform(0.8, 1.2)
        now = dt.datetime.now(dt.UTC)
        status = pod_status(bound, phase=phase, ready=healthy, restarts=rng.choice([0, 0, 1, 2]),
                            ready_since=now - dt.timedelta(seconds=ready_for),
                            started=now - dt.timedelta(seconds=ready_for + 5))
        core.patch_namespaced_pod_status(name, self.ns, {"status": status},
                                         _content_type=STRATEGIC)

    def run(self) -> tuple[list[str], str]:
        started = time.monotonic()
        self.build()
        built = time.monotonic()
        rng = self.rng
        target = rng.randint(0, self.replicas - 1)
        how = rng.choice(["scale", "patch"])
        before = active_pods(self.env, self.ns)
        change: dict[str, Any] = {"replicas": target}
        if how == "patch" and rng.random() < 0.3:
            change["scaleStrategy"] = {"podsToDelete": [rng.choice(sorted(before))]}
        self.description += f" -> {target} by {how} {change.get('scaleStrategy', '')}"
        state = self.out / f"seed-{self.seed}.state.yaml"
        if how == "scale":
            scale = ["scale", "clonesets.apps.kruise.io/c", f"--replicas={target}"]
        else:
            scale = ["patch", "clonesets.apps.kruise.io", "c", "--type=merge", "-p",
                     json.dumps({"spec": change})]
        predicted_at = time.monotonic()
        document, done = predicted(self.env, self.ns, "c", target,
                                   lambda: self.env.kubectl("-n", self.ns, *scale), change,
                                   saved=state)
        assert done.code == 0, str(done)
        settle_after_scale(self.env, self.ns, "c")
        deleted = deleted_since(before, active_pods(self.env, self.ns))
        self.description += (
            f" victims={len(document['victims'])} blocked={len(document['blocked'])}"
            f" deleted={len(deleted)} [build {built - started:.0f}s, plan and scale "
            f"{time.monotonic() - predicted_at:.0f}s]")
        problems = list(compare(document, deleted).problems)
        if problems:
            (self.out / f"seed-{self.seed}.json").write_text(json.dumps({
                "seed": self.seed, "description": self.description, "prediction": document,
                "deleted": sorted(deleted), "problems": problems}, indent=2))
        else:
            state.unlink(missing_ok=True)
        return problems, self.description


def run_state(env: Environment, seed: int, out: Path) -> tuple[int, list[str], str, str | None]:
    """(seed, problems, description, error) of one state; its namespace is deleted after."""
    state = CloneSetState(env, seed, out)
    try:
        problems, description = state.run()
        return seed, problems, description, None
    except Exception as err:
        (out / f"seed-{seed}.error.txt").write_text(traceback.format_exc())
        return seed, [], state.description, f"{type(err).__name__}: {err}"
    finally:
        env.delete_namespace(state.ns)


def seeds_to_run() -> list[int]:
    replay = [int(s) for s in os.environ.get("E2E_CLONESET_SEEDS", "").split(",") if s.strip()]
    first = int(os.environ.get("E2E_CLONESET_SEED", "1"))
    return replay or list(range(first, first + int(os.environ.get("E2E_CLONESET_STATES", "50"))))


def test_differential_prediction_matches_the_real_cloneset_controller(
        env: Environment, kruise: CloneSetController) -> None:
    env.set_policy(enforcement="warn")  # judge the prediction, not the verdict
    out = env.run_dir / "differential-cloneset"
    out.mkdir(exist_ok=True)
    seeds = seeds_to_run()
    started = time.monotonic()
    outcomes = []
    with open(env.run_dir / "differential-cloneset.log", "a", encoding="utf-8") as log, \
            ThreadPoolExecutor(int(os.environ.get("E2E_PARALLEL", "8"))) as pool:
        for future in as_completed([pool.submit(run_state, env, s, out) for s in seeds]):
            seed, problems, description, error = future.result()
            outcomes.append((seed, problems, description, error))
            status = "ERROR" if error else ("ok" if not problems else "MISMATCH")
            log.write(f"seed {seed}: {status} {description} {error or '; '.join(problems)}\n")
            log.flush()
    mismatches = [o for o in outcomes if o[1]]
    errors = [o for o in outcomes if o[3]]
    (env.run_dir / RESULTS).write_text(json.dumps({
        "states": len(outcomes) - len(errors), "mismatches": len(mismatches),
        "errors": len(errors), "failed": bool(errors), "seconds": time.monotonic() - started,
        "mismatchSeeds": [o[0] for o in mismatches], "errorSeeds": [o[0] for o in errors],
    }, indent=2))
    print(f"\n{LABEL}: {len(outcomes) - len(errors)} states, {len(mismatches)} mismatches")
    lines = [f"seed {s} ({d}): {'; '.join(p)} (differential-cloneset/seed-{s}.json)"
             for s, p, d, _ in mismatches]
    lines += [f"seed {s} ({d}) did not run: {e} (differential-cloneset/seed-{s}.error.txt)"
              for s, _, d, e in errors]
    assert not lines, "\n".join(lines)
