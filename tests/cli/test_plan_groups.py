"""`plan` outputs for a LeaderWorkerSet: its groups in text, JSON and HTML."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.support import factories as f
from tests.support import lws_factories as lf
from webhook.cli.plan_document import plan_document
from webhook.cli.plan_html import render_html
from webhook.cli.plan_text import render_text
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-03-15T12:00:00Z")
POLICY = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                                 {"name": "hybrid", "deletionCost": -100}]})
NODES = [f.node("inf-1", "inference"), f.node("hyb-1", "hybrid"), f.node("hyb-2", "hybrid")]


def document(layout: list[list[str]], to: int) -> dict[str, Any]:
    lws, objects = lf.lws_state(layout)
    view = Snapshot([*NODES, *objects])
    # through JSON, as `plan --output json` prints it
    return json.loads(json.dumps(plan_document(view, POLICY, assess_scale(
        view, POLICY, lws, to, NOW), NOW)))


def test_json_has_one_entry_per_group_with_its_pods_pools_and_fate():
    doc = document([["hyb-1", "hyb-2", "hyb-2"], ["hyb-1", "hyb-1", "hyb-2"],
                    ["hyb-2", "inf-1", "hyb-1"]], 2)
    assert doc["groups"] == [
        {"index": 2, "leader": "llm-2", "workers": ["llm-2-1", "llm-2-2"],
         "pools": ["hybrid", "inference"], "protected": True, "fate": "victim"},
        {"index": 1, "leader": "llm-1", "workers": ["llm-1-1", "llm-1-2"],
         "pools": ["hybrid"], "protected": False, "fate": "survives"},
        {"index": 0, "leader": "llm-0", "workers": ["llm-0-1", "llm-0-2"],
         "pools": ["hybrid"], "protected": False, "fate": "survives"},
    ]
    assert [v["name"] for v in doc["victims"]] == ["llm-2", "llm-2-1", "llm-2-2"]
    assert doc["victims"][1]["reason"] == (
        "worker of group 2 at or above the new count 2 (garbage-collected with its leader's "
        "worker StatefulSet)")
    assert doc["victims"][0]["reason"] == "leader of group 2 at or above the new count 2"
    assert {p["name"]: p["group"] for p in doc["pods"]}["llm-1-2"] == 1
    assert doc["order"][:3] == ["llm-2", "llm-2-1", "llm-2-2"]
    assert not doc["allowed"] and doc["safeReplicas"] == 3
    fix = doc["violations"][0]["message"].partition("; fix: ")[2]
    assert "deletion cost" not in fix and "kubectl delete pod -n ml llm-2)" in fix
    assert doc["violations"][0]["fixes"][0].startswith("delete the leader pod of group 2 ")


def test_other_kinds_have_no_groups_key():
    rs = f.replicaset("web", replicas=1)
    view = Snapshot([rs, *NODES, f.pod("web-0", owner=rs, node_name="hyb-1")])
    doc = plan_document(view, POLICY, assess_scale(view, POLICY, rs, 0, NOW), NOW)
    assert "groups" not in doc and "group" not in doc["pods"][0]


def test_text_shows_the_groups_table():
    text = render_text(document([["hyb-1", "hyb-2"], ["inf-1", "hyb-1"]], 1))
    lines = text.splitlines()
    start = lines.index("Groups (whole groups go, highest index first):")
    assert [line.split() for line in lines[start + 1:start + 4]] == [
        ["GROUP", "FATE", "LEADER", "WORKERS", "POOLS"],
        ["1", "victim", "llm-1", "1", "inference,", "hybrid", "(protected)"],
        ["0", "survives", "llm-0", "1", "hybrid"],
    ]
    assert "Verdict: DENIED" in text


def test_html_shows_the_groups_and_each_pods_group_without_costs():
    html = render_html(document([["hyb-1", "hyb-2"], ["inf-1", "hyb-1"]], 1))
    assert '<table id="groups">' in html
    assert re.search(r'<tr data-group="1" data-fate="victim"><td>1</td><td>victim</td>'
                     r"<td>llm-1</td><td>llm-1-1</td><td>inference, hybrid \(protected\)</td>",
                     html)
    chip = re.search(r'<span class="pod victim" data-pod="llm-1-1".*?</span></span>', html)
    assert chip and "[group 1]" in chip.group(0) and "cost" not in chip.group(0)
    assert "goes once the groups in the new range are ready" in html


def test_surge_groups_the_controller_keeps_are_blocked_in_json_and_text():
    # to 1 with maxSurge 1, maxUnavailable 0: group 0 is not ready, so 1 + 1 groups stay
    lws = lf.leader_worker_set("llm", replicas=3, size=2, max_surge=1, max_unavailable=0)
    sts = lf.leader_statefulset(lws)
    objects = [lws, sts, *lf.group(lws, sts, 0, ["hyb-1", "hyb-1"], ready=False),
               *lf.group(lws, sts, 1, ["hyb-1", "hyb-2"], ready=False),
               *lf.group(lws, sts, 2, ["inf-1", "hyb-2"])]
    view = Snapshot([*NODES, *objects])
    doc = plan_document(view, POLICY, assess_scale(view, POLICY, lws, 1, NOW), NOW)
    assert [(g["index"], g["fate"]) for g in doc["groups"]] == [
        (2, "victim"), (1, "blocked"), (0, "survives")]
    assert [(b["name"], b["waitingOn"]) for b in doc["blocked"]] == [
        ("llm-1", "llm-0"), ("llm-1-1", "llm-0")]
    assert "not ready and updated" in doc["blocked"][0]["reason"]
    text = render_text(doc)
    assert "Blocked (deleted only once the controller stops waiting): llm-1 waits on llm-0" in text


def test_groups_a_rolling_update_may_recreate_are_possible_victims_in_json_and_text():
    # mid-update (partition 1, no surge): 2 -> 1 removes group 1; the update then goes
    # on and may recreate group 0, of the old revision
    lws = lf.leader_worker_set("llm", replicas=2, size=2)
    sts = lf.leader_statefulset(lws, partition=1)
    objects = [lws, sts, *lf.group(lws, sts, 0, ["inf-1", "hyb-1"], revision="old"),
               *lf.group(lws, sts, 1, ["hyb-2", "hyb-2"], revision="old")]
    view = Snapshot([*NODES, *objects])
    doc = json.loads(json.dumps(plan_document(view, POLICY, assess_scale(
        view, POLICY, lws, 1, NOW), NOW)))
    assert [(g["index"], g["fate"]) for g in doc["groups"]] == [
        (1, "victim"), (0, "possible-victim")]
    assert doc["possibleVictims"] == ["llm-0", "llm-0-1"]
    fate = {p["name"]: (p["fate"], p["reason"]) for p in doc["pods"]}
    assert fate["llm-0-1"][0] == "possible-victim"
    assert "rolling update under way may delete and recreate it" in fate["llm-0-1"][1]
    assert doc["victims"][0]["name"] == "llm-1" and not doc["blocked"]
    text = render_text(doc)
    assert ("Might be deleted depending on how far the rolling update under way gets "
            "(it recreates outdated groups): llm-0, llm-0-1") in text


def test_surge_groups_the_rollout_partition_holds_survive_in_json_and_text():
    # partition 1, maxSurge 1, maxUnavailable 0 mid-update (3 groups and the surge group
    # 3): group 0 keeps its old revision while the partition holds, so after 3 -> 1 the
    # controller keeps 1 + 1 groups for good: groups 3 and 2 go, and the inference
    # group 1 is not reported as going later
    lws = lf.leader_worker_set("llm", replicas=3, size=2, max_surge=1, max_unavailable=0,
                               partition=1)
    sts = lf.leader_statefulset(lws, replicas=4, partition=1)
    objects = [lws, sts, *lf.group(lws, sts, 0, ["hyb-1", "hyb-1"], revision="old"),
               *lf.group(lws, sts, 1, ["inf-1", "inf-1"]),
               *lf.group(lws, sts, 2, ["hyb-2", "hyb-2"]),
               *lf.group(lws, sts, 3, ["hyb-2", "hyb-1"])]
    view = Snapshot([*NODES, *objects])
    doc = json.loads(json.dumps(plan_document(view, POLICY, assess_scale(
        view, POLICY, lws, 1, NOW), NOW)))
    assert [(g["index"], g["fate"]) for g in doc["groups"]] == [
        (3, "victim"), (2, "victim"), (1, "survives"), (0, "survives")]
    assert not doc["blocked"] and doc["allowed"] and doc["safeReplicas"] == 1
    assert any("partition holds group 0 at an old revision" in w and "surge group 1" in w
               for w in doc["warnings"])
    assert "Verdict: ALLOWED" in render_text(doc)
