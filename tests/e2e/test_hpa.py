"""The real HPA controller of kube-controller-manager against poolguard's clamp.

The HPA syncs every 5 s and reads its CPU metrics from the fake metrics.k8s.io
(tests/e2e/hpa.py).

Every pod uses 1% of its CPU request, so the HPA wants minReplicas. poolguard lowers that
scale-down to the smallest safe count; once the placement allows (a cost fixed), a later
HPA sync goes the rest of the way. A person's scale of the same Deployment is still denied.
Where the test reads a state that a sync of the HPA could change under it, it holds the HPA
(tests/e2e/hpa.py `scale_down_held`) or waits for the outcome.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.controlplane import wait_for
from tests.e2e.harness import COST_ANNOTATION, COSTS, Environment, is_active
from tests.e2e.hpa import (
    HPA_USER,
    MetricsAPI,
    clamps,
    hpa,
    hpa_event_reasons,
    hpa_state,
    scale_down_held,
)
from tests.e2e.workloads import apply, deployment, pod_template, wait_running, wait_settled
from tests.e2e.workloads import plan as plan_json

MIN_REPLICAS = 2


@pytest.fixture(scope="module", autouse=True)
def enforce(env: Environment) -> Iterator[None]:
    """A person's unsafe scale is denied: without the clamp, the HPA's would be too."""
    env.set_policy(enforcement="enforce")
    yield


def test_real_hpa_scales_down_as_far_as_is_safe_then_the_rest(
        env: Environment, metrics_api: MetricsAPI) -> None:
    ns = env.new_namespace("real-hpa")
    template = pod_template("asr", pools=["inference", "hybrid"], spread_pools=True)
    template["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    apply(env, ns, deployment("asr", 6, template))
    pods = wait_running(env, ns, "app=asr", 6)
    pools = env.node_pool()
    by_pool = {pool: sorted(p["metadata"]["name"] for p in pods
                            if pools[p["spec"]["nodeName"]] == pool)
               for pool in ("inference", "hybrid")}
    assert len(by_pool["inference"]) == len(by_pool["hybrid"]) == 3, by_pool
    # a person's cost keeps one hybrid pod last: below 4 replicas an inference pod would go
    # while it survives
    held = by_pool["hybrid"][0]
    env.kubectl("-n", ns, "annotate", "--overwrite", "pod", held, f"{COST_ANNOTATION}=5000",
                check=True)
    wait_settled(env, ns)
    expected = plan_json(env, f"deployment/{ns}/asr", MIN_REPLICAS, "--as",
                         HPA_USER)["clampedTo"]
    assert expected == 4  # the two hybrid pods at the policy's cost, nothing more

    apply(env, ns, hpa("asr", MIN_REPLICAS, 6))
    # the first sync asks 6 -> 2 and gets 4; a later one asks 4 -> 2 and stays at 4
    wait_for("two clamped HPA syncs", lambda: clamps(env, ns, "asr")[:2] == [
        f"6->{MIN_REPLICAS} became 6->{expected}",
        f"{expected}->{MIN_REPLICAS} became {expected}->{expected}"], timeout=60,
        interval=1.0)  # the audit log is read whole: it holds the earlier tests' events
    assert HPA_USER in metrics_api.users(f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods")
    assert env.apps.read_namespaced_deployment("asr", ns).spec.replicas == expected
    wait_settled(env, ns)
    left = sorted(p["metadata"]["name"] for p in env.pods(ns, "app=asr") if is_active(p))
    # only the two hybrid pods without the person's cost went: no inference pod was
    # deleted while a hybrid pod survived, and nothing was recreated
    assert left == sorted([*by_pool["inference"], held])
    status, conditions = hpa_state(env, ns, "asr")
    assert conditions["AbleToScale"] == "True/SucceededRescale", conditions
    assert conditions["ScalingActive"] == "True/ValidMetricFound", conditions
    assert status["desiredReplicas"] == MIN_REPLICAS, status
    assert "FailedRescale" not in hpa_event_reasons(env, ns, "asr")
    # a person asking the same of the same Deployment is still denied
    person = env.kubectl("-n", ns, "scale", "deployment/asr", f"--replicas={MIN_REPLICAS}")
    assert person.code != 0, str(person)
    assert 'admission webhook "scale.poolguard.dev" denied the request' in person.stderr
    assert env.apps.read_namespaced_deployment("asr", ns).spec.replicas == expected

    # the cost fixed to the policy's: the held pod goes first, so 2 is safe now. The HPA is
    # held meanwhile: its next sync would take the Deployment to 2 before plan reads 4 -> 2
    with scale_down_held(env, ns, "asr"):
        env.kubectl("-n", ns, "annotate", "--overwrite", "pod", held,
                    f"{COST_ANNOTATION}={COSTS['hybrid']}", check=True)
        wait_settled(env, ns)
        now = plan_json(env, f"deployment/{ns}/asr", MIN_REPLICAS, "--as", HPA_USER)
    assert now["replicas"]["from"] == expected, now  # what the HPA's next sync asks: 4 -> 2
    assert now["allowed"] is True and now["clampedTo"] is None, now
    wait_for(f"the HPA to scale to {MIN_REPLICAS}", lambda: env.apps.read_namespaced_deployment(
        "asr", ns).spec.replicas == MIN_REPLICAS, timeout=60)
    wait_settled(env, ns)
    left = [p for p in env.pods(ns, "app=asr") if is_active(p)]
    assert len(left) == MIN_REPLICAS
    assert {p["metadata"]["name"] for p in left} < set(by_pool["inference"])
    wait_for("the HPA to see its target reached",
             lambda: hpa_state(env, ns, "asr")[0].get("currentReplicas") == MIN_REPLICAS,
             timeout=30)
    _, conditions = hpa_state(env, ns, "asr")
    assert conditions["AbleToScale"].startswith("True/"), conditions
    assert "FailedRescale" not in hpa_event_reasons(env, ns, "asr")
    env.kubectl("-n", ns, "delete", "hpa", "asr", check=True)
