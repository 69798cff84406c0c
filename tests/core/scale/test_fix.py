"""A violation's fix, per kind: something to do now, naming the pods, groups and numbers.

Each option is one thing a person or a controller can do now (scale to the safe count,
lower named pods' costs with the exact `kubectl annotate`, delete a named pod or group
leader so that its controller recreates it), or the plain statement that only waiting
helps, and for what. Each fits one warning of the API server (256 characters with the
`poolguard fix: ` prefix), so the webhook gives one option per warning.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.cli.test_twin import rolling
from tests.support import factories as f
from tests.support import lws_factories as lf
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
from webhook.core.scale.fix_facts import fitted, more
from webhook.core.scale.safe_replicas import assess_scale
from webhook.core.view.snapshot import Snapshot

NOW = parse_time_ns("2026-02-01T00:00:00Z")
NODES = [f.node("inf-1", "inference"), f.node("inf-2", "inference"),
         f.node("hyb-1", "hybrid"), f.node("hyb-2", "hybrid")]
POLICY = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                                 {"name": "hybrid", "deletionCost": -100}]})
ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
FIX_LENGTH = 256 - len("poolguard fix: ")  # one warning each


def fixes(objects: list[dict[str, Any]], workload: dict[str, Any], to: int,
          policy=POLICY) -> list[str]:
    verdict = assess_scale(Snapshot([*NODES, *objects]), policy, workload, to, NOW).verdict
    assert verdict.violations, "the case must break a rule"
    options = verdict.violations[0].fix.split("; or ")  # the options, as a denial joins them
    assert all(v.fix == verdict.violations[0].fix for v in verdict.violations)
    for option in options:  # one warning each, never cut by the API server
        assert len(option) <= FIX_LENGTH and "\n" not in option, option
    return options


def replicaset(placements: list[tuple[str, str | None]],
               overrides: dict[int, dict[str, Any]] | None = None):
    rs = f.replicaset("web", replicas=len(placements))
    pods = [f.pod(f"web-{i}", node_name=node, owner=rs, cost=cost,
                  **{"ready_time": f"2026-01-01T00:00:{i:02d}Z", **(overrides or {}).get(i, {})})
            for i, (node, cost) in enumerate(placements)]
    return [rs, *pods], rs


def test_a_replicaset_fix_names_the_pods_whose_cost_to_lower_and_the_command():
    # web-3 on hybrid kept a hand-set 5000: it survives while inference pods go
    objects, rs = replicaset([("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "-100"),
                              ("hyb-2", "5000")])
    assert fixes(objects, rs, 1) == [
        "scale to 3 replicas for now (the smallest count above 1 that breaks no rule)",
        "give the surviving pod outside protected pools a cost below 1000, then retry: "
        f"kubectl annotate pod -n ml web-3 {ANNOTATION}=-100 --overwrite"]


def test_many_pods_to_annotate_are_named_while_they_fit_and_counted_after():
    placements = [("inf-1", "1000"), ("inf-2", "1000")] + [("hyb-1", "5000")] * 12
    rs = f.replicaset("inference-server-with-a-long-name", replicas=len(placements))
    objects = [rs, *[f.pod(f"inference-server-with-a-long-name-{i:05d}", node_name=node,
                           owner=rs, cost=cost) for i, (node, cost) in enumerate(placements)]]
    (option,) = [o for o in fixes(objects, rs, 12) if "kubectl annotate" in o]
    assert "inference-server-with-a-long-name-00002 " in option
    assert option.endswith(" more: plan lists them)")


@pytest.mark.parametrize("count", [0, 1, 2, 10, 11, 5_000])
def test_as_many_names_as_fit_are_shown_whatever_their_number(count):
    # the same text as trying every count down from all of them, for thousands of pods too
    names = [f"serve-abc-{i:05d}" for i in range(count)]

    def words(shown: str, left: int) -> str:
        return f"kubectl annotate pod -n ml {shown} {ANNOTATION}=-100{more(left)}"

    def every_count() -> str:
        for shown in range(count, 0, -1):
            text = words(" ".join(names[:shown]), count - shown)
            if len(text) <= FIX_LENGTH:
                return text
        return words(names[0] if names else "", max(count - 1, 0))

    assert fitted(words, names) == every_count()
    assert len(fitted(words, names)) <= FIX_LENGTH


def test_a_not_ready_protected_pod_goes_first_whatever_the_cost_so_the_fix_is_to_wait():
    # web-0 on inference is not ready: rule 3 deletes it before any cost counts
    objects, rs = replicaset([("inf-1", "1000"), ("inf-2", "1000"), ("hyb-1", "-100")],
                             {0: {"ready": False, "ready_time": None}})
    options = fixes(objects, rs, 2)
    assert ("wait until web-0 is Running and Ready, then retry: the ReplicaSet controller "
            "deletes a pod that is not before any deletion cost counts") in options
    assert not any("kubectl annotate" in o for o in options)  # no cost would help


def test_a_deployment_mid_rollout_says_to_wait_for_the_rollout_with_the_command():
    objects = rolling()
    deployment = objects[0]
    options = fixes(objects, deployment, 2)
    assert ("wait for the rollout under way to finish (kubectl rollout status "
            "deployment/rolling -n ml), then retry: until then the scale-down is split between "
            "2 ReplicaSets by their size, which no deletion cost changes") in options


def test_a_statefulset_fix_names_the_highest_ordinals_to_move_never_a_cost():
    sts = f.statefulset("kv", replicas=3)
    objects = [sts, *[f.pod(f"kv-{i}", node_name=node, owner=sts)
                      for i, node in enumerate(["hyb-1", "inf-1", "inf-2"])]]
    options = fixes(objects, sts, 1)
    assert options == [
        "StatefulSet ml/kv removes its highest ordinals first whatever their node, so only "
        "moving them off protected pools helps: kubectl delete pod -n ml kv-2 kv-1 recreates "
        "them, same names, where the scheduler places them now; then retry"]
    assert not any("cost" in o for o in options)


def test_a_stalled_ordered_ready_statefulset_says_what_it_waits_on():
    sts = f.statefulset("kv", replicas=4)
    objects = [sts, f.pod("kv-0", node_name="hyb-1", owner=sts),
               f.pod("kv-1", node_name="hyb-1", owner=sts, ready=False, ready_time=None),
               f.pod("kv-2", node_name="inf-1", owner=sts),
               f.pod("kv-3", node_name="hyb-2", owner=sts)]
    options = fixes(objects, sts, 2)
    assert ("wait, then retry: the controller deletes nothing more while kv-1 in the new range "
            "is not Running and Ready") in options


def test_a_leaderworkerset_fix_names_the_group_leader_to_delete_and_the_safe_groups():
    # group 1 sits on inference: groups go highest index first, so 1 -> group 1 goes
    lws, objects = lf.lws_state([["hyb-1", "hyb-1"], ["inf-1", "inf-2"], ["hyb-2", "hyb-2"],
                                 ["hyb-1", "hyb-2"]])
    assert fixes(objects, lws, 1) == [
        "scale to 2 groups for now (the smallest count above 1 that breaks no rule)",
        "delete the leader pod of group 1 (kubectl delete pod -n ml llm-1): LeaderWorkerSet "
        "ml/llm recreates each whole group where the scheduler places it now; retry once it "
        "runs outside protected pools"]


def test_when_nothing_helps_the_fix_says_to_keep_the_count():
    # every pod is on inference: minProtectedReplicas 3 forbids any protected deletion
    policy = parse_policy({"pools": [{"name": "inference", "deletionCost": 1000,
                                      "protected": True}],
                           "scaleDown": {"minProtectedReplicas": 3}})
    objects, rs = replicaset([("inf-1", "1000"), ("inf-2", "1000"), ("inf-1", "1000")])
    assert fixes(objects, rs, 2, policy) == [
        "nothing lowers ReplicaSet ml/web safely now: keep its 3 replicas until fewer of its "
        "pods run on protected pools"]


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "StatefulSet", "LeaderWorkerSet",
                                  "Rollout"])
def test_no_kind_gives_the_old_advice_nobody_can_act_on(kind):
    from webhook.core.kinds.registry import BY_KIND
    assert callable(BY_KIND[kind].fix)
