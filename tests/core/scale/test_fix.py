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

from tests.support import cloneset_factories as cf
from tests.support import factories as f
from tests.support import lws_factories as lf
from tests.support.scale_matrix import rolling
from webhook.core.model.fix_facts import fitted, more
from webhook.core.objects.kube import parse_time_ns
from webhook.core.policy.policy import parse_policy
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
    # Deleted, they come back on the nodes they left unless those are cordoned; each is
    # down meanwhile and comes back with its claims, to its node on a local volume.
    assert options == [
        "the highest ordinals go first, whatever their node: kubectl cordon inf-1 inf-2, "
        "then kubectl delete pod -n ml kv-2 kv-1: each is down until recreated with its "
        "claims (a local PersistentVolume pins one to its node); retry, then uncordon"]
    assert not any("cost" in o for o in options)


def test_a_statefulset_fix_for_one_pod_speaks_of_one():
    sts = f.statefulset("kv", replicas=3)
    objects = [sts, *[f.pod(f"kv-{i}", node_name=node, owner=sts)
                      for i, node in enumerate(["hyb-1", "hyb-2", "inf-2"])]]
    assert fixes(objects, sts, 2) == [
        "the highest ordinals go first, whatever their node: kubectl cordon inf-2, then "
        "kubectl delete pod -n ml kv-2: it is down until recreated with its claims (a local "
        "PersistentVolume pins it to its node); retry, then uncordon"]


def test_a_move_fix_with_long_node_names_names_as_many_nodes_as_fit():
    nodes = [f.node(f"ip-10-0-{i}-{i}.eu-west-1.compute.internal", "inference") for i in range(4)]
    sts = f.statefulset("kv-cache-for-the-largest-model", replicas=5)
    objects = [*nodes, sts, f.pod("kv-cache-for-the-largest-model-0", node_name="hyb-1",
                                  owner=sts),
               *[f.pod(f"kv-cache-for-the-largest-model-{i + 1}",
                       node_name=node["metadata"]["name"], owner=sts)
                 for i, node in enumerate(nodes)]]
    (option,) = fixes(objects, sts, 1)  # within one warning: the why left out
    assert option.startswith("cordon their nodes, then kubectl delete pod -n ml ")
    assert "kv-cache-for-the-largest-model-4" in option and "retry, then uncordon" in option


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
        "kubectl cordon inf-1 inf-2, then kubectl delete pod -n ml llm-1 (the leader of group "
        "1): it serves nothing until recreated whole; retry once off protected pools, then "
        "uncordon"]


def test_a_leaderworkerset_fix_for_two_groups_speaks_of_two():
    lws, objects = lf.lws_state([["hyb-1", "hyb-1"], ["inf-1", "inf-2"], ["inf-2", "hyb-2"]])
    (option,) = [o for o in fixes(objects, lws, 1) if "leader" in o]
    assert option == (
        "kubectl cordon inf-1 inf-2, then kubectl delete pod -n ml llm-2 llm-1 (the leaders "
        "of groups 2 and 1): they serve nothing until recreated whole; retry once off "
        "protected pools, then uncordon")


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
                                  "Rollout", "CloneSet"])
def test_no_kind_gives_the_old_advice_nobody_can_act_on(kind):
    from webhook.core.kinds.registry import BY_KIND
    assert callable(BY_KIND[kind].fix)


def clonesets(pods_to_delete: list[str], labelled: tuple[str, ...] = ()):
    """A CloneSet of three: web-0 on inference, web-1 and web-2 on hybrid, priced by pool."""
    cs = cf.cloneset("web", replicas=3, spec={"scaleStrategy": {"podsToDelete": pods_to_delete}})
    pods = [cf.clone_pod(cs, f"web-{i}", node, cost=cost, specified=f"web-{i}" in labelled)
            for i, (node, cost) in enumerate([("inf-1", "1000"), ("hyb-1", "-100"),
                                               ("hyb-2", "-100")])]
    return [cs, *pods], cs


def test_a_cloneset_pod_named_in_pods_to_delete_is_fixed_by_taking_it_out_of_the_list():
    """The controller deletes a named pod before any cost counts: the fix names the list
    entry to remove, never a cost, and without the entry the same scale is allowed."""
    objects, cs = clonesets(["web-0"])
    assert fixes(objects, cs, 2) == [
        "remove web-0 from scaleStrategy.podsToDelete unless it must go (kubectl edit "
        "cloneset -n ml web), then retry: no cost spares a pod named there"]
    verdict = assess_scale(Snapshot([*NODES, *objects]), POLICY, cs, 2, NOW).verdict
    assert not any("deletion cost" in w for w in verdict.warnings)  # no cost spares it
    fixed, cs = clonesets([])
    assert assess_scale(Snapshot([*NODES, *fixed]), POLICY, cs, 2, NOW).verdict.allowed


def test_a_cloneset_pod_labelled_for_deletion_is_fixed_by_taking_the_label_off():
    objects, cs = clonesets([], labelled=("web-0",))
    assert fixes(objects, cs, 2) == [
        "take the label off unless it must go, then retry: kubectl label pod -n ml web-0 "
        "apps.kruise.io/specified-delete- (no cost spares a pod so labelled)"]


def test_a_cloneset_fix_undoes_each_specification_and_steers_the_ranked_victims_by_cost():
    """web-0 named and labelled, web-3 on inference chosen by the ranking for its cost:
    both entries to undo for web-0, a cost for the hybrid survivor for web-3."""
    cs = cf.cloneset("web", replicas=4, spec={"scaleStrategy": {"podsToDelete": ["web-0"]}})
    objects = [cs, *[cf.clone_pod(cs, f"web-{i}", node, cost=cost, specified=i == 0)
                     for i, (node, cost) in enumerate([("inf-1", "1000"), ("hyb-1", "5000"),
                                                       ("inf-2", "1000"), ("inf-1", "-100")])]]
    options = fixes(objects, cs, 2)
    assert options[0].startswith("remove web-0 from scaleStrategy.podsToDelete unless it "
                                 "must go")
    assert options[1].startswith("take the label off unless it must go, then retry: "
                                 "kubectl label pod -n ml web-0 ")
    assert options[2] == ("give the surviving pod outside protected pools a cost below -100, "
                          f"then retry: kubectl annotate pod -n ml web-1 {ANNOTATION}=-101 "
                          "--overwrite")


def test_a_cloneset_fix_counts_its_pods():
    objects, cs = clonesets(["web-0", "web-1"])
    objects[2]["spec"]["nodeName"] = "inf-2"
    (option,) = [o for o in fixes(objects, cs, 1) if "podsToDelete" in o]
    assert option.startswith("remove web-0 and web-1 from scaleStrategy.podsToDelete "
                             "unless they must go")


def test_a_cloneset_fix_with_many_long_names_fits_one_warning():
    name = "inference-server-with-a-long-name"
    named = [f"{name}-{suffix}" for suffix in ("x7k2p", "q9w3e", "m4n8b", "z1c6v")]
    cs = cf.cloneset(name, replicas=6, spec={"scaleStrategy": {"podsToDelete": named}})
    objects = [cs, *[cf.clone_pod(cs, pod, "inf-1", cost="1000", specified=True)
                     for pod in named],
               *[cf.clone_pod(cs, f"{name}-h{i}", "hyb-1", cost="-100") for i in range(2)]]
    options = fixes(objects, cs, 2)  # each option within one warning
    assert options[0].startswith(f"remove {named[0]} (and 3 more: plan lists them) from ")
    assert "kubectl label pod -n ml " in options[1]


def test_a_leaderworkerset_fix_with_realistic_names_fits_one_warning():
    nodes = [f.node(name, "inference" if "inference" in name else "hybrid")
             for name in ("gpu-inference-node-01", "gpu-inference-node-02", "gpu-hybrid-node-01")]
    lws, objects = lf.lws_state([["gpu-hybrid-node-01"] * 2,
                                 ["gpu-inference-node-01", "gpu-inference-node-02"],
                                 ["gpu-inference-node-02", "gpu-inference-node-01"]],
                                name="llama-70b-instruct-serving")
    verdict = assess_scale(Snapshot([*nodes, *objects]), POLICY, lws, 1, NOW).verdict
    (option,) = [o for o in verdict.violations[0].fixes if "leader" in o]
    assert len(option) <= FIX_LENGTH and "kubectl delete pod -n ml llama-70b-instruct-" in option
    assert "they serve nothing until recreated whole" in option
