"""The binding webhook ranks a pod of a consolidating pool from the cached pods on its node.

The Binding's patch is applied as the API server applies it (JSON Patch, then the
Binding's annotations copied onto the pod with spec.nodeName); the pod then carries the
cost the reconciler would want for it in that state: no write is left for the reconciler.
"""

from __future__ import annotations

import base64
import json

import jsonpatch
import pytest

from tests.support import factories as f
from tests.support import reviews
from tests.support.gpu_clusters import gpu_node, gpu_pod
from tests.support.policies import flat_policy
from webhook.admission.app import respond
from webhook.admission.handlers import Context, review_binding
from webhook.admission.review import parse_review
from webhook.core.objects.deletion_cost import DELETION_COST_ANNOTATION
from webhook.core.policy.policy import default_policy
from webhook.core.view.snapshot import Snapshot
from webhook.reconciler.preview import preview

RS = f.replicaset("serve-abc", replicas=4)
JOB = {"apiVersion": "batch/v1", "kind": "Job",
       "metadata": {"name": "train", "namespace": "ml", "uid": f.uid_for("job")},
       "spec": {"selector": {"matchLabels": {"job": "train"}}}}


def objects() -> list[dict]:
    pending = gpu_pod("serve-new", "hyb-1", 2, RS, 5)
    del pending["spec"]["nodeName"]
    pending["status"] = {"phase": "Pending"}
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}},
            gpu_node("hyb-1", "hybrid"), gpu_node("hyb-2", "hybrid"),
            gpu_pod("serve-0", "hyb-1", 2, RS, 1), gpu_pod("serve-1", "hyb-1", 2, RS, 2),
            gpu_pod("train-0", "hyb-2", 4, JOB, 0), pending]


def bound(node: str, policy) -> tuple[dict, int]:
    """(the pod as bound, the cost the reconciler wants for it once bound)."""
    state = objects()
    view = Snapshot(state)
    ctx = Context(policy=policy, view=view, now_ns=lambda: 0)
    request = parse_review(reviews.binding("serve-new", node))
    answer = respond("/mutate-bindings", review_binding, request, ctx)
    binding = jsonpatch.apply_patch(request["object"], json.loads(
        base64.b64decode(answer["patch"])))
    pod = view.pod("ml", "serve-new")
    pod["metadata"]["annotations"] = binding["metadata"]["annotations"]
    pod["spec"]["nodeName"] = node
    wanted = {e["name"]: e["desiredCost"]
              for e in preview(Snapshot(state), policy, ())["pods"]}["serve-new"]
    return pod, wanted


@pytest.mark.parametrize("node", ["hyb-1", "hyb-2"])
def test_a_bound_pod_carries_the_rank_the_reconciler_wants(node: str) -> None:
    pod, wanted = bound(node, default_policy())
    cost = int(pod["metadata"]["annotations"][DELETION_COST_ANNOTATION])
    assert cost == wanted
    band = default_policy().pool_by_name("hybrid").band
    assert band.low <= cost < -100  # a rank inside the band, not the band's top


def test_ranks_tell_a_freeable_node_from_one_training_holds() -> None:
    alone, _ = bound("hyb-1", default_policy())  # serve's pods only
    shared, _ = bound("hyb-2", default_policy())  # the training pod is there too
    assert (int(alone["metadata"]["annotations"][DELETION_COST_ANNOTATION])
            < int(shared["metadata"]["annotations"][DELETION_COST_ANNOTATION]))


def test_a_flat_policy_binds_the_pool_cost() -> None:
    pod, wanted = bound("hyb-1", flat_policy())
    assert pod["metadata"]["annotations"][DELETION_COST_ANNOTATION] == "-100" == str(wanted)
