"""`plan` says to a requester what the webhooks answer it, in every form it takes.

The single plan, the audit of every workload and its footer give one answer per request:
an exempt user is allowed whatever the verdict, only an autoscaler is told about clamps,
and a plan names only the exempt users who may scale its kind.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.custom_kinds import custom_kinds_state
from webhook.cli.main import main
from webhook.core.kinds.registry import DEPLOYMENT_CONTROLLER, KINDS

NOW = "2026-11-22T12:00:00Z"
# One workload of every kind in the state below, by kind.
EXAMPLES = {"Deployment": "deploy/ml/llm-serve", "ReplicaSet": "rs/ml/gpu-probe",
            "StatefulSet": "sts/ml/kv-cache", "LeaderWorkerSet": "lws/ml/llm",
            "Rollout": "ro/ml/canary", "CloneSet": "clone/ml/llm-clone"}


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return custom_kinds_state(tmp_path)


def plan(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(["plan", "--now", NOW, *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_an_exempt_users_audit_says_what_its_single_plans_say(state, capsys):
    audit = plan(capsys, "--state", str(state), "--all-workloads", "--replicas-delta", "-1",
                 "--as", DEPLOYMENT_CONTROLLER)
    rows = re.findall(r"^(\w+) (\S+)/(\S+) +\d+ -> (\d+) +([A-Z ]+?)(?:  |$)", audit, re.M)
    assert len(rows) >= 4
    for kind, namespace, name, target, word in rows:
        single = plan(capsys, "--state", str(state), "--workload", f"{kind}/{namespace}/{name}",
                      "--replicas", target, "--as", DEPLOYMENT_CONTROLLER)
        assert "\nVerdict: ALLOWED\n" in single
        assert word == "ALLOWED", audit
    assert "VIOLATES" not in audit
    assert re.search(r"workloads: 0 denied, 0 allowed despite violations, \d+ allowed", audit)


def test_an_audit_speaks_of_clamps_only_to_an_autoscaler(state, capsys):
    person = plan(capsys, "--state", str(state), "--all-workloads", "--replicas-delta", "-1",
                  "--as", "alice")
    assert "clamped" not in person.lower() and "held above" not in person
    hpa = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
    autoscaler = plan(capsys, "--state", str(state), "--all-workloads", "--replicas-delta",
                      "-1", "--as", hpa)
    assert re.search(rf"\nAs {hpa}: \d+ held above their target", autoscaler)


def test_every_kind_has_an_example_here():
    assert set(EXAMPLES) == {kind.kind for kind in KINDS}


@pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
def test_a_plan_names_the_deployment_controller_only_for_its_kinds(state, capsys, kind):
    text = plan(capsys, "--state", str(state), "--workload", EXAMPLES[kind.kind],
                "--replicas", "0")
    named = "scaleDown.exemptUsers (system:serviceaccount:kube-system:deployment-controller)"
    # The Deployment controller writes Deployments' ReplicaSets, never the other kinds.
    assert (named in text) == (kind.kind in ("Deployment", "ReplicaSet"))
