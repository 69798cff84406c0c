"""`plan` for a Rollout whose scale-down completes the canary's current step."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.core.argorollouts.test_canary_steps import SHORT_PAUSE, canary_objects
from tests.support import factories as f
from webhook.cli.main import main

POLICY = {"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                    {"name": "hybrid", "deletionCost": -100}]}


def plan(tmp_path: Path, capsys: pytest.CaptureFixture[str],
         steps: list[dict[str, Any]]) -> dict[str, Any]:
    objects, _ = canary_objects(steps, canary_ready=[True, False])
    state, policy = tmp_path / "state.yaml", tmp_path / "policy.yaml"
    state.write_text(yaml.safe_dump(f.kube_list(*objects)))
    policy.write_text(yaml.safe_dump(POLICY))
    code = main(["plan", "--state", str(state), "--policy", str(policy), "--workload",
                 "rollout/ml/web", "--replicas", "4", "--now", "2026-03-01T00:00:00Z",
                 "-o", "json"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return json.loads(out)


def test_the_stable_pods_the_following_steps_may_remove_are_possible_victims(tmp_path,
                                                                             capsys):
    doc = plan(tmp_path, capsys, SHORT_PAUSE)
    assert set(doc["possibleVictims"]) == {"s-3", "s-4", "s-5"}
    assert doc["allowed"] is False
    assert [v["rule"] for v in doc["violations"]] == ["protectedLast"]
    assert any("canary step 0 of Rollout web completes" in w for w in doc["warnings"])
    fates = {p["name"]: p["fate"] for p in doc["pods"]}
    assert fates["s-3"] == "possible-victim" and fates["c-0"] == "survives"


def test_an_indefinite_pause_next_leaves_the_stable_pods_surviving(tmp_path, capsys):
    doc = plan(tmp_path, capsys, [{"setWeight": 25}, {"pause": {}}, {"setWeight": 50}])
    assert doc["possibleVictims"] == [] and doc["allowed"] is True
