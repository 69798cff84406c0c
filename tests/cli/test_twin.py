"""`plan` and the scale webhooks are twins, end to end: the same state and policy, the
same answer.

Both reach the decision through one core function (`answer_scale`), whose agreement with
`plan` over the whole scale matrix is tests/core/scale/test_answer.py. Here the webhook is
started as `serve --state --policy` and asked over HTTPS, `plan` is run as its command line,
and a few cases of each path (the scale subresource and a workload's own UPDATE, judged,
out of scope, clamped and held) must agree: the wiring around the one decision.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import re
import time
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import requests
import yaml

from tests.support import factories as f
from tests.support import reviews
from tests.support.scale_matrix import KIND, POLICIES, POOLS, STATE
from tests.support.serving import running_server
from webhook.admission.handlers import Context, review_scale
from webhook.admission.review import parse_review
from webhook.cli.main import main as cli_main
from webhook.cluster.state import load_policy, load_state

ARGOCD = "system:serviceaccount:argocd:argocd-application-controller"
# (resource, namespace, name, current replicas, target): denied, allowed, out of scope
# (its own label, its namespace's), a ReplicaSet and a StatefulSet.
WIRED = [("deployments", "ml", "uncosted", 3, 2), ("deployments", "ml", "costed", 4, 3),
         ("deployments", "ml", "labelled-skip", 3, 2),
         ("deployments", "frozen", "frozen-app", 3, 2),
         ("replicasets", "ml", "solo", 3, 1), ("statefulsets", "ml", "kv", 3, 1)]
# The HPA's scales: clamped to 3 and held at 3 (both unsafe), and one already safe.
CLAMPED = [("deployments", "ml", "clampable", 4, 1), ("deployments", "ml", "hand-set", 3, 2),
           ("deployments", "ml", "costed", 4, 3)]


def plan_json(state: Path, policy: Path, workload: str, replicas: int,
              *extra: str) -> dict[str, Any]:
    """`python -m webhook plan ... --output json`, run in this process."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli_main(["plan", "--state", str(state), "--policy", str(policy), "--workload",
                         workload, "--replicas", str(replicas), "--output", "json", *extra])
    assert code == 0
    return json.loads(out.getvalue())


def plan_outcome(doc: dict[str, Any]) -> tuple[bool, set[str], str]:
    rules = {v["rule"] for v in doc["violations"]}
    if not rules:
        verdict = "allowed"
    else:
        verdict = "denied" if not doc["allowed"] else f"violation-{doc['enforcement']}"
    return doc["allowed"], rules, verdict


def webhook_outcome(answer: dict[str, Any]) -> tuple[bool, set[str], str]:
    audit = answer.get("auditAnnotations") or {}  # none when the workload is out of scope
    rules = set(filter(None, audit.get("rules", "").split(",")))
    return answer["allowed"], rules, audit.get("verdict", "allowed")


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("twin")
    state = directory / "state.yaml"
    state.write_text(yaml.safe_dump(f.kube_list(*STATE)))
    paths = {"state": state}
    for name, extra in POLICIES.items():
        paths[name] = directory / f"{name}.yaml"
        paths[name].write_text(yaml.safe_dump({"pools": POOLS, **extra}))
    # The end-to-end twin's: enforce, and a GitOps controller under clamp.
    paths["wired"] = directory / "wired.yaml"
    paths["wired"].write_text(yaml.safe_dump({"pools": POOLS, "scaleDown": {
        "gitOps": {"users": [ARGOCD], "enforcement": "clamp"}}}))
    return paths


def test_plan_and_the_webhooks_agree_end_to_end(files, tmp_path):
    seen: set[str] = set()
    with running_server(tmp_path / "serve", "--state", str(files["state"]), "--policy",
                        str(files["wired"]), workers=1) as (url, ca, _):
        session = requests.Session()
        session.verify, session.trust_env = str(ca), False
        for resource, ns, name, current, target in WIRED:
            answer = _chained(session, url, reviews.scale(resource, name, current, target,
                                                          namespace=ns))
            doc = plan_json(files["state"], files["wired"], f"{KIND[resource]}/{ns}/{name}",
                            target)
            assert webhook_outcome(answer) == plan_outcome(doc), f"{resource} {ns}/{name}"
            seen.add(plan_outcome(doc)[2] if doc["checked"] else "not-checked")
        for resource, ns, name, current, target in CLAMPED:
            review = reviews.scale(resource, name, current, target, namespace=ns,
                                   user=reviews.HPA)
            answer = _chained(session, url, review)
            effective = review["request"]["object"]["spec"]["replicas"]
            doc = plan_json(files["state"], files["wired"], f"{KIND[resource]}/{ns}/{name}",
                            target, "--as", reviews.HPA["username"])
            assert doc["clampedTo"] == (None if effective == target else effective), name
            assert doc["allowed"] is answer["allowed"] is True, name
            seen.add("allowed" if doc["clampedTo"] is None else
                     "held" if effective == current else "lowered")
        # A GitOps sync writes the workload itself: clamped through its own UPDATE.
        review = _sync_review("deployments", "ml", "clampable", 1)
        answer = _chained(session, url, review)
        doc = plan_json(files["state"], files["wired"], "deploy/ml/clampable", 1, "--as",
                        ARGOCD)
        assert doc["clampedTo"] == review["request"]["object"]["spec"]["replicas"] == 3
        assert doc["allowed"] is answer["allowed"] is True
        session.close()  # an idle keep-alive connection would slow the server's exit
    assert seen == {"allowed", "denied", "not-checked", "held", "lowered"}


def test_out_of_scope_reasons_name_the_selector_or_label(files):
    cases = {
        ("enforce", "deploy/ml/labelled-skip"): "Deployment ml/labelled-skip is labelled "
                                                "poolguard.dev/skip=true",
        ("enforce", "deploy/ml/template-skip"): "the pod template of Deployment "
                                                "ml/template-skip is labelled",
        ("enforce", "deploy/frozen/frozen-app"): "namespace frozen is labelled",
        ("selectors-integer", "deploy/batch/trainer"): "not selected by the policy's "
                                                        "namespaceSelector",
        ("selectors-integer", "deploy/ml/costed"): None,  # selected by both
    }
    for (policy_name, workload), reason in cases.items():
        doc = plan_json(files["state"], files[policy_name], workload, 2)
        if reason is None:
            assert doc["checked"] is True and doc["notCheckedBecause"] is None
            continue
        assert doc["checked"] is False and doc["allowed"] is True and doc["violations"] == []
        assert reason in doc["notCheckedBecause"]
        assert len(doc["victims"]) == 1  # the preview still shows what would go


def test_plan_says_it_cannot_know_the_user(files):
    doc = plan_json(files["state"], files["enforce"], "deploy/ml/uncosted", 2)
    assert doc["allowed"] is False
    assert doc["exemptUsers"] == ["system:serviceaccount:kube-system:deployment-controller"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        cli_main(["plan", "--state", str(files["state"]), "--policy", str(files["enforce"]),
                  "--workload", "deploy/ml/uncosted", "--replicas", "2"])
    assert ("unknown to plan: who scales; the webhook does not check requests by "
            "scaleDown.exemptUsers (system:serviceaccount:kube-system:deployment-controller)"
            ) in out.getvalue()


def test_a_rollout_fix_points_the_webhook_user_to_plan(files):
    # The webhook answers inside the API server's timeout: for a rollout it leaves the
    # safe count (a dozen re-predictions) to plan, whose verdict is the same.
    view = load_state(files["state"])
    policy = load_policy(files["enforce"])
    review = parse_review(reviews.scale("deployments", "rolling", 5, 2))
    answer = review_scale(review, Context(policy, view, time.time_ns)).response
    assert answer["allowed"] is False
    assert ("fix: scale to the smallest replica count above 2 that breaks no rule, which "
            "'python -m webhook plan --workload deployment/ml/rolling --replicas 2' "
            "names") in answer["status"]["message"]
    doc = plan_json(files["state"], files["enforce"], "deploy/ml/rolling", 2)
    assert doc["allowed"] is False and doc["safeReplicas"] == 4
    assert "fix: scale to 4 replicas for now" in doc["violations"][0]["message"]


def _mutated_replicas(answer: dict[str, Any], scale: dict[str, Any]) -> int:
    if "patch" not in answer:
        return scale["spec"]["replicas"]
    ops = json.loads(base64.b64decode(answer["patch"]))
    return jsonpatch.apply_patch(scale, ops)["spec"]["replicas"]


def _chained(session: requests.Session, url: str,
             review: dict[str, Any]) -> dict[str, Any]:
    """The validating answer to `review` after the mutating one, chained as the API server
    chains them: `review` is left with the replicas the clamp let through."""
    mutated = session.post(url + "/mutate-scale", json=review, timeout=10).json()["response"]
    review["request"]["object"]["spec"]["replicas"] = _mutated_replicas(
        mutated, review["request"]["object"])
    answer = session.post(url + "/validate-scale", json=review, timeout=10).json()["response"]
    return answer


def test_plan_as_the_hpa_says_clamped_in_text_json_html_and_the_audit(files, tmp_path):
    hpa = reviews.HPA["username"]
    base = ["plan", "--state", str(files["state"]), "--policy", str(files["enforce"])]

    def run(*args: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli_main([*base, *args]) == 0
        return out.getvalue()

    doc = plan_json(files["state"], files["enforce"], "deploy/ml/clampable", 1, "--as", hpa)
    assert (doc["clampedTo"], doc["allowed"], doc["requester"]) == (3, True, hpa)
    text = run("--workload", "deploy/ml/clampable", "--replicas", "1", "--as", hpa)
    assert "Verdict: CLAMPED to 3\n" in text
    assert (f"  as {hpa}: scaled Deployment ml/clampable from 4 to 3 replicas, "
            "not the 1 asked") in text
    assert doc["requesterGroup"] == "autoscalers"
    # The enforcement that judged the HPA is its group's (clamp), not scaleDown's enforce.
    assert doc["enforcement"] == "clamp"
    assert f"  as {hpa}: scaled" in text
    person = run("--workload", "deploy/ml/clampable", "--replicas", "1", "--as", "alice")
    assert "Verdict: DENIED (enforcement: enforce)" in person
    assert ("  as alice: listed in no requester group: judged as a person "
            "(scaleDown.enforcement: enforce)\n") in person
    assert plan_json(files["state"], files["enforce"], "deploy/ml/clampable", 1, "--as",
                     "alice")["requesterGroup"] is None
    page = tmp_path / "plan.html"
    run("--workload", "deploy/ml/clampable", "--replicas", "1", "--as", hpa, "-o", "html",
        str(page))
    assert '<div class="verdict">CLAMPED to 3</div>' in page.read_text()
    audit = run("--all-workloads", "--replicas-delta", "-3", "--as", hpa)
    assert re.search(r"\nDeployment ml/clampable +4 -> 1 +CLAMPED +held at 3 replicas, above "
                     r"the target 1 \(protectedLast\)\n", audit)
    assert re.search(rf"\nAs {hpa}: [1-9][0-9]* held above their target", audit)
    assert "CLAMPED" not in run("--all-workloads", "--replicas-delta", "-3")


def _sync_review(resource: str, ns: str, name: str, target: int) -> dict[str, Any]:
    """A GitOps sync's write: an UPDATE of the workload with Git's spec.replicas."""
    kind = {"deployments": "Deployment", "replicasets": "ReplicaSet",
            "statefulsets": "StatefulSet"}[resource]
    old = next(o for o in STATE if o["kind"] == kind and o["metadata"]["name"] == name
               and o["metadata"]["namespace"] == ns)
    new = json.loads(json.dumps(old))
    new["spec"]["replicas"] = target
    return reviews.workload_update(old, new, user={"username": ARGOCD})


def test_plan_as_a_git_ops_controller_under_warn_says_how_it_is_judged(files, tmp_path):
    policy = tmp_path / "gitops.yaml"
    policy.write_text(yaml.safe_dump({"pools": POOLS, "scaleDown": {
        "gitOps": {"users": [ARGOCD], "enforcement": "warn"}}}))
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        cli_main(["plan", "--state", str(files["state"]), "--policy", str(policy),
                  "--workload", "deploy/ml/uncosted", "--replicas", "2", "--as", ARGOCD])
    assert "Verdict: ALLOWED despite violations (enforcement: warn)" in text.getvalue()
    assert (f"  as {ARGOCD}: listed in scaleDown.gitOps: judged with its enforcement "
            "(warn)\n") in text.getvalue()
    doc = plan_json(files["state"], policy, "deploy/ml/uncosted", 2, "--as", ARGOCD)
    assert (doc["requesterGroup"], doc["enforcement"]) == ("gitOps", "warn")
