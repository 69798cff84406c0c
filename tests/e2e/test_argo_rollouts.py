"""Argo Rollouts against the real control plane: the real Argo Rollouts controller (built
from github.com/argoproj/argo-rollouts v1.10.2, running as argo-rollouts:argo-rollouts with
its module's ClusterRole, tests/e2e/rollouts.py) sizes the ReplicaSets and the real
ReplicaSet controller chooses the pods.

Each scale-down of a Rollout, through `kubectl scale rollout/NAME` (the /scale subresource)
and through a spec.replicas patch, is compared with `plan --workload ro/NS/NAME` taken just
before: every certain victim is deleted and every deleted pod was predicted. A person's
unsafe scale-down is denied with the pods named; the controller's own writes never are.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.e2e.harness import Environment
from tests.e2e.rollouts import (
    RolloutsController,
    abort_as_user,
    get_rollout,
    promote_as_user,
    wait_rollout_settled,
)
from tests.e2e.rollouts_manifests import (
    DEADLINE,
    DESIRED,
    HASH_LABEL,
    blue_green_rollout,
    canary_rollout,
    services,
)
from tests.e2e.test_controllers import first_inference, make_unready
from tests.e2e.workloads import (
    active_pods,
    apply,
    compare,
    pod_template,
    replica_sets,
    wait_running,
    wait_settled,
)
from tests.e2e.workloads import plan as plan_json

CONTROLLER_USER = "system:serviceaccount:argo-rollouts:argo-rollouts"


@pytest.fixture(scope="module", autouse=True)
def warn(env: Environment, rollouts_controller: RolloutsController) -> Iterator[None]:
    """These tests judge the prediction (the denial test enforces)."""
    env.set_policy(enforcement="warn")
    yield


def start(env: Environment, ns: str, rollout: dict[str, Any]) -> None:
    """The Rollout (and a blue-green's Services), until the controller and its pods rest."""
    apply(env, ns, rollout, *services(rollout))
    come_to_rest(env, ns, rollout)


def update(env: Environment, ns: str, rollout: dict[str, Any], revision: int,
           manual: bool = False) -> None:
    """A new pod template (what `kubectl argo rollouts set image` changes); with `manual`
    its pods never turn ready (the fake kubelet leaves them), so a step waits on them."""
    metadata = rollout["spec"]["template"]["metadata"]
    metadata.setdefault("annotations", {})["e2e.poolguard.dev/revision"] = str(revision)
    if manual:
        app = metadata["labels"]["app"]
        rollout["spec"]["template"] = pod_template(app, manual=True, annotations=metadata[
            "annotations"])
    apply(env, ns, rollout)
    come_to_rest(env, ns, rollout, running=not manual)


def come_to_rest(env: Environment, ns: str, rollout: dict[str, Any], running: bool = True
                 ) -> None:
    name = rollout["metadata"]["name"]
    wait_rollout_settled(env, ns, name)
    if running:
        app = rollout["spec"]["template"]["metadata"]["labels"]["app"]
        wait_running(env, ns, f"app={app}", sum(sizes(env, ns).values()))
        wait_rollout_settled(env, ns, name)


def sizes(env: Environment, ns: str) -> dict[str, int]:
    """ReplicaSet name -> spec.replicas."""
    return {rs["metadata"]["name"]: rs["spec"]["replicas"] for rs in replica_sets(env, ns)}


def by_hash(env: Environment, ns: str) -> dict[str, dict[str, Any]]:
    return {rs["metadata"]["labels"][HASH_LABEL]: rs for rs in replica_sets(env, ns)}


def sizes_by_hash(env: Environment, ns: str) -> dict[str, int]:
    return {h: rs["spec"]["replicas"] for h, rs in by_hash(env, ns).items()}


def scale_and_compare(env: Environment, ns: str, name: str, target: int, *, through: str,
                      resume: bool = False) -> set[str]:
    """`plan` for `target`, the scale-down (kubectl scale, or a patch of spec.replicas), the
    controller at rest, then the deleted pods against the prediction. With `resume` the
    Rollout is paused by its user: nothing may go until it is resumed."""
    document = plan_json(env, f"ro/{ns}/{name}", target)
    before = active_pods(env, ns)
    if through == "scale":
        result = env.kubectl("-n", ns, "scale", f"rollout/{name}", f"--replicas={target}")
    else:
        result = env.kubectl("-n", ns, "patch", f"rollout/{name}", "--type=merge", "-p",
                             json.dumps({"spec": {"replicas": target}}))
    assert result.code == 0, str(result)
    wait_rollout_settled(env, ns, name)
    if resume:
        assert set(active_pods(env, ns)) == set(before), "pods went while user-paused"
        env.kubectl("-n", ns, "patch", f"rollout/{name}", "--type=merge", "-p",
                    '{"spec":{"paused":false}}', check=True)
        wait_rollout_settled(env, ns, name)
    deleted = set(before) - set(active_pods(env, ns))
    verdict = compare(document, deleted)
    assert verdict.ok, (verdict.problems, document, sorted(deleted))
    assert deleted
    return deleted


def spread(app: str) -> dict[str, Any]:
    return pod_template(app, pools=["inference", "hybrid"], spread_pools=True)


def test_steady_state_rollout_scaled_through_scale_and_spec_replicas(env: Environment) -> None:
    ns = env.new_namespace("ro-steady")
    start(env, ns, canary_rollout("llm", 6, spread("llm"),
                                  steps=[{"setWeight": 50}, {"pause": {}}]))
    [stable] = replica_sets(env, ns)
    assert get_rollout(env, ns, "llm")["status"]["stableRS"] == stable["metadata"]["labels"][
        HASH_LABEL]
    assert len(scale_and_compare(env, ns, "llm", 4, through="scale")) == 2
    assert sizes(env, ns) == {stable["metadata"]["name"]: 4}
    assert by_hash(env, ns)[stable["metadata"]["labels"][HASH_LABEL]]["metadata"][
        "annotations"][DESIRED] == "4"
    assert len(scale_and_compare(env, ns, "llm", 3, through="spec.replicas")) == 1
    assert sizes(env, ns) == {stable["metadata"]["name"]: 3}
    env.delete_namespace(ns)


def test_canary_paused_at_a_pause_step_splits_the_scale_down(env: Environment) -> None:
    ns = env.new_namespace("ro-canary")
    rollout = canary_rollout("asr", 6, spread("asr"), steps=[{"setWeight": 50}, {"pause": {}}],
                             max_surge=1, max_unavailable=0)
    start(env, ns, rollout)
    update(env, ns, rollout, 2)
    status = get_rollout(env, ns, "asr")["status"]
    assert status["currentStepIndex"] == 1  # at the pause step, after setWeight 50
    assert [c["reason"] for c in status["pauseConditions"]] == ["CanaryPauseStep"]
    stable, canary = status["stableRS"], status["currentPodHash"]
    assert sizes_by_hash(env, ns) == {stable: 3, canary: 3}
    assert len(scale_and_compare(env, ns, "asr", 4, through="scale")) == 2
    assert sizes_by_hash(env, ns) == {stable: 2, canary: 2}  # 50% of 4
    # 3 would keep 2 + 2 (the canary's half rounds up, maxSurge allows the fourth pod)
    assert len(scale_and_compare(env, ns, "asr", 2, through="spec.replicas")) == 2
    assert sizes_by_hash(env, ns) == {stable: 1, canary: 1}
    # unpaused (promoted): the canary becomes stable at full size, the old one goes
    promote_as_user(env, ns, "asr")
    come_to_rest(env, ns, rollout)
    assert get_rollout(env, ns, "asr")["status"]["stableRS"] == canary
    scale_and_compare(env, ns, "asr", 1, through="scale")
    assert sizes_by_hash(env, ns) == {stable: 0, canary: 1}
    env.delete_namespace(ns)


def test_canary_scaled_down_during_a_set_weight_step_and_while_user_paused(
        env: Environment) -> None:
    """The setWeight step waits on canary pods that never turn ready: the controller is
    mid-step (not paused) when the scale-down comes; then the user pauses the Rollout
    (spec.paused), which halts its scaling until resumed."""
    ns = env.new_namespace("ro-step")
    rollout = canary_rollout("emb", 6, spread("emb"), steps=[{"setWeight": 50}, {"pause": {}}],
                             max_surge=2, max_unavailable=1)
    start(env, ns, rollout)
    update(env, ns, rollout, 2, manual=True)
    status = get_rollout(env, ns, "emb")["status"]
    assert status["currentStepIndex"] == 0 and not status.get("pauseConditions")
    assert status["stableRS"] != status["currentPodHash"]
    scale_and_compare(env, ns, "emb", 4, through="scale")
    env.kubectl("-n", ns, "patch", "rollout/emb", "--type=merge", "-p",
                '{"spec":{"paused":true}}', check=True)
    wait_rollout_settled(env, ns, "emb")
    scale_and_compare(env, ns, "emb", 2, through="spec.replicas", resume=True)
    env.delete_namespace(ns)


def test_aborted_canary_scaled_down(env: Environment) -> None:
    """An abort scales the stable ReplicaSet back up and the canary to zero; scale-downs
    during and after it."""
    ns = env.new_namespace("ro-abort")
    rollout = canary_rollout("rr", 5, spread("rr"), steps=[{"setWeight": 40}, {"pause": {}}],
                             max_surge=1, max_unavailable=0)
    start(env, ns, rollout)
    update(env, ns, rollout, 2)
    status = get_rollout(env, ns, "rr")["status"]
    stable, canary = status["stableRS"], status["currentPodHash"]
    abort_as_user(env, ns, "rr")
    come_to_rest(env, ns, rollout)
    status = get_rollout(env, ns, "rr")["status"]
    assert status.get("abort") is True
    assert sizes_by_hash(env, ns) == {stable: 5, canary: 0}
    assert len(scale_and_compare(env, ns, "rr", 3, through="scale")) == 2
    assert len(scale_and_compare(env, ns, "rr", 2, through="spec.replicas")) == 1
    assert sizes_by_hash(env, ns) == {stable: 2, canary: 0}
    env.delete_namespace(ns)


def test_traffic_routed_canary_with_dynamic_stable_scale(env: Environment) -> None:
    """NGINX traffic routing (Ingress objects only: no router runs, none is needed for the
    controller to write the canary Ingress) with dynamicStableScale: the stable ReplicaSet
    shrinks as the canary's weight grows, and a scale-down splits by that weight."""
    ns = env.new_namespace("ro-dynamic")
    rollout = canary_rollout("dss", 6, spread("dss"), steps=[{"setWeight": 50}, {"pause": {}}],
                             max_surge=1, max_unavailable=0, nginx=True,
                             dynamic_stable_scale=True)
    start(env, ns, rollout)
    update(env, ns, rollout, 2)
    status = get_rollout(env, ns, "dss")["status"]
    assert [c["reason"] for c in status["pauseConditions"]] == ["CanaryPauseStep"]
    stable, canary = status["stableRS"], status["currentPodHash"]
    assert sizes_by_hash(env, ns) == {stable: 3, canary: 3}
    scale_and_compare(env, ns, "dss", 4, through="scale")
    scale_and_compare(env, ns, "dss", 2, through="spec.replicas")
    assert sum(sizes_by_hash(env, ns).values()) == 2
    env.delete_namespace(ns)


def test_blue_green_with_preview_count_then_within_the_scale_down_delay(
        env: Environment) -> None:
    ns = env.new_namespace("ro-bluegreen")
    rollout = blue_green_rollout("tts", 4, spread("tts"), scale_down_delay=600,
                                 preview_replicas=2)
    start(env, ns, rollout)
    update(env, ns, rollout, 2)
    status = get_rollout(env, ns, "tts")["status"]
    active, preview = status["blueGreen"]["activeSelector"], status["blueGreen"]["previewSelector"]
    assert active == status["stableRS"] != preview == status["currentPodHash"]
    assert [c["reason"] for c in status["pauseConditions"]] == ["BlueGreenPause"]
    assert sizes_by_hash(env, ns) == {active: 4, preview: 2}  # previewReplicaCount
    assert len(scale_and_compare(env, ns, "tts", 3, through="scale")) == 1
    assert sizes_by_hash(env, ns) == {active: 3, preview: 2}
    # promoted: the preview grows to spec.replicas and takes the active Service; the old
    # active keeps its pods until its scale-down deadline
    promote_as_user(env, ns, "tts")
    come_to_rest(env, ns, rollout)
    status = get_rollout(env, ns, "tts")["status"]
    assert status["stableRS"] == status["blueGreen"]["activeSelector"] == preview
    old = by_hash(env, ns)[active]
    assert old["spec"]["replicas"] == 3 and old["metadata"]["annotations"].get(DEADLINE)
    scale_and_compare(env, ns, "tts", 2, through="spec.replicas")
    scale_and_compare(env, ns, "tts", 1, through="scale")
    assert sizes_by_hash(env, ns)[preview] == 1
    env.delete_namespace(ns)


def test_unsafe_scale_down_denied_and_the_controllers_own_writes_never(
        env: Environment) -> None:
    ns = env.new_namespace("ro-unsafe")
    rollout = canary_rollout("vlm", 6, spread("vlm"), steps=[{"setWeight": 20}, {"pause": {}}],
                             max_surge=0, max_unavailable=1)
    start(env, ns, rollout)
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
        assert get_rollout(env, ns, "vlm")["spec"]["replicas"] == 6
        # A new revision: the controller shrinks the stable ReplicaSet to make room for the
        # canary (maxSurge 0): the same unsafe shrink a person's scale would be, not denied.
        [stable] = replica_sets(env, ns)
        assert plan_json(env, f"rs/{ns}/{stable['metadata']['name']}", 5)["allowed"] is False
        update(env, ns, rollout, 2)
        assert sizes(env, ns)[stable["metadata"]["name"]] == 5
        assert name not in active_pods(env, ns)
    finally:
        env.set_policy(enforcement="warn")
    writes = [e for e in env.audit_events()
              if e.get("user", {}).get("username") == CONTROLLER_USER
              and (e.get("objectRef") or {}).get("resource") == "replicasets"
              and (e.get("objectRef") or {}).get("namespace") == ns]
    assert writes, "the controller's ReplicaSet writes are not in the audit log"
    refused = [e for e in writes
               if (e.get("responseStatus") or {}).get("code", 200) in (400, 403, 422)]
    assert not refused, refused[:3]
    env.delete_namespace(ns)
