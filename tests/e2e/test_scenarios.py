"""poolguard against a real kube-apiserver, kube-controller-manager and kube-scheduler:
the scenarios, driven as users and controllers drive them (kubectl, the
scheduler, the ReplicaSet/Deployment/StatefulSet controllers)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import wait_for
from tests.e2e.fake_kubelet import STRATEGIC, pod_status
from tests.e2e.harness import (
    COST_ANNOTATION,
    POOL_LABEL,
    Environment,
    annotations,
    has_pool_cost,
    is_active,
)
from tests.e2e.workloads import (
    PlanComparison,
    PodRecorder,
    active_pods,
    apply,
    compare,
    deployment,
    pod_template,
    replica_sets,
    statefulset,
    wait_running,
    wait_settled,
)
from tests.e2e.workloads import plan as plan_json

OWNER_PREFIX = "poolguard.dev/"


@pytest.fixture(scope="module", autouse=True)
def enforce(env: Environment) -> Iterator[None]:
    env.set_policy(enforcement="enforce")
    yield


def namespace(env: Environment, name: str, **labels: str) -> str:
    return env.new_namespace(name, labels)


def pool_of(env: Environment, pod: dict[str, Any]) -> str:
    return env.node_pool()[pod["spec"]["nodeName"]]


def set_ready(env: Environment, pod: dict[str, Any], ready: bool) -> None:
    """What a kubelet reports when a readiness probe starts failing (or passing)."""
    meta = pod["metadata"]
    env.core.patch_namespaced_pod_status(
        meta["name"], meta["namespace"], {"status": pod_status(pod, ready=ready)},
        _content_type=STRATEGIC)


def scale(env: Environment, ns: str, workload: str, replicas: int):
    return env.kubectl("-n", ns, "scale", workload, f"--replicas={replicas}")


def deleted_after_scale(env: Environment, ns: str, workload: str, replicas: int
                        ) -> tuple[dict[str, Any], PlanComparison]:
    """plan, then kubectl scale; the plan document and how the pods the controllers
    deleted compare with it."""
    kind, name = workload.split("/")
    saved = env.run_dir / f"scenario-{ns}.state.yaml"  # for a bug report if it fails
    document = plan_json(env, f"{kind}/{ns}/{name}", replicas, "--save-state", str(saved))
    before = active_pods(env, ns)
    result = scale(env, ns, workload, replicas)
    assert result.code == 0, str(result)
    wait_settled(env, ns)
    deleted = set(before) - set(active_pods(env, ns))
    return document, compare(document, deleted)


def spread_deployment(env: Environment, ns: str, name: str, replicas: int) -> list[dict]:
    """A Deployment spread evenly over the inference and hybrid pools, Running."""
    template = pod_template(name, pools=["inference", "hybrid"], spread_pools=True)
    apply(env, ns, deployment(name, replicas, template))
    return wait_running(env, ns, f"app={name}", replicas)


# --- costs set at admission ------------------------------------------------------------------


def test_binding_webhook_sets_pool_cost_in_the_scheduler_binding(env: Environment) -> None:
    """The real scheduler binds a Deployment's pods onto inference and hybrid nodes; the
    first version of each pod that carries spec.nodeName already carries its pool's cost
    (set through pods/binding, in the same write), with no reconciler running."""
    assert env.reconciler is None
    ns = namespace(env, "binding")
    recorder = PodRecorder(env, ns)
    try:
        pods = spread_deployment(env, ns, "llm", 6)
        first_bound = recorder.first_bound_versions({p["metadata"]["name"] for p in pods})
    finally:
        recorder.stop()
    pools = env.node_pool()
    seen_pools = set()
    for name, version in first_bound.items():
        pool = pools[version["spec"]["nodeName"]]
        seen_pools.add(pool)
        assert has_pool_cost(version, pool), (name, version)
    assert seen_pools == {"inference", "hybrid"}
    for pod in pods:  # and it stays
        assert has_pool_cost(pod, pool_of(env, pod))


def bare_pod(name: str, *, pool: str | None = None, cost: str | None = None,
             extra: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"app": name},
                            "annotations": dict(extra or {})}
    if cost is not None:
        meta["annotations"][COST_ANNOTATION] = cost
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
    if pool:
        spec["nodeSelector"] = {POOL_LABEL: pool}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def test_pod_pinned_by_node_selector_gets_its_cost_at_create(env: Environment) -> None:
    ns = namespace(env, "pinned")
    created = env.kubectl("-n", ns, "create", "-o", "json", "-f", "-",
                          stdin=json.dumps(bare_pod("pinned", pool="inference")), check=True)
    pod = json.loads(created.stdout)
    assert not pod["spec"].get("nodeName")  # not scheduled yet: the cost came at create
    assert annotations(pod)[COST_ANNOTATION] == "1000"
    [running] = wait_running(env, ns, "app=pinned", 1)
    assert pool_of(env, running) == "inference"
    assert annotations(running)[COST_ANNOTATION] == "1000"


def test_explicit_cost_set_by_a_person_is_kept(env: Environment) -> None:
    ns = namespace(env, "explicit")
    env.kubectl("-n", ns, "create", "-f", "-", check=True,
                stdin=json.dumps(bare_pod("mine", pool="inference", cost="5")))
    [pod] = wait_running(env, ns, "app=mine", 1)
    assert annotations(pod)[COST_ANNOTATION] == "5"
    assert not [k for k in annotations(pod) if k.startswith(OWNER_PREFIX)]
    # The reconciler would not change it either.
    dry = env.poolguard("reconcile", "--dry-run", "--once", "--kubeconfig",
                        env.run_dir / "poolguard" / "poolguard-reconciler.kubeconfig",
                        "--policy", env.policy_file, "--metrics-port", "0")
    assert dry.code == 0, str(dry)
    assert f"{ns}/mine" not in dry.stdout + dry.stderr


def test_invalid_explicit_cost_is_rejected_with_the_api_servers_message(
        env: Environment) -> None:
    """poolguard denies the pod with the API server's own validation message: the same
    text the API server gives when poolguard is skipped for the namespace."""
    ns = namespace(env, "invalid")
    denied = env.kubectl("-n", ns, "create", "-f", "-",
                         stdin=json.dumps(bare_pod("bad", pool="inference", cost="007")))
    assert denied.code != 0
    assert 'admission webhook "pods.poolguard.dev" denied the request' in denied.stderr
    skipped = namespace(env, "invalid-skipped", **{"poolguard.dev/skip": "true"})
    own = env.kubectl("-n", skipped, "create", "-f", "-",
                      stdin=json.dumps(bare_pod("bad", pool="inference", cost="007")))
    assert own.code != 0
    api_message = re.search(r"(metadata\.annotations\[[^\]]+\]: Invalid value: \"007\": "
                            r"[^\n]*?integer)", own.stderr)
    assert api_message, own.stderr
    assert api_message.group(1) in denied.stderr, (own.stderr, denied.stderr)


# --- scale-downs judged by the validating webhook --------------------------------------------


@pytest.fixture(scope="module")
def guarded(env: Environment) -> dict[str, Any]:
    """6 pods on inference and hybrid; one inference pod fails its readiness probe, so it is
    the first the ReplicaSet controller deletes (rule 3) while hybrid pods survive."""
    ns = namespace(env, "guarded")
    pods = spread_deployment(env, ns, "web", 6)
    unready = next(p for p in pods if pool_of(env, p) == "inference")
    set_ready(env, unready, False)
    wait_for("the pod to be unready", lambda: not [
        c for c in env.core.read_namespaced_pod(unready["metadata"]["name"], ns).status.conditions
        if c.type == "Ready" and c.status == "True"])
    wait_settled(env, ns)
    return {"ns": ns, "unready": unready["metadata"]["name"]}


def test_kubectl_scale_down_removing_an_inference_pod_is_denied(
        env: Environment, guarded: dict[str, Any]) -> None:
    ns = guarded["ns"]
    result = scale(env, ns, "deployment/web", 5)
    assert result.code != 0, str(result)
    assert 'admission webhook "scale.poolguard.dev" denied the request' in result.stderr
    assert guarded["unready"] in result.stderr  # names the victim
    assert "protectedLast" in result.stderr
    assert env.apps.read_namespaced_deployment("web", ns).spec.replicas == 6
    # the same decision as plan's
    document = plan_json(env, f"deployment/{ns}/web", 5)
    assert document["allowed"] is False
    assert [v["name"] for v in document["victims"]] == [guarded["unready"]]


def test_warn_mode_lets_the_scale_down_through_with_kubectl_warnings(
        env: Environment, guarded: dict[str, Any]) -> None:
    ns = guarded["ns"]
    env.set_policy(enforcement="warn")
    try:
        result = scale(env, ns, "deployment/web", 5)
        assert result.code == 0, str(result)
        warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
        assert warnings, result.stderr
        assert any("poolguard [protectedLast]" in w and guarded["unready"] in w
                   for w in warnings), warnings
        wait_settled(env, ns)
        assert guarded["unready"] not in active_pods(env, ns)  # and it was deleted
    finally:
        env.set_policy(enforcement="enforce")


def test_dryrun_mode_records_an_audit_annotation_and_a_metric(env: Environment) -> None:
    ns = namespace(env, "dryrun")
    pods = spread_deployment(env, ns, "api", 4)
    unready = next(p for p in pods if pool_of(env, p) == "inference")
    set_ready(env, unready, False)
    wait_for("unready", lambda: not [
        c for c in env.core.read_namespaced_pod(unready["metadata"]["name"], ns).status.conditions
        if c.type == "Ready" and c.status == "True"])
    wait_settled(env, ns)

    def violations() -> float:
        status, text = env.webhook_get("/metrics")
        assert status == 200
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("poolguard_scale_violations_total{")
                   and 'enforcement="dryrun"' in line)

    before = violations()
    env.set_policy(enforcement="dryrun")
    try:
        result = scale(env, ns, "deployment/api", 3)
        assert result.code == 0, str(result)
        assert "Warning:" not in result.stderr  # dryrun: silent for the user
    finally:
        env.set_policy(enforcement="enforce")
    assert violations() == before + 1

    def audited() -> dict[str, str] | None:
        for event in env.audit_events():
            ref = event.get("objectRef") or {}
            if (ref.get("namespace") == ns and ref.get("subresource") == "scale"
                    and event.get("stage") == "ResponseComplete"):
                found = {k: v for k, v in (event.get("annotations") or {}).items()
                         if k.startswith("scale.poolguard.dev/")}
                if found:
                    return found
        return None

    found = wait_for("the audit event of the scale", audited, timeout=30)
    assert any(unready["metadata"]["name"] in v for v in found.values()), found


# --- predictions checked against the real controllers ----------------------------------------


def test_allowed_scale_down_deletes_the_pods_plan_predicted(env: Environment) -> None:
    ns = namespace(env, "allowed")
    spread_deployment(env, ns, "chat", 8)
    wait_settled(env, ns)
    document, verdict = deleted_after_scale(env, ns, "deployment/chat", 5)
    assert document["allowed"] is True
    assert len(verdict.deleted) == 3
    assert verdict.ok, (verdict, document)
    survivors = active_pods(env, ns).values()
    assert sum(pool_of(env, p) == "inference" for p in survivors) == 4


def test_rollout_scale_down_matches_plan_split_and_deletions(env: Environment) -> None:
    """Three ReplicaSets mid-rollout (kubectl rollout pause holds it there); scaling the
    Deployment: the Deployment controller's proportional split and the ReplicaSet
    controllers' deletions are the ones plan predicted."""
    ns = namespace(env, "rollout")
    name = "gen"

    def template(revision: int) -> dict[str, Any]:
        return pod_template(name, pools=["inference"], manual=revision > 1,
                            annotations={"e2e.poolguard.dev/revision": str(revision)})

    apply(env, ns, deployment(name, 6, template(1), max_surge=2, max_unavailable=0))
    wait_running(env, ns, f"app={name}", 6)
    apply(env, ns, deployment(name, 6, template(2), max_surge=2, max_unavailable=0))
    wait_settled(env, ns)
    # revision 2's first pods become ready (we are their kubelet): the rollout moves on
    for pod in env.pods(ns, "e2e.poolguard.dev/manual-status=true"):
        wait_for("bound", lambda p=pod: env.core.read_namespaced_pod(
            p["metadata"]["name"], ns).spec.node_name)
        fresh = env.api_get(f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}")
        env.core.patch_namespaced_pod_status(fresh["metadata"]["name"], ns,
                                             {"status": pod_status(fresh)},
                                             _content_type=STRATEGIC)
    wait_settled(env, ns)
    apply(env, ns, deployment(name, 6, template(3), max_surge=2, max_unavailable=0))
    wait_settled(env, ns)
    env.kubectl("-n", ns, "rollout", "pause", f"deployment/{name}", check=True)
    wait_settled(env, ns)
    sets = {rs["metadata"]["name"]: rs["spec"]["replicas"] for rs in replica_sets(env, ns)}
    assert sum(1 for n in sets.values() if n) == 3, sets

    document, verdict = deleted_after_scale(env, ns, f"deployment/{name}", 3)
    actual = {rs["metadata"]["name"]: rs["spec"]["replicas"] for rs in replica_sets(env, ns)}
    predicted = {n: s["to"] for n, s in document["replicaSets"].items()}
    assert predicted == {n: actual[n] for n in predicted}, (predicted, actual)
    assert verdict.ok, (verdict, document)


def test_deployment_controller_rollout_updates_are_not_blocked(env: Environment) -> None:
    """A rollout from the inference pool to the hybrid pool: a person shrinking the old
    ReplicaSet is denied (inference pods go while hybrid ones stay), the Deployment
    controller doing the same during the rollout is not (matchConditions, evaluated by
    the API server, exempt it), so the rollout completes under enforce."""
    ns = namespace(env, "migrate")
    name = "emb"

    def template(pool: str, manual: bool) -> dict[str, Any]:
        return pod_template(name, pools=[pool], manual=manual)

    apply(env, ns, deployment(name, 3, template("inference", False), max_surge=1,
                              max_unavailable=0))
    wait_running(env, ns, f"app={name}", 3)
    apply(env, ns, deployment(name, 3, template("hybrid", True), max_surge=1,
                              max_unavailable=0))
    wait_settled(env, ns)
    [old] = [rs for rs in replica_sets(env, ns)
             if rs["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
                 "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
                 "matchExpressions"][0]["values"] == ["inference"]]
    new_pods = env.pods(ns, "e2e.poolguard.dev/manual-status=true")
    assert len(new_pods) == 1
    wait_for("the new pod bound", lambda: env.core.read_namespaced_pod(
        new_pods[0]["metadata"]["name"], ns).spec.node_name)
    # start the new pod so it survives outside the protected pool
    fresh = env.api_get(f"/api/v1/namespaces/{ns}/pods/{new_pods[0]['metadata']['name']}")
    env.core.patch_namespaced_pod_status(fresh["metadata"]["name"], ns,
                                         {"status": pod_status(fresh)},
                                         _content_type=STRATEGIC)
    # A person cannot do what the controller is about to do... (but the controller may
    # have done it already; only a request that still lowers the count is checked)
    person = env.kubectl("-n", ns, "scale", f"rs/{old['metadata']['name']}", "--replicas=0")
    old_now = env.apps.read_namespaced_replica_set(old["metadata"]["name"], ns)
    if old_now.spec.replicas > 0 and person.code == 0:
        pytest.fail(f"a person's scale-down of the old ReplicaSet went through:\n{person}")
    if person.code != 0:
        assert 'admission webhook "scale.poolguard.dev" denied the request' in person.stderr
    # ...while the rollout, driven by the Deployment controller, completes.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for pod in env.pods(ns, "e2e.poolguard.dev/manual-status=true"):
            if pod["spec"].get("nodeName") and not (pod.get("status") or {}).get("startTime"):
                env.core.patch_namespaced_pod_status(
                    pod["metadata"]["name"], ns, {"status": pod_status(pod)},
                    _content_type=STRATEGIC)
        status = env.apps.read_namespaced_deployment(name, ns).status
        old_now = env.apps.read_namespaced_replica_set(old["metadata"]["name"], ns)
        if old_now.spec.replicas == 0 and (status.updated_replicas or 0) == 3 and (
                status.available_replicas or 0) == 3:
            break
        time.sleep(0.3)
    else:
        pytest.fail(f"the rollout did not complete: {status}")
    pools = {pool_of(env, p) for p in active_pods(env, ns).values()}
    assert pools == {"hybrid"}


def test_statefulset_scale_down_deletes_the_predicted_ordinals(env: Environment) -> None:
    ns = namespace(env, "stateful")
    apply(env, ns, statefulset("db", 5, pod_template("db", pools=["inference"])))
    wait_running(env, ns, "app=db", 5, timeout=180)
    wait_settled(env, ns)
    document, verdict = deleted_after_scale(env, ns, "statefulset/db", 2)
    assert [v["name"] for v in document["victims"]] == ["db-4", "db-3", "db-2"]
    assert verdict.deleted == {"db-2", "db-3", "db-4"}
    assert verdict.ok, verdict


# --- outages and repairs ---------------------------------------------------------------------


def test_webhook_down_pods_still_created_and_reconciler_repairs_costs(
        env: Environment) -> None:
    ns = namespace(env, "outage")
    env.stop_serve()
    try:
        pods = spread_deployment(env, ns, "ocr", 4)  # failurePolicy Ignore: created anyway
        assert all(COST_ANNOTATION not in annotations(p) for p in pods)
        env.start_reconciler()

        def repaired() -> bool:
            current = [p for p in env.pods(ns, "app=ocr") if is_active(p)]
            return len(current) == 4 and all(
                has_pool_cost(p, pool_of(env, p))
                for p in current)

        wait_for("the reconciler to set the costs", repaired, timeout=60)
    finally:
        env.start_serve()


def test_node_relabelled_to_another_pool_costs_follow(env: Environment) -> None:
    env.start_reconciler()
    ns = namespace(env, "relabel")
    env.kubectl("-n", ns, "create", "-f", "-", check=True,
                stdin=json.dumps({**bare_pod("moving"),
                                  "spec": {"nodeName": "hybrid-3", "containers": [
                                      {"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}))
    wait_running(env, ns, "app=moving", 1)
    wait_for("the hybrid cost", lambda: has_pool_cost(
        env.api_get(f"/api/v1/namespaces/{ns}/pods/moving"), "hybrid"))

    def cost() -> str | None:
        return annotations(env.api_get(f"/api/v1/namespaces/{ns}/pods/moving")).get(
            COST_ANNOTATION)

    try:
        env.kubectl("label", "node", "hybrid-3", f"{POOL_LABEL}=inference", "--overwrite",
                    check=True)
        wait_for("the cost to follow the node to inference", lambda: cost() == "1000")
    finally:
        env.kubectl("label", "node", "hybrid-3", f"{POOL_LABEL}=hybrid", "--overwrite",
                    check=True)
    wait_for("the cost to follow the node back to hybrid", lambda: has_pool_cost(
        env.api_get(f"/api/v1/namespaces/{ns}/pods/moving"), "hybrid"))


# --- the other ways replicas change ----------------------------------------------------------


def test_hpa_style_put_to_the_scale_subresource_is_checked(env: Environment) -> None:
    ns = namespace(env, "hpa")
    pods = spread_deployment(env, ns, "asr", 4)
    unready = next(p for p in pods if pool_of(env, p) == "inference")
    set_ready(env, unready, False)
    wait_settled(env, ns)
    path = f"/apis/apps/v1/namespaces/{ns}/deployments/asr/scale"
    current = env.api_get(path)
    down = {**current, "spec": {"replicas": 3}}
    with pytest.raises(ApiException) as denied:
        env.apps.replace_namespaced_deployment_scale("asr", ns, down)
    assert denied.value.status == 403
    body = json.loads(denied.value.body)
    assert 'admission webhook "scale.poolguard.dev" denied the request' in body["message"]
    assert unready["metadata"]["name"] in body["message"]
    # an allowed PUT goes through (scale up)
    up = {**env.api_get(path), "spec": {"replicas": 5}}
    env.apps.replace_namespaced_deployment_scale("asr", ns, up)
    assert env.apps.read_namespaced_deployment("asr", ns).spec.replicas == 5


def test_gitops_apply_of_a_lower_replica_count_is_checked(env: Environment) -> None:
    ns = namespace(env, "gitops")
    template = pod_template("ops", pools=["inference", "hybrid"], spread_pools=True)
    apply(env, ns, deployment("ops", 4, template))
    pods = wait_running(env, ns, "app=ops", 4)
    unready = next(p for p in pods if pool_of(env, p) == "inference")
    set_ready(env, unready, False)
    wait_settled(env, ns)
    manifest = json.dumps(deployment("ops", 3, template))
    denied = env.kubectl("-n", ns, "apply", "--server-side", "--field-manager=e2e", "-f", "-",
                         stdin=manifest)
    assert denied.code != 0
    assert 'admission webhook "scale.poolguard.dev" denied the request' in denied.stderr
    assert unready["metadata"]["name"] in denied.stderr
    # fixing the pod makes the same apply safe (a hybrid pod goes first)
    set_ready(env, env.api_get(f"/api/v1/namespaces/{ns}/pods/{unready['metadata']['name']}"),
              True)
    wait_settled(env, ns)
    env.kubectl("-n", ns, "apply", "--server-side", "--field-manager=e2e", "-f", "-",
                stdin=manifest, check=True)
    wait_settled(env, ns)
    survivors = active_pods(env, ns).values()
    assert len(survivors) == 3
    assert sum(pool_of(env, p) == "inference" for p in survivors) == 2


# --- plan and cleanup ------------------------------------------------------------------------


def test_plan_reads_the_live_api_and_its_saved_state_gives_the_same_plan(
        env: Environment, tmp_path) -> None:
    ns = namespace(env, "plan")
    spread_deployment(env, ns, "tts", 6)
    wait_settled(env, ns)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    saved = tmp_path / "state.yaml"
    live = plan_json(env, f"deployment/{ns}/tts", 2, "--now", now, "--save-state", str(saved))
    assert len(live["victims"]) == 4
    replay = env.poolguard("plan", "--state", saved, "--workload", f"deployment/{ns}/tts",
                           "--replicas", "2", "--now", now, "-o", "json")
    assert replay.code == 0, str(replay)
    assert json.loads(replay.stdout) == live
    kinds = {item["kind"] for item in yaml.safe_load(saved.read_text())["items"]}
    assert {"Pod", "Node", "Deployment", "ReplicaSet", "Namespace"} <= kinds
    text = env.poolguard("plan", "--kubeconfig", env.plane.kubeconfig(), "--workload",
                         f"deployment/{ns}/tts", "--replicas", "2", "--now", now)
    assert text.code == 0 and f"Deployment {ns}/tts: 6 -> 2 replicas" in text.stdout, str(text)


def test_reconcile_cleanup_removes_only_poolguards_annotations(env: Environment) -> None:
    ns = namespace(env, "cleanup")
    env.stop_reconciler()  # uninstall order: the reconciler is gone before the cleanup
    env.kubectl("-n", ns, "create", "-f", "-", check=True,
                stdin=json.dumps(bare_pod("ours", pool="inference", extra={"team": "ml"})))
    env.kubectl("-n", ns, "create", "-f", "-", check=True,
                stdin=json.dumps(bare_pod("theirs", pool="inference", cost="7",
                                          extra={"team": "ml"})))
    wait_running(env, ns, "app in (ours,theirs)", 2)
    ours = annotations(env.api_get(f"/api/v1/namespaces/{ns}/pods/ours"))
    assert ours[COST_ANNOTATION] == "1000"
    assert any(k.startswith(OWNER_PREFIX) for k in ours), ours
    done = env.poolguard("reconcile", "--cleanup", "--kubeconfig",
                         env.run_dir / "poolguard" / "poolguard-reconciler.kubeconfig")
    assert done.code == 0, str(done)
    assert done.stdout.startswith("cleanup: "), done.stdout
    ours = annotations(env.api_get(f"/api/v1/namespaces/{ns}/pods/ours"))
    theirs = annotations(env.api_get(f"/api/v1/namespaces/{ns}/pods/theirs"))
    assert COST_ANNOTATION not in ours and not any(k.startswith(OWNER_PREFIX) for k in ours)
    assert ours["team"] == "ml"
    assert theirs[COST_ANNOTATION] == "7" and theirs["team"] == "ml"
