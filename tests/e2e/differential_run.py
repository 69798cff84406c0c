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

from kubernetes.client.exceptions import ApiException

from tests.e2e.fake_kubelet import STRATEGIC, pod_status
from tests.e2e.harness import Environment, node_names
from tests.e2e.workloads import bind, precision_counts

POOL_WEIGHTS = {"inference": 4, "hybrid": 4, "training": 2}
AGES = (20, 600, 3600, 86400)  # seconds ready


@dataclass
class Outcome:
    """What one state's scale-down came to: the comparison's problems (none: it matched),
    or the error that kept it from running; `classes` name its situation and precision."""

    seed: int
    description: str
    problems: list[str]
    error: str | None = None
    classes: list[str] = field(default_factory=list)

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
                  deleted: set[str], problems: list[str]) -> None:
    """A mismatched seed's plan document, deletions and problems, as RUN_DIR/NAME/seed-N.json
    (its saved state stays beside it)."""
    (out / f"seed-{seed}.json").write_text(json.dumps({
        "seed": seed, "description": description, "plan": document,
        "deleted": sorted(deleted), "problems": problems}, indent=2))


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
