"""Fixtures of the e2e tier: one control plane and one poolguard install per session.

Started by `make e2e` (POOLGUARD_E2E=1, E2E_RUN_DIR). With E2E_KEEP=1 everything is left
running at the end for debugging; `source $E2E_RUN_DIR/env` then gives kubectl.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, TypeVar

import pytest

from tests.e2e.controlplane import DEFAULT_BIN, ControlPlane
from tests.e2e.harness import Environment, install_crds, service_cidr
from tests.e2e.hpa import MetricsAPI, serve_metrics
from tests.e2e.kruise import CloneSetController
from tests.e2e.lws import LWS_MODULE, LwsController
from tests.e2e.rollouts import ROLLOUTS_MODULE, RolloutsController

RESULTS = "results.json"


class _Startable(Protocol):
    def start(self) -> None: ...
    def stop(self) -> None: ...


Controller = TypeVar("Controller", bound=_Startable)


def _run_dir() -> Path:
    configured = os.environ.get("E2E_RUN_DIR")
    if configured:
        return Path(configured)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path.home() / ".cache" / "poolguard-e2e" / "runs" / f"{stamp}-{os.getpid()}"


def _keep() -> bool:
    return os.environ.get("E2E_KEEP", "") not in ("", "0")


def _sigterm_as_interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt("SIGTERM")  # pytest then runs the finalizers: processes stop


@pytest.fixture(scope="session")
def env() -> Iterator[Environment]:
    """The control plane with fake Nodes and the fake kubelet, the LeaderWorkerSet and Rollout CRDs,
    poolguard installed and `serve` running (the reconciler starts on demand:
    `env.start_reconciler()`)."""
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    run_dir = _run_dir()
    run_dir.mkdir(parents=True, exist_ok=True)
    plane = ControlPlane(run_dir, bin_dir=Path(os.environ.get("E2E_BIN", DEFAULT_BIN)),
                         keep=_keep(), service_cidr=service_cidr())
    try:
        plane.start()
        environment = Environment(plane, keep=_keep())
        environment.bootstrap()
        # Before poolguard starts: its cache reads LeaderWorkerSets and Rollouts from its
        # first list on (a CRD that appears later is picked up only at its next retry, a
        # minute on; tests/cluster covers that).
        install_crds(environment, LWS_MODULE)
        install_crds(environment, ROLLOUTS_MODULE)
        environment.install_poolguard()
        yield environment
    finally:
        if _keep():
            print(f"\nE2E_KEEP: cluster left running; `source {run_dir}/env` for kubectl; "
                  f"stop it with: make e2e-down E2E_RUN_DIR={run_dir}")
        else:
            plane.stop()


def _running(controller: Controller) -> Iterator[Controller]:
    """A controller started for one module and stopped after it."""
    controller.start()
    try:
        yield controller
    finally:
        controller.stop()


@pytest.fixture(scope="module")
def lws_controller(env: Environment) -> Iterator[LwsController]:
    """The real LeaderWorkerSet controller, for the module that asks for it only (its pod
    webhooks cost every LWS pod creation a round trip; the other modules need none)."""
    yield from _running(LwsController(env))


@pytest.fixture(scope="module")
def rollouts_controller(env: Environment) -> Iterator[RolloutsController]:
    """The real Argo Rollouts controller, for the modules that ask for it (elsewhere the
    Rollouts other tests make as mere owners must stay untouched)."""
    yield from _running(RolloutsController(env))


@pytest.fixture(scope="module")
def cloneset_controller(env: Environment) -> Iterator[CloneSetController]:
    """The real OpenKruise CloneSet controller, for the modules that ask for it."""
    yield from _running(CloneSetController(env))


@pytest.fixture(scope="module")
def metrics_api(env: Environment) -> Iterator[MetricsAPI]:
    """The fake metrics.k8s.io the real HPA reads, for the modules that ask for it; gone
    after each such module (a dead APIService would break discovery for the next)."""
    with serve_metrics(env) as api:
        yield api


# --- the summary line ----------------------------------------------------------------------

_outcomes: dict[str, str] = {}
SCENARIO_MODULES = ("test_scenarios.py", "test_policy_guard.py", "test_controllers.py",
                    "test_hpa.py", "test_admission_policy.py", "test_helm.py",
                    "test_leaderworkerset.py", "test_argo_rollouts.py", "test_cloneset.py",
                    "test_consolidation.py", "test_rebalance.py")


def _is_scenario(nodeid: str) -> bool:
    return nodeid.split("::")[0].endswith(SCENARIO_MODULES)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not _is_scenario(report.nodeid):
        return
    # a failed setup/call/teardown sticks; a passed call replaces "not run"
    if (report.when == "call" or report.outcome != "passed") and _outcomes.get(
            report.nodeid) in (None, "not run", "passed"):
        _outcomes[report.nodeid] = report.outcome


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_scenario(item.nodeid):
            _outcomes.setdefault(item.nodeid, "not run")


def pytest_sessionfinish(session: pytest.Session) -> None:
    run_dir = _run_dir()
    if not run_dir.exists():
        return
    passed = sum(1 for o in _outcomes.values() if o == "passed")
    (run_dir / RESULTS).write_text(json.dumps(
        {"scenarios": len(_outcomes), "passed": passed, "outcomes": _outcomes}, indent=2))
