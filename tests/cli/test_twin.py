"""`plan` and `/validate-scale` are twins: the same state and policy, the same verdict.

For a matrix of policies (the three enforcement modes, namespace and pod selectors,
integer and percentage minimums) and workloads (Deployments steady and mid-rollout,
a ReplicaSet, a StatefulSet, the skip label on a workload, its template and its
namespace), the webhook is started as `serve --state --policy` and asked over HTTPS,
`plan` is run as its command line, and both must agree on `allowed`, the rules
violated, and warn versus deny.
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
from tests.support.serving import running_server
from webhook.admission.handlers import Context, review_scale
from webhook.admission.review import parse_review
from webhook.cli.main import main as cli_main
from webhook.cluster.state import load_policy, load_state
from webhook.core.deployment.deployment_util import MAX_REPLICAS_ANNOTATION

SKIP = {"poolguard.dev/skip": "true"}
POOLS = [{"name": "inference", "deletionCost": 1000, "protected": True},
         {"name": "hybrid", "deletionCost": -100}]
POLICIES: dict[str, dict[str, Any]] = {  # each rule, mode, selector and minimum somewhere
    "enforce": {},
    "warn-percent": {"scaleDown": {"enforcement": "warn", "protectedLast": False,
                                   "minProtectedReplicas": "50%"}},
    "dryrun": {"scaleDown": {"enforcement": "dryrun"}},
    "selectors-integer": {
        "namespaceSelector": {"matchLabels": {"team": "ml"}},
        "podSelector": {"matchExpressions": [{"key": "tier", "operator": "In",
                                              "values": ["online"]}]},
        "scaleDown": {"minProtectedReplicas": 2}},
}


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name,
                                                  **labels}}}


def steady(name: str, ns: str, placements: list[tuple[str, str | None]], *,
           labels: dict[str, str] | None = None,
           template_labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A Deployment with one ReplicaSet and pods on (node, cost) placements."""
    deployment = f.deployment(name, ns, replicas=len(placements))
    deployment["spec"]["template"]["metadata"]["labels"].update(
        {"tier": "online", **(template_labels or {})})
    if labels:
        deployment["metadata"]["labels"] = labels
    rs = f.replicaset(f"{name}-1", ns, replicas=len(placements), owner=deployment,
                      pod_hash="1")
    rs["spec"]["template"] = deployment["spec"]["template"]
    pods = [f.pod(f"{name}-1-{i}", ns, node, owner=rs, cost=cost,
                  labels=deployment["spec"]["template"]["metadata"]["labels"],
                  ready_time=f"2026-01-01T00:00:{i:02d}Z")
            for i, (node, cost) in enumerate(placements)]
    return [deployment, rs, *pods]


def rolling() -> list[dict[str, Any]]:
    """Mid-rollout, no costs yet: some sync order removes a protected pod (test_rollout)."""
    deployment = f.deployment("rolling", "ml", replicas=5, max_surge=0, max_unavailable=1)
    deployment["spec"]["template"]["metadata"]["labels"]["tier"] = "online"
    objects: list[dict[str, Any]] = [deployment]
    for rs_name, nodes, image, created in (
            ("rolling-old", ["inf-1", "hyb-1"], "example/serve:0", "2026-01-01T00:00:00Z"),
            ("rolling-new", ["inf-1", "hyb-1", "hyb-1"], "example/serve:1",
             "2026-01-02T00:00:00Z")):
        rs = f.replicaset(rs_name, "ml", replicas=len(nodes), owner=deployment, image=image,
                          pod_hash=rs_name, created=created,
                          annotations={MAX_REPLICAS_ANNOTATION: "5"})
        objects.append(rs)
        objects += [f.pod(f"{rs_name}-{i}", "ml", node, owner=rs, labels={"tier": "online"},
                          ready_time=f"2026-01-01T00:00:{i:02d}Z")
                    for i, node in enumerate(nodes)]
    return objects


def solo_replicaset() -> list[dict[str, Any]]:
    rs = f.replicaset("solo", "ml", replicas=3)
    rs["spec"]["template"]["metadata"]["labels"]["tier"] = "online"
    return [rs, *[f.pod(f"solo-{i}", "ml", node, owner=rs, labels={"tier": "online"})
                  for i, node in enumerate(["inf-1", "inf-1", "hyb-1"])]]


def statefulset() -> list[dict[str, Any]]:
    sts = f.statefulset("kv", "ml", replicas=3)
    sts["spec"]["template"]["metadata"]["labels"]["tier"] = "online"
    return [sts, *[f.pod(f"kv-{i}", "ml", node, owner=sts, labels={"tier": "online"})
                   for i, node in enumerate(["hyb-1", "inf-1", "inf-2"])]]


UNCOSTED = [("inf-1", None), ("inf-1", None), ("hyb-1", None)]  # rank 2 on inf-1 goes first
COSTED = [("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "-100"), ("hyb-2", "-100")]
HAND_SET = [("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "5000")]  # hybrid kept by hand
# below 3 an inference pod goes while the hand-set hybrid pod survives: an autoscaler's
# scale to 1 or 2 is clamped to 3
CLAMPABLE = [("hyb-1", "-100"), ("inf-1", "1000"), ("inf-2", "1000"), ("hyb-2", "5000")]
STATE = [
    namespace("ml", {"team": "ml"}), namespace("batch", {"team": "batch"}),
    namespace("frozen", SKIP),
    f.node("inf-1", "inference"), f.node("inf-2", "inference"), f.node("hyb-1", "hybrid"),
    f.node("hyb-2", "hybrid"),
    *steady("uncosted", "ml", UNCOSTED),
    *steady("costed", "ml", COSTED),
    *steady("hand-set", "ml", HAND_SET),
    *steady("clampable", "ml", CLAMPABLE),
    *steady("labelled-skip", "ml", UNCOSTED, labels=SKIP),
    *steady("template-skip", "ml", UNCOSTED, template_labels=SKIP),
    *steady("trainer", "batch", UNCOSTED, template_labels={"tier": "batch"}),
    *steady("frozen-app", "frozen", UNCOSTED),
    *rolling(), *solo_replicaset(), *statefulset(),
]
# (resource, namespace, name, current replicas, targets)
CASES = [
    ("deployments", "ml", "uncosted", 3, [2, 1, 0]),
    ("deployments", "ml", "costed", 4, [3, 2, 1]),
    ("deployments", "ml", "hand-set", 3, [2, 1]),
    ("deployments", "ml", "clampable", 4, [3, 2, 1]),
    ("deployments", "ml", "labelled-skip", 3, [2]),
    ("deployments", "ml", "template-skip", 3, [2]),
    ("deployments", "batch", "trainer", 3, [2]),
    ("deployments", "frozen", "frozen-app", 3, [2]),
    ("deployments", "ml", "rolling", 5, [4, 2]),
    ("replicasets", "ml", "solo", 3, [2, 1]),
    ("statefulsets", "ml", "kv", 3, [2, 1]),
]
KIND = {"deployments": "deploy", "replicasets": "rs", "statefulsets": "sts"}


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
    return paths


def test_plan_and_the_webhook_agree_over_the_matrix(files, tmp_path):
    seen_verdicts: set[str] = set()
    seen_rules: set[str] = set()
    for policy_name in POLICIES:
        with running_server(tmp_path / policy_name, "--state", str(files["state"]), "--policy",
                            str(files[policy_name]), workers=1) as (url, ca, _):
            session = requests.Session()
            session.verify, session.trust_env = str(ca), False
            _ask_every_case(session, url, files, policy_name, seen_verdicts, seen_rules)
            session.close()  # an idle keep-alive connection would slow the server's exit
    # The matrix is not trivially in agreement: every kind of answer occurs.
    assert seen_verdicts == {"allowed", "denied", "violation-warn", "violation-dryrun"}
    assert seen_rules == {"protectedLast", "minProtectedReplicas"}


def _ask_every_case(session: requests.Session, url: str, files: dict[str, Path],
                    policy_name: str, seen_verdicts: set[str], seen_rules: set[str]) -> None:
    for resource, ns, name, current, targets in CASES:
        for target in targets:
            review = reviews.scale(resource, name, current, target, namespace=ns)
            answer = session.post(url + "/validate-scale", json=review,
                                  timeout=10).json()["response"]
            doc = plan_json(files["state"], files[policy_name],
                            f"{KIND[resource]}/{ns}/{name}", target)
            where = f"policy {policy_name}, {resource} {ns}/{name} -> {target}"
            assert webhook_outcome(answer) == plan_outcome(doc), where
            seen_verdicts.add(plan_outcome(doc)[2])
            seen_rules |= plan_outcome(doc)[1]


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


def test_plan_as_a_requester_and_the_webhook_chain_agree_on_the_clamp(files, tmp_path):
    clamps: set[str] = set()
    with running_server(tmp_path / "clamp", "--state", str(files["state"]), "--policy",
                        str(files["enforce"]), workers=1) as (url, ca, _):
        session = requests.Session()
        session.verify, session.trust_env = str(ca), False
        for user in (reviews.HPA, reviews.ADMIN):
            for resource, ns, name, current, targets in CASES:
                for target in targets:
                    review = reviews.scale(resource, name, current, target, namespace=ns,
                                           user=user)
                    answer = _chained(session, url, review)
                    effective = review["request"]["object"]["spec"]["replicas"]
                    doc = plan_json(files["state"], files["enforce"],
                                    f"{KIND[resource]}/{ns}/{name}", target,
                                    "--as", user["username"])
                    where = f"{user['username']}: {resource} {ns}/{name} -> {target}"
                    assert doc["clampedTo"] == (None if effective == target else effective), where
                    assert doc["allowed"] is answer["allowed"], where
                    if doc["clampedTo"] is not None:
                        clamps.add("held" if effective == current else "lowered")
        session.close()
    assert clamps == {"held", "lowered"}  # both kinds of clamp occur


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


ARGOCD = "system:serviceaccount:argocd:argocd-application-controller"


def _sync_review(resource: str, ns: str, name: str, target: int) -> dict[str, Any]:
    """A GitOps sync's write: an UPDATE of the workload with Git's spec.replicas."""
    kind = {"deployments": "Deployment", "replicasets": "ReplicaSet",
            "statefulsets": "StatefulSet"}[resource]
    old = next(o for o in STATE if o["kind"] == kind and o["metadata"]["name"] == name
               and o["metadata"]["namespace"] == ns)
    new = json.loads(json.dumps(old))
    new["spec"]["replicas"] = target
    return reviews.workload_update(old, new, user={"username": ARGOCD})


@pytest.mark.parametrize("enforcement", ["warn", "clamp"])
def test_plan_as_a_git_ops_controller_and_the_webhook_chain_agree(files, tmp_path, enforcement):
    """`plan --as` the Argo CD controller says what the webhooks answer its sync: the same
    allowed, the same clamped count, the same rules warned about."""
    policy = tmp_path / "gitops.yaml"
    policy.write_text(yaml.safe_dump({"pools": POOLS, "scaleDown": {
        "gitOps": {"users": [ARGOCD], "enforcement": enforcement}}}))
    seen: set[str] = set()
    with running_server(tmp_path / "serve", "--state", str(files["state"]), "--policy",
                        str(policy), workers=1) as (url, ca, _):
        session = requests.Session()
        session.verify, session.trust_env = str(ca), False
        for resource, ns, name, _current, targets in CASES:
            for target in targets:
                review = _sync_review(resource, ns, name, target)
                answer = _chained(session, url, review)
                effective = review["request"]["object"]["spec"]["replicas"]
                doc = plan_json(files["state"], policy, f"{KIND[resource]}/{ns}/{name}",
                                target, "--as", ARGOCD)
                where = f"{enforcement}: {resource} {ns}/{name} -> {target}"
                assert answer["allowed"] is True and doc["allowed"] is True, where
                assert doc["clampedTo"] == (None if effective == target else effective), where
                if doc["clampedTo"] is None:
                    assert webhook_outcome(answer) == plan_outcome(doc), where
                seen.add("clamped" if doc["clampedTo"] is not None else plan_outcome(doc)[2])
        session.close()
    assert seen >= ({"violation-warn", "allowed"} if enforcement == "warn"
                    else {"clamped", "allowed"}), seen
    if enforcement == "warn":
        text = io.StringIO()
        with contextlib.redirect_stdout(text):
            cli_main(["plan", "--state", str(files["state"]), "--policy", str(policy),
                      "--workload", "deploy/ml/uncosted", "--replicas", "2", "--as", ARGOCD])
        assert "Verdict: ALLOWED despite violations (enforcement: warn)" in text.getvalue()
        assert (f"  as {ARGOCD}: listed in scaleDown.gitOps: judged with its enforcement "
                "(warn)\n") in text.getvalue()
        doc = plan_json(files["state"], policy, "deploy/ml/uncosted", 2, "--as", ARGOCD)
        assert (doc["requesterGroup"], doc["enforcement"]) == ("gitOps", "warn")
