"""The safe count is the policy's own answer: the smallest count at or above the target
that the verdict allows, asked of `plan` at every count, whatever the rules.

Over random Deployments (mid-rollout too), StatefulSets (stalling too) and
LeaderWorkerSets (mid-update too), and
random policies (protectedLast on or off, minProtectedReplicas a number, a percentage or
0): `plan`'s `safeReplicas`, `plan --as` the HPA's `clampedTo` and the count
`/mutate-scale` writes for the HPA are all that count; and the verdict is never ALLOWED
while `safeReplicas` lies above the target.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import factories as f
from tests.support import lws_factories as lf
from tests.support import reviews
from webhook.admission.app import create_app
from webhook.admission.runtime import Runtime
from webhook.cli.plan_document import plan_workload
from webhook.cluster.state import PolicyHolder
from webhook.core.objects.kube import parse_time_ns, replicas_of
from webhook.core.policy.policy import Policy, parse_policy
from webhook.core.view.snapshot import Snapshot

# Every pod is ready since f.T0: the webhook's clock (now) and plan's agree on every rank.
NOW = parse_time_ns("2026-02-01T00:00:00Z")
HPA = reviews.HPA["username"]
NODES = [f.node("inf-1", "inference"), f.node("inf-2", "inference"), f.node("hyb-1", "hybrid"),
         f.node("hyb-2", "hybrid"), f.node("plain-1")]
POOLS = [{"name": "inference", "deletionCost": 1000, "protected": True},
         {"name": "hybrid", "deletionCost": -100}]
OLD_IMAGE = "example/serve:0"
LWS_GROUP = "leaderworkerset.x-k8s.io"

node_names = st.sampled_from([n["metadata"]["name"] for n in NODES])
costs = st.sampled_from([None, "-100", "0", "1000", "5000"])
placed = st.tuples(node_names, costs)


@st.composite
def policies(draw: st.DrawFn) -> Policy:
    minimum = draw(st.sampled_from([0, 1, 2, 3, "25%", "34%", "50%", "67%", "100%"]))
    return parse_policy({"pools": POOLS, "scaleDown": {
        "protectedLast": draw(st.booleans()), "minProtectedReplicas": minimum}})


def _pods(rs: dict[str, Any], prefix: str, placements: list[tuple[str, str | None]]
          ) -> list[dict[str, Any]]:
    return [f.pod(f"{prefix}-{i}", node_name=node, owner=rs, cost=cost)
            for i, (node, cost) in enumerate(placements)]


@st.composite
def replicaset_states(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Deployment with one ReplicaSet."""
    placements = draw(st.lists(placed, min_size=1, max_size=8))
    deployment = f.deployment("web", replicas=len(placements))
    rs = f.replicaset("web-1", owner=deployment, replicas=len(placements), pod_hash="1")
    return deployment, [deployment, rs, *_pods(rs, "web-1", placements)]


@st.composite
def rollout_states(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A Deployment mid-rollout: an old and a new ReplicaSet (maxSurge 1)."""
    old_pods = draw(st.lists(placed, min_size=1, max_size=4))
    new_pods = draw(st.lists(placed, min_size=1, max_size=4))
    total = len(old_pods) + len(new_pods)
    deployment = f.deployment("web", replicas=total, max_surge=1, max_unavailable=0)
    old = f.replicaset("web-old", replicas=len(old_pods), owner=deployment, image=OLD_IMAGE,
                       pod_hash="old", created="2026-01-01T00:00:00Z")
    new = f.replicaset("web-new", replicas=len(new_pods), owner=deployment, pod_hash="new",
                       created="2026-01-01T00:00:01Z")
    for rs in (old, new):
        f.annotate_rollout(rs, total, total + 1)
    return deployment, [deployment, old, new, *_pods(old, "old", old_pods),
                        *_pods(new, "new", new_pods)]


@st.composite
def lws_states(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A LeaderWorkerSet, at rest or mid-update (groups of the old revision)."""
    size = draw(st.integers(1, 3))
    groups = draw(st.lists(st.lists(node_names, min_size=size, max_size=size),
                           min_size=1, max_size=5))
    if not draw(st.booleans()):
        return lf.lws_state(groups)
    outdated = draw(st.lists(st.booleans(), min_size=len(groups), max_size=len(groups)))
    lws = lf.leader_worker_set("llm", replicas=len(groups), size=size)
    partition = draw(st.integers(0, len(groups) - 1))
    sts = lf.leader_statefulset(lws, replicas=len(groups), partition=partition)
    objects = [lws, sts]
    for index, nodes in enumerate(groups):
        revision = "old" if outdated[index] else lf.REVISION
        objects += lf.group(lws, sts, index, nodes, revision=revision, ready=True)
    return lws, objects


@st.composite
def statefulset_states(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A StatefulSet, OrderedReady (a pod not ready stalls it) or Parallel."""
    pods = draw(st.lists(st.tuples(node_names, st.booleans() | st.just(True)), min_size=1,
                         max_size=6))
    sts = f.statefulset("web", replicas=len(pods))
    sts["spec"]["podManagementPolicy"] = draw(st.sampled_from(["OrderedReady", "Parallel"]))
    return sts, [sts, *(f.pod(f"web-{i}", owner=sts, node_name=node, ready=ready)
                        for i, (node, ready) in enumerate(pods))]


states = st.one_of(replicaset_states(), rollout_states(), lws_states(), statefulset_states())
RESOURCES = {"Deployment": "deployments", "StatefulSet": "statefulsets"}


def _clamped_by_the_webhook(view: Snapshot, policy: Policy, workload: dict[str, Any],
                            current: int, to: int) -> int:
    """The count `/mutate-scale` writes for the HPA's scale from `current` to `to`."""
    holder = PolicyHolder(None)
    holder.policy = policy
    client = create_app(Runtime(holder, view)).test_client()
    if workload["kind"] == "LeaderWorkerSet":
        body = reviews.scale("leaderworkersets", "llm", current, to, user=reviews.HPA,
                             via="hpa", group=LWS_GROUP, version="v1")
    else:
        body = reviews.scale(RESOURCES[workload["kind"]], "web", current, to,
                             user=reviews.HPA, via="hpa")
    answer = client.post("/mutate-scale", json=body).get_json()["response"]
    assert answer["allowed"] is True
    if "patch" not in answer:
        return to
    (operation,) = json.loads(base64.b64decode(answer["patch"]))
    return operation["value"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=states, policy=policies(), data=st.data())
def test_safe_count_clamp_and_verdict_are_the_smallest_allowed_count(state, policy, data):
    workload, objects = state
    view = Snapshot([*objects, *NODES])
    current = replicas_of(workload)
    to = data.draw(st.integers(0, current - 1), label="to")
    docs = {n: plan_workload(view, policy, workload, n, NOW) for n in range(to, current)}
    assert all(doc["checked"] for doc in docs.values())
    allowed = [n for n, doc in docs.items() if not doc["violations"]]
    smallest = min(allowed, default=current)  # keeping the current count is no scale-down
    asked = docs[to]
    assert asked["safeReplicas"] == smallest
    # Never ALLOWED while the safe count lies above the target (and never the reverse).
    assert asked["allowed"] is (smallest == to)
    as_hpa = plan_workload(view, policy, workload, to, NOW, as_user=HPA)
    assert as_hpa["enforcement"] == "clamp"
    assert as_hpa["clampedTo"] == (None if smallest == to else smallest)
    assert _clamped_by_the_webhook(view, policy, workload, current, to) == smallest
