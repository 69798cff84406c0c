"""The e2e tier's own fake kubelet keeps to the pod versions it was asked about: a start
decided on an old event never overwrites a status written since (tests/e2e/fake_kubelet.py)."""

from __future__ import annotations

import copy
import json

from tests.e2e.fake_kubelet import MANUAL_LABEL, STRATEGIC, FakeKubelet, pod_status
from tests.e2e.harness import Environment
from tests.e2e.test_scenarios import bare_pod


def test_a_late_start_does_not_overwrite_a_newer_status(env: Environment) -> None:
    ns = env.new_namespace("fake-kubelet")
    pod = bare_pod("late", extra={})
    pod["metadata"]["labels"][MANUAL_LABEL] = "true"  # the running fake kubelet leaves it
    pod["spec"]["nodeName"] = "training-1"
    created = json.loads(env.kubectl("-n", ns, "create", "-o", "json", "-f", "-",
                                     stdin=json.dumps(pod), check=True).stdout)
    # Someone (here: the test, as a kubelet would) reports the pod Failed after that event.
    env.core.patch_namespaced_pod_status(
        "late", ns, {"status": pod_status(created, phase="Failed", ready=False)},
        _content_type=STRATEGIC)
    stale = copy.deepcopy(created)  # the event as a busy fake kubelet would handle it late
    del stale["metadata"]["labels"][MANUAL_LABEL]
    FakeKubelet(env.api, workers=1).start(stale)
    now = env.api_get(f"/api/v1/namespaces/{ns}/pods/late")
    assert now["status"]["phase"] == "Failed", now["status"]
    env.delete_namespace(ns)
