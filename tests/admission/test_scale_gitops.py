"""A GitOps controller's scale-down over real HTTPS: answered by `scaleDown.gitOps`.

Argo CD and Flux re-apply the replica count in Git on every sync, as an UPDATE of the
workload (not of `/scale`). Denied, the same write comes back on the next sync. Listed
in `scaleDown.gitOps.users`, their unsafe scale-down of the example's ml/llm-serve from 6
to 3 is allowed with warnings (`warn`, the default) or lowered to the safe 4 (`clamp`),
while a person's identical write is still denied.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import reviews
from tests.support.serving import admission_response as post
from tests.support.serving import patched, running_server, verifying_session
from webhook.cluster.state import EXAMPLE_POLICY, EXAMPLE_STATE

ARGOCD = {"username": "system:serviceaccount:argocd:argocd-application-controller",
          "groups": ["system:serviceaccounts", "system:serviceaccounts:argocd",
                     "system:authenticated"]}
FLUX = {"username": "system:serviceaccount:flux-system:kustomize-controller",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:flux-system",
                   "system:authenticated"]}
STATE = yaml.safe_load(EXAMPLE_STATE.read_text())


@contextmanager
def serve_with_git_ops(directory: Path, enforcement: str) -> Iterator[tuple[str, Any]]:
    """`serve` on the bundled example, Argo CD and Flux listed with this enforcement;
    yields (enforcement, (url, session))."""
    policy = yaml.safe_load(EXAMPLE_POLICY.read_text())
    policy["scaleDown"]["gitOps"] = {"users": [ARGOCD["username"], FLUX["username"]],
                                     "enforcement": enforcement}
    (directory / "policy.yaml").write_text(yaml.safe_dump(policy))
    with running_server(directory, "--state", str(EXAMPLE_STATE), "--policy",
                        str(directory / "policy.yaml")) as (url, ca, _process):
        yield enforcement, (url, verifying_session(ca))


SERVER = serve_with_git_ops  # the `server` fixture (conftest.py), once per enforcement
pytestmark = pytest.mark.parametrize("server", ["warn", "clamp"], indirect=True, scope="module")


def sync(user: dict) -> tuple[dict, dict]:
    """The review of a sync that applies spec.replicas 3 to ml/llm-serve (6 now)."""
    old = next(o for o in STATE["items"]
               if o["kind"] == "Deployment" and o["metadata"]["name"] == "llm-serve")
    new = copy.deepcopy(old)
    new["spec"]["replicas"] = 3
    return reviews.workload_update(old, new, user=user), new


@pytest.mark.parametrize("user", [ARGOCD, FLUX], ids=["argocd", "flux"])
def test_a_git_ops_sync_is_never_denied(server, user):
    mode, endpoint = server
    body, new = sync(user)
    mutated = post(endpoint, "/mutate-scale", body)
    if mode == "warn":
        assert mutated == {"uid": mutated["uid"], "allowed": True}  # unchanged
        answer = post(endpoint, "/validate-scale", body)
        assert answer["allowed"] is True
        assert answer["auditAnnotations"]["verdict"] == "violation-warn"
        assert answer["warnings"][0] == ("poolguard: scaling Deployment ml/llm-serve from 6 to "
                                         "3 breaks the policy (enforcement: warn)")
        assert any(w.startswith("poolguard fix: ") for w in answer["warnings"])
        return
    deployment = patched(mutated, new)
    assert deployment["spec"]["replicas"] == 4
    assert mutated["warnings"][0].startswith(
        "poolguard: scaled Deployment ml/llm-serve from 6 to 4 replicas, not the 3 asked")
    chained = copy.deepcopy(body)
    chained["request"]["object"] = deployment
    answer = post(endpoint, "/validate-scale", chained)
    assert answer["allowed"] is True and answer["auditAnnotations"]["verdict"] == "allowed"


def test_a_persons_same_write_is_still_denied(server):
    _, endpoint = server
    body, _ = sync(reviews.ADMIN)
    assert post(endpoint, "/mutate-scale", body) == {"uid": body["request"]["uid"],
                                                     "allowed": True}
    denied = post(endpoint, "/validate-scale", body)
    assert denied["allowed"] is False and denied["status"]["code"] == 403
