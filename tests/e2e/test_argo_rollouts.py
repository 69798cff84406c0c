"""Argo Rollouts against the real control plane: the real Rollout CRD (from the controller's
module), the Rollouts controller's ReplicaSet handling driven by tests/e2e/rollouts_driver.py
with the controller's identity, and the real ReplicaSet controller choosing the pods.

Each scale-down of a Rollout (through `kubectl scale rollout/NAME`, the /scale subresource,
and through spec.replicas) is compared with `plan --workload ro/NS/NAME`: every certain
victim is deleted and every deleted pod was predicted. A person's unsafe scale-down is
denied with the pods named; the controller's own ReplicaSet writes never are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.controlplane import wait_for
from tests.e2e.harness import Environment
from tests.e2e.rollouts_canary import approximate_counts, basic_canary_counts
from tests.e2e.rollouts_driver import RolloutsController
from tests.e2e.rollouts_manifests import (
    DEADLINE,
    DESIRED,
    HASH_LABEL,
    IDENTITY,
    blue_green_rollout,
    canary_rollout,
    install_rollout_crd,
    services,
)
from tests.e2e.test_controllers import first_inference, identity, make_unready
from tests.e2e.workloads import (
    active_pods,
    apply,
    compare,
    owners_of,
    pod_template,
    replica_sets,
    wait_running,
    wait_settled,
)
from tests.e2e.workloads import plan as plan_json


@pytest.fixture(scope="module")
def controller_identity(env: Environment) -> Iterator[Path]:
    """The real Rollout CRD, and a kubeconfig for the Rollouts controller's ServiceAccount;
    the policy warns (these tests judge the prediction; the denial test enforces)."""
    install_rollout_crd(env)
    env.set_policy(enforcement="warn")
    wait_for_poolguard_to_read_rollouts(env)
    yield identity(env, *IDENTITY)


def wait_for_poolguard_to_read_rollouts(env: Environment) -> None:
    """`serve` started before the CRD existed: its cache asks again for Rollouts within a
    minute. Until then a Rollout's scale passes unchecked ("not in poolguard's cache"),
    which is what a dry-run scale of a probe Rollout shows."""
    ns = env.new_namespace("ro-probe")
    apply(env, ns, canary_rollout("probe", 1, pod_template("probe")))

    def judged() -> bool:
        result = env.kubectl("-n", ns, "scale", "rollout/probe", "--replicas=0",
                             "--dry-run=server")
        return result.code == 0 and "poolguard could not check" not in result.stderr

    wait_for("poolguard's cache to hold Rollouts", judged, timeout=120, interval=2)
    env.delete_namespace(ns)


def start(env: Environment, kubeconfig: Path, ns: str, rollout: dict[str, Any]
          ) -> RolloutsController:
    """The Rollout (and a blue-green's Services), driven until its pods run."""
    objects = [rollout]
    if "blueGreen" in rollout["spec"]["strategy"]:
        objects += services(rollout)
    apply(env, ns, *objects)
    driver = RolloutsController(env, kubeconfig, ns, rollout["metadata"]["name"])
    come_to_rest(env, driver, rollout)
    return driver


def update(env: Environment, driver: RolloutsController, rollout: dict[str, Any],
           revision: int) -> None:
    """A new pod template (what `kubectl argo rollouts set image` changes)."""
    rollout["spec"]["template"]["metadata"].setdefault("annotations", {})[
        "e2e.poolguard.dev/revision"] = str(revision)
    apply(env, driver.namespace, rollout)
    come_to_rest(env, driver, rollout)


def come_to_rest(env: Environment, driver: RolloutsController, rollout: dict[str, Any]
                 ) -> None:
    """The controller's passes and the pods they make running, until a pass on running
    pods changes nothing (each canary step waits for its pods)."""
    app, ns = rollout["spec"]["template"]["metadata"]["labels"]["app"], driver.namespace
    for _ in range(30):
        wrote = driver.run()
        wait_running(env, ns, f"app={app}", sum(sizes(env, ns).values()))
        if not wrote:
            return
    raise AssertionError(f"the Rollout {driver.namespace}/{driver.name} did not come to rest")


def sizes(env: Environment, ns: str) -> dict[str, int]:
    """ReplicaSet name -> spec.replicas."""
    return {rs["metadata"]["name"]: rs["spec"]["replicas"] for rs in replica_sets(env, ns)}


def by_hash(env: Environment, ns: str) -> dict[str, dict[str, Any]]:
    return {rs["metadata"]["labels"][HASH_LABEL]: rs for rs in replica_sets(env, ns)}


def rollout_status(env: Environment, ns: str, name: str) -> dict[str, Any]:
    return env.api_get(f"/apis/argoproj.io/v1alpha1/namespaces/{ns}/rollouts/{name}")["status"]


def scale_and_compare(env: Environment, driver: RolloutsController, target: int, *,
                      through: str) -> set[str]:
    """`plan` for `target`, the scale-down (kubectl scale, or a patch of spec.replicas), the
    controller's passes, then the deleted pods against the prediction."""
    ns, name = driver.namespace, driver.name
    document = plan_json(env, f"ro/{ns}/{name}", target)
    before = active_pods(env, ns)
    if through == "scale":
        result = env.kubectl("-n", ns, "scale", f"rollout/{name}", f"--replicas={target}")
    else:
        result = env.kubectl("-n", ns, "patch", f"rollout/{name}", "--type=merge", "-p",
                             json.dumps({"spec": {"replicas": target}}))
    assert result.code == 0, str(result)
    written = len(driver.scaled)
    driver.run()
    assert len(driver.scaled) > written, "the controller scaled no ReplicaSet"
    wait_settled(env, ns)
    deleted = set(before) - set(active_pods(env, ns))
    verdict = compare(document, deleted, owners_of(before))
    assert verdict.ok, (verdict.problems, document, sorted(deleted))
    assert deleted
    return deleted


def _rs(name: str, replicas: int, available: int) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"replicas": replicas},
            "status": {"availableReplicas": available}}


# Rows of argo-rollouts v1.10.2 utils/replicaset/canary_test.go: (replicas, weight,
# maxSurge, maxUnavailable, (stable spec, available), (canary spec, available)) ->
# (canary, stable). The driver is the oracle of the tests below: its split must be upstream's.
UPSTREAM_SPLITS = [
    (10, 100, 3, 0, (7, 8), (6, 3), (6, 7)),  # .Spec.Replica < AvailableReplicas
    (10, 20, 2, 0, (10, 10), (0, 0), (2, 10)),  # max surge int scales up the canary
    (4, 100, 1, 0, (4, 1), (0, 0), (1, 4)),  # maxSurge honoured, stable unavailable
    (4, 100, 1, 0, (4, 1), (1, 1), (1, 3)),  # maxUnavailable honoured, stable unavailable
    (4, 0, 1, 0, (0, 0), (4, 4), (4, 1)),  # reducing the weight, part 1
    (4, 0, 1, 0, (1, 0), (4, 4), (4, 1)),  # part 2
    (4, 0, 1, 0, (1, 1), (4, 4), (3, 1)),  # part 3
]


def test_the_drivers_canary_split_is_upstreams() -> None:
    for replicas, weight, surge, unavailable, stable, canary, expected in UPSTREAM_SPLITS:
        rollout = canary_rollout("w", replicas, {"metadata": {"labels": {"app": "w"}}},
                                 steps=[{"setWeight": weight}], max_surge=surge,
                                 max_unavailable=unavailable)
        rollout["status"] = {"stableRS": "stable", "currentPodHash": "canary"}
        assert basic_canary_counts(rollout, _rs("canary", *canary), _rs("stable", *stable),
                                   []) == expected, (replicas, weight, surge, unavailable)
    # TestCalculateReplicaCountsForNewDeployment: the stable ReplicaSet is the new one
    rollout = canary_rollout("w", 10, {"metadata": {"labels": {"app": "w"}}},
                             steps=[{"setWeight": 10}], max_surge=0, max_unavailable=1)
    rollout["status"] = {"stableRS": "stable", "currentPodHash": "canary"}
    assert basic_canary_counts(rollout, _rs("stable", 10, 0), _rs("stable", 10, 0),
                               []) == (10, 0)
    # TestApproximateWeightedNewStableReplicaCounts: (replicas, weight, maxSurge)
    assert [approximate_counts(*args) for args in ((2, 1, 0), (2, 100, 0), (2, 0, 1),
                                                   (3, 50, 1), (10, 14, 0), (10, 15, 0))] == [
        (1, 1), (2, 0), (0, 2), (2, 2), (1, 9), (2, 8)]


def test_steady_state_rollout_scaled_through_scale_and_spec_replicas(
        env: Environment, controller_identity: Path) -> None:
    ns = env.new_namespace("ro-steady")
    rollout = canary_rollout("llm", 6, pod_template("llm", pools=["inference", "hybrid"],
                                                    spread_pools=True),
                             steps=[{"setWeight": 50}, {"pause": {}}])
    driver = start(env, controller_identity, ns, rollout)
    [stable] = replica_sets(env, ns)
    assert rollout_status(env, ns, "llm")["stableRS"] == stable["metadata"]["labels"][HASH_LABEL]
    deleted = scale_and_compare(env, driver, 4, through="scale")
    assert len(deleted) == 2
    assert sizes(env, ns) == {stable["metadata"]["name"]: 4}
    assert by_hash(env, ns)[stable["metadata"]["labels"][HASH_LABEL]]["metadata"][
        "annotations"][DESIRED] == "4"
    deleted = scale_and_compare(env, driver, 3, through="spec.replicas")
    assert len(deleted) == 1
    assert sizes(env, ns) == {stable["metadata"]["name"]: 3}
    env.delete_namespace(ns)


def test_canary_paused_at_a_set_weight_step_splits_the_scale_down(
        env: Environment, controller_identity: Path) -> None:
    ns = env.new_namespace("ro-canary")
    rollout = canary_rollout("asr", 6, pod_template("asr", pools=["inference", "hybrid"],
                                                    spread_pools=True),
                             steps=[{"setWeight": 50}, {"pause": {}}], max_surge=1,
                             max_unavailable=0)
    driver = start(env, controller_identity, ns, rollout)
    update(env, driver, rollout, 2)
    status = rollout_status(env, ns, "asr")
    assert status["currentStepIndex"] == 1  # at the pause step, after setWeight 50
    assert [c["reason"] for c in status["pauseConditions"]] == ["CanaryPauseStep"]
    replicasets = by_hash(env, ns)
    stable, canary = replicasets[status["stableRS"]], replicasets[status["currentPodHash"]]
    assert (canary["spec"]["replicas"], stable["spec"]["replicas"]) == (3, 3)
    deleted = scale_and_compare(env, driver, 4, through="scale")
    # the controller's split of 4 at weight 50 (maxSurge 1): 2 canary, 2 stable
    assert approximate_counts(4, 50, 1) == (2, 2)
    now = sizes(env, ns)
    assert (now[canary["metadata"]["name"]], now[stable["metadata"]["name"]]) == (2, 2)
    assert len(deleted) == 2
    env.delete_namespace(ns)


def test_blue_green_with_active_and_preview_then_within_the_scale_down_delay(
        env: Environment, controller_identity: Path) -> None:
    ns = env.new_namespace("ro-bluegreen")
    rollout = blue_green_rollout("tts", 4, pod_template("tts", pools=["inference", "hybrid"],
                                                        spread_pools=True),
                                 scale_down_delay=600)
    driver = start(env, controller_identity, ns, rollout)
    update(env, driver, rollout, 2)
    status = rollout_status(env, ns, "tts")
    active, preview = status["blueGreen"]["activeSelector"], status["blueGreen"]["previewSelector"]
    assert active == status["stableRS"] != preview == status["currentPodHash"]
    assert [c["reason"] for c in status["pauseConditions"]] == ["BlueGreenPause"]
    replicasets = by_hash(env, ns)
    assert (replicasets[active]["spec"]["replicas"], replicasets[preview]["spec"]["replicas"]) == (
        4, 4)
    # active and preview both follow spec.replicas (rollout/bluegreen.go)
    deleted = scale_and_compare(env, driver, 2, through="spec.replicas")
    assert len(deleted) == 4
    assert {h: rs["spec"]["replicas"] for h, rs in by_hash(env, ns).items()} == {
        active: 2, preview: 2}
    # promoted: the old active keeps its pods until its scale-down deadline, and until then
    # follows spec.replicas too (scaleDownDelayHelper)
    driver.promote_as_user()
    driver.run()
    status = rollout_status(env, ns, "tts")
    assert status["stableRS"] == status["blueGreen"]["activeSelector"] == preview
    old = by_hash(env, ns)[active]
    assert old["spec"]["replicas"] == 2 and old["metadata"]["annotations"].get(DEADLINE)
    deleted = scale_and_compare(env, driver, 1, through="scale")
    assert len(deleted) == 2
    assert {h: rs["spec"]["replicas"] for h, rs in by_hash(env, ns).items()} == {
        active: 1, preview: 1}
    env.delete_namespace(ns)


def test_unsafe_scale_down_denied_and_the_controllers_own_writes_never(
        env: Environment, controller_identity: Path) -> None:
    ns = env.new_namespace("ro-unsafe")
    rollout = canary_rollout("vlm", 6, pod_template("vlm", pools=["inference", "hybrid"],
                                                    spread_pools=True),
                             steps=[{"setWeight": 20}, {"pause": {}}], max_surge=0,
                             max_unavailable=1)
    driver = start(env, controller_identity, ns, rollout)
    # an unready inference pod goes first (rule 3) while hybrid pods survive
    unready = first_inference(env, wait_running(env, ns, "app=vlm", 6))
    make_unready(env, unready)
    wait_settled(env, ns)
    name = unready["metadata"]["name"]
    assert name in {v["name"] for v in plan_json(env, f"ro/{ns}/vlm", 5)["victims"]}
    env.set_policy(enforcement="enforce")
    try:
        for args in (["scale", "rollout/vlm", "--replicas=5"],
                     ["patch", "rollout/vlm", "--type=merge", "-p", '{"spec":{"replicas":5}}']):
            denied = env.kubectl("-n", ns, *args)
            assert denied.code != 0, str(denied)
            assert 'admission webhook "scale.poolguard.dev" denied the request' in denied.stderr
            assert name in denied.stderr
        assert env.api_get(f"/apis/argoproj.io/v1alpha1/namespaces/{ns}/rollouts/vlm")[
            "spec"]["replicas"] == 6
        # A new revision: the controller shrinks the stable ReplicaSet to make room for the
        # canary (maxSurge 0): the same unsafe shrink a person's scale would be, not denied.
        [stable] = replica_sets(env, ns)
        assert plan_json(env, f"rs/{ns}/{stable['metadata']['name']}", 5)["allowed"] is False
        update(env, driver, rollout, 2)
        assert (stable["metadata"]["name"], 6, 5) in driver.scaled
        status = rollout_status(env, ns, "vlm")
        new = by_hash(env, ns)[status["currentPodHash"]]
        counts = basic_canary_counts(env.api_get(
            f"/apis/argoproj.io/v1alpha1/namespaces/{ns}/rollouts/vlm"), new,
            by_hash(env, ns)[status["stableRS"]], [])
        assert (new["spec"]["replicas"], sizes(env, ns)[stable["metadata"]["name"]]) == counts
        assert name not in active_pods(env, ns)
    finally:
        env.set_policy(enforcement="warn")
    env.delete_namespace(ns)
