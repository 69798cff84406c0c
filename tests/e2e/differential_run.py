"""The driver the differential runs share (tests/e2e/test_differential*.py).

One random state per seed, each in its own namespace, built and scaled E2E_PARALLEL at a
time (default 8) against the real controllers; a line per state in RUN_DIR/NAME.log; the
counts in RUN_DIR/NAME.json (tests/e2e/summary.py prints them); and one failure naming every
seed that mismatched or did not run, whose files stay in RUN_DIR/NAME/.

Seeds come from PREFIX_STATES (how many), PREFIX_SEED (the first, default 1) and
PREFIX_SEEDS=N,M,... (replay those), PREFIX being the run's own (E2E, E2E_LWS, ...).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import time
import traceback
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml
from kubernetes.client.exceptions import ApiException

from tests.e2e.fake_kubelet import STRATEGIC, pod_status
from tests.e2e.harness import Environment, is_active, node_names
from tests.e2e.rule_judge import (
    MISSED_DENIAL,
    RuleJudgement,
    ScaleDownRules,
    judge_rules,
    per_kind,
)
from tests.e2e.workloads import bind, compare, precision_counts, running_ready

POOL_WEIGHTS = {"inference": 4, "hybrid": 4, "training": 2}
AGES = (20, 600, 3600, 86400)  # seconds ready
# A healed pod's time Ready: past every minReadySeconds the differentials set (at most 3600).
HEALED_FOR = 2 * 86400


@dataclass
class Outcome:
    """What one state's scale-down came to: the comparison's problems (none: it matched),
    or the error that kept it from running; `classes` name its situation and precision."""

    seed: int
    description: str
    problems: list[str]
    error: str | None = None
    classes: list[str] = field(default_factory=list)
    kind: str = ""  # the workload's kind, for the summary's counts per kind

    @property
    def status(self) -> str:
        return "ERROR" if self.error else ("ok" if not self.problems else "MISMATCH")


class State(Protocol):
    """One seed's state: built, scaled and compared by `run`, in namespace `ns`."""

    ns: str
    description: str

    def run(self) -> Outcome: ...


MakeState = Callable[[Environment, int, Path], State]  # (env, seed, the run's directory)


def seeds(prefix: str, default_states: int) -> list[int]:
    """The seeds to run: PREFIX_SEEDS if given, else PREFIX_STATES from PREFIX_SEED on."""
    replay = [int(s) for s in os.environ.get(f"{prefix}_SEEDS", "").split(",") if s.strip()]
    first = int(os.environ.get(f"{prefix}_SEED", "1"))
    count = int(os.environ.get(f"{prefix}_STATES", str(default_states)))
    return replay or list(range(first, first + count))


def run_differential(env: Environment, name: str, make_state: MakeState, seeds: list[int],
                     **results: Any) -> list[Outcome]:
    """Run every seed's state, write NAME.log and NAME.json (`results` added to its
    counts), and fail naming each seed that mismatched or did not run."""
    out = env.run_dir / name
    out.mkdir(exist_ok=True)
    started = time.monotonic()
    outcomes: list[Outcome] = []
    workers = int(os.environ.get("E2E_PARALLEL", "8"))
    with open(env.run_dir / f"{name}.log", "a", encoding="utf-8") as log, \
            ThreadPoolExecutor(workers) as pool:
        futures = [pool.submit(_run_state, env, make_state, seed, out) for seed in seeds]
        for future in as_completed(futures):
            outcome = future.result()
            outcomes.append(outcome)
            log.write(f"seed {outcome.seed}: {outcome.status} {outcome.description} "
                      f"{outcome.error or '; '.join(outcome.problems)} "
                      f"classes: {'; '.join(outcome.classes)}\n")
            log.flush()
    mismatches = [o for o in outcomes if o.problems]
    errors = [o for o in outcomes if o.error]
    (env.run_dir / f"{name}.json").write_text(json.dumps({
        **results, "states": len(outcomes) - len(errors), "mismatches": len(mismatches),
        "errors": len(errors), "failed": bool(errors), "seconds": time.monotonic() - started,
        "mismatchSeeds": [o.seed for o in mismatches], "errorSeeds": [o.seed for o in errors],
        "classes": dict(sorted(Counter(c for o in outcomes for c in o.classes).items())),
        "precision": precision_counts(o.classes for o in outcomes),
        "byKind": per_kind((o.kind, o.classes) for o in outcomes if not o.error),
        "missedDenialSeeds": [o.seed for o in outcomes if MISSED_DENIAL in o.classes],
    }, indent=2))
    lines = [f"seed {o.seed} ({o.description}): {'; '.join(o.problems)} "
             f"({name}/seed-{o.seed}.json)" for o in mismatches]
    lines += [f"seed {o.seed} ({o.description}) did not run: {o.error} "
              f"({name}/seed-{o.seed}.error.txt)" for o in errors]
    assert not lines, "\n".join(lines)
    return outcomes


def _run_state(env: Environment, make_state: MakeState, seed: int, out: Path) -> Outcome:
    """One seed's outcome; an error is an outcome too (its traceback kept); its namespace
    is deleted after either way."""
    state = make_state(env, seed, out)
    try:
        return state.run()
    except Exception as err:
        (out / f"seed-{seed}.error.txt").write_text(traceback.format_exc())
        return Outcome(seed, state.description, [], error=f"{type(err).__name__}: {err}")
    finally:
        env.delete_namespace(state.ns)


def keep_mismatch(out: Path, seed: int, description: str, document: Any,
                  deleted: set[str], problems: list[str],
                  recovered: set[str] | None = None) -> None:
    """A mismatched seed's plan document, deletions (`recovered`: those by the time every
    pod was healthy again) and problems, as RUN_DIR/NAME/seed-N.json (its saved state stays
    beside it)."""
    (out / f"seed-{seed}.json").write_text(json.dumps({
        "seed": seed, "description": description, "plan": document,
        "deleted": sorted(deleted), "problems": problems,
        **({"deletedByRecovery": sorted(recovered)} if recovered is not None else {})},
        indent=2))


def installed_rules(env: Environment) -> ScaleDownRules:
    """The scale-down rules of the policy poolguard runs with (the file it reads)."""
    return ScaleDownRules.from_policy(yaml.safe_load(env.policy_file.read_text()))


@dataclass
class Judged:
    """A scale-down's prediction and verdict, judged on the real deletions."""

    problems: list[str]
    classes: list[str]
    rules: RuleJudgement


def judge(env: Environment, document: Any, stalled: set[str],
          recovered: set[str] | None = None, pods_per_replica: int = 1) -> Judged:
    """The prediction against the pods deleted while the scale-down stalls (`compare`) and,
    when observed, by the time every pod is healthy again (each deleted pod a victim, a
    possible victim or a blocked pod); the verdict against the rules the deletions broke at
    either observation (a missed denial is a problem)."""
    verdict = compare(document, stalled)
    problems = list(verdict.problems)
    observations = {"stalled": stalled}
    if recovered is not None:
        observations["recovered"] = recovered
        predicted = ({v["name"] for v in document["victims"]} | set(document["possibleVictims"])
                     | {b["name"] for b in document.get("blocked") or []})
        unexpected = recovered - predicted
        if unexpected:
            problems.append(f"deleted by the time every pod was healthy, not predicted: "
                            f"{sorted(unexpected)}")
    rules = judge_rules(document, observations, installed_rules(env), pods_per_replica)
    return Judged(problems + rules.problems, verdict.precision + rules.classes, rules)


def needs_recovery(env: Environment, namespace: str, document: Any,
                   min_ready_seconds: int = 0) -> bool:
    """Can more go once every pod is healthy? Some pod is not Running and Ready, or not
    yet available (Ready for less than `min_ready_seconds`), or plan named pods that may
    go or wait (else what stalls is already the end)."""
    if document["possibleVictims"] or document.get("blocked"):
        return True
    return any(not _ready_for(p, min_ready_seconds) for p in env.pods(namespace)
               if is_active(p))


def recover(env: Environment, namespace: str, rng: random.Random,
            settle: Callable[[], None], rounds: int = 10) -> None:
    """Heal every active pod in `namespace` (`heal`), round after round as the controllers
    replace or create pods, until they settled with every pod healthy."""
    for _ in range(rounds):
        settle()
        sick = [p for p in env.pods(namespace) if is_active(p) and not healed(p)]
        if not sick:
            return
        for pod in sick:
            _heal_unless_replaced(env, namespace, pod, rng)
    raise TimeoutError(f"{namespace}: pods still not healthy after {rounds} rounds")


def _heal_unless_replaced(env: Environment, namespace: str, pod: Any,
                          rng: random.Random) -> None:
    """`heal` the pod; an API error is forgiven when it is gone, terminating or replaced by
    a pod of the same name meanwhile (a StatefulSet's; the next round heals that one)."""
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    try:
        heal(env, namespace, name, rng)
    except ApiException:
        current = env.api_get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        if (current.get("kind") == "Pod" and current["metadata"]["uid"] == uid
                and not current["metadata"].get("deletionTimestamp")):
            raise


def healed(pod: Any) -> bool:
    """Running and Ready for longer than any minReadySeconds here (a day and more)."""
    return _ready_for(pod, HEALED_FOR // 2)


def _ready_for(pod: Any, seconds: int) -> bool:
    """Running and Ready, for at least `seconds`."""
    if not running_ready(pod):
        return False
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    since = dt.datetime.fromisoformat(ready["lastTransitionTime"].replace("Z", "+00:00"))
    return dt.datetime.now(dt.UTC) - since >= dt.timedelta(seconds=seconds)


def heal(env: Environment, namespace: str, name: str, rng: random.Random) -> None:
    """What recovery looks like to the controllers: the pod bound (to a node of a random
    pool, when it was not) and Running and Ready for two days, its restarts kept."""
    pod = env.api_get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    if pod.get("kind") != "Pod":
        return
    if not pod["spec"].get("nodeName"):
        pool = rng.choices(list(POOL_WEIGHTS), list(POOL_WEIGHTS.values()))[0]
        bind(env, namespace, name, rng.choice(node_names(pool)))
        pod = env.api_get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        if pod.get("kind") != "Pod":
            return
    restarts = max((c.get("restartCount", 0) for c in
                    (pod.get("status") or {}).get("containerStatuses") or []), default=0)
    now = dt.datetime.now(dt.UTC)
    status = pod_status(pod, phase="Running", ready=True, restarts=restarts,
                        ready_since=now - dt.timedelta(seconds=HEALED_FOR),
                        started=now - dt.timedelta(seconds=HEALED_FOR + 5))
    env.core.patch_namespaced_pod_status(name, namespace, {"status": status},
                                         _content_type=STRATEGIC)


def tolerating_deletion(env: Environment, namespace: str, name: str,
                        place: Callable[[], None]) -> None:
    """`place()` a new pod; an API error is forgiven when the pod is gone or terminating
    meanwhile (a rolling update or a scale replaced it)."""
    try:
        place()
    except ApiException:
        current = env.api_get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        if current.get("kind") == "Pod" and not current["metadata"].get("deletionTimestamp"):
            raise


def random_fate(env: Environment, namespace: str, name: str, rng: random.Random,
                unhealthy: float, *, restarts: bool) -> None:
    """Give a new pod a random fate as its scheduler and kubelet: left unscheduled (a third
    of `unhealthy`), else bound to a node of a random pool, then Running and Ready for
    seconds to days or (`unhealthy`) Running not ready, Pending or Unknown, with 0-2
    restarts when `restarts`."""
    if rng.random() < unhealthy / 3:
        return  # left unscheduled
    pool = rng.choices(list(POOL_WEIGHTS), list(POOL_WEIGHTS.values()))[0]
    bind(env, namespace, name, rng.choice(node_names(pool)))
    bound = env.api_get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    if bound.get("kind") != "Pod":
        return
    healthy = rng.random() >= unhealthy
    phase = "Running" if healthy else rng.choice(["Running", "Running", "Pending", "Unknown"])
    ready_for = rng.choice(AGES) * rng.uniform(0.8, 1.2)
    now = dt.datetime.now(dt.UTC)
    status = pod_status(bound, phase=phase, ready=healthy,
                        restarts=rng.choice([0, 0, 1, 2]) if restarts else 0,
                        ready_since=now - dt.timedelta(seconds=ready_for),
                        started=now - dt.timedelta(seconds=ready_for + 5))
    env.core.patch_namespaced_pod_status(name, namespace, {"status": status},
                                         _content_type=STRATEGIC)
