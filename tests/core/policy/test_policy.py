"""Policy loading: the documented shape, defaults, and errors that name the field."""

from __future__ import annotations

import pytest
import yaml

from webhook.cluster.state import EXAMPLE_POLICY, load_policy
from webhook.core.policy.policy import Policy, default_policy, parse_policy
from webhook.core.policy.policy_field import PolicyError


def test_bundled_example_equals_built_in_default():
    assert load_policy(EXAMPLE_POLICY) == default_policy()
    assert load_policy(None) == default_policy()


def test_default_policy_values():
    policy = default_policy()
    assert policy.pool_label == "node.usage"
    assert policy.cost_for_pool("inference") == 1000
    assert policy.cost_for_pool("hybrid") == -100
    assert policy.cost_for_pool("training") == 0  # not listed: default
    assert policy.cost_for_pool(None) == 0  # no label: default
    assert policy.is_protected("inference") and not policy.is_protected("hybrid")
    assert policy.scale_down.enforcement == "enforce"
    assert policy.scale_down.protected_last is True


def test_minimal_document_gets_defaults():
    policy = parse_policy({"pools": [{"name": "a", "deletionCost": 5}]})
    assert policy == Policy(pools=policy.pools)
    assert policy.scale_down.min_protected_replicas == 0


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"pools": []}, "pools"),
        ({"pools": [{"name": "a"}]}, "pools[0].deletionCost"),
        ({"pools": [{"name": "a", "deletionCost": "10"}]}, "pools[0].deletionCost"),
        ({"pools": [{"name": "a", "deletionCost": 2**31}]}, "pools[0].deletionCost"),
        ({"pools": [{"name": "a", "deletionCost": True}]}, "pools[0].deletionCost"),
        ({"pools": [{"name": "a", "deletionCost": 1}, {"name": "a", "deletionCost": 2}]},
         "pools[1].name"),
        ({"pools": [{"name": "a", "deletionCost": 1, "protected": "yes"}]}, "pools[0].protected"),
        ({"pools": [{"name": "a", "deletionCost": 1, "colour": 1}]}, "pools[0].colour"),
        ({"pools": [{"name": "a", "deletionCost": 1}], "poolLabel": "bad label!"}, "poolLabel"),
        ({"pools": [{"name": "a", "deletionCost": 1}], "defaultDeletionCost": -2**31 - 1},
         "defaultDeletionCost"),
        ({"pools": [{"name": "a", "deletionCost": 1}], "scaleDown": {"enforcement": "block"}},
         "scaleDown.enforcement"),
        ({"pools": [{"name": "a", "deletionCost": 1}],
          "scaleDown": {"minProtectedReplicas": "150%"}}, "scaleDown.minProtectedReplicas"),
        ({"pools": [{"name": "a", "deletionCost": 1}],
          "scaleDown": {"minProtectedReplicas": -1}}, "scaleDown.minProtectedReplicas"),
        ({"pools": [{"name": "a", "deletionCost": 1}], "scaleDown": {"protectedlast": True}},
         "scaleDown.protectedlast"),
        ({"pools": [{"name": "a", "deletionCost": 1}],
          "namespaceSelector": {"matchExpressions": [{"key": "x", "operator": "Is"}]}},
         "namespaceSelector.matchExpressions[0].operator"),
        ({"pools": [{"name": "a", "deletionCost": 1}], "extra": 1}, "extra"),
    ],
)
def test_errors_name_the_field(document, field):
    with pytest.raises(PolicyError) as err:
        parse_policy(document)
    assert f"{field}:" in str(err.value)


def test_percentage_rounds_up():
    policy = parse_policy({"pools": [{"name": "a", "deletionCost": 1, "protected": True}],
                           "scaleDown": {"minProtectedReplicas": "50%"}})
    assert policy.scale_down.required_protected(3) == 2
    assert policy.scale_down.required_protected(4) == 2
    assert policy.scale_down.required_protected(0) == 0


def test_policy_file_errors_name_the_file(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("pools: [\n")
    with pytest.raises(PolicyError, match=r"policy file .*policy.yaml: line \d+"):
        load_policy(path)
    path.write_text(yaml.safe_dump({"pools": [{"name": "x", "deletionCost": "high"}]}))
    with pytest.raises(PolicyError, match=r"policy.yaml: pools\[0\].deletionCost"):
        load_policy(path)
    with pytest.raises(PolicyError, match="no such file"):
        load_policy(tmp_path / "missing.yaml")


def test_percentage_with_a_trailing_newline_is_refused():
    with pytest.raises(PolicyError, match="minProtectedReplicas"):
        parse_policy({"pools": [{"name": "a", "deletionCost": 1}],
                      "scaleDown": {"minProtectedReplicas": "50%\n"}})


@pytest.mark.parametrize(("document", "against"), [
    ({"pools": [{"name": "inference", "deletionCost": -5, "protected": True},
                {"name": "hybrid", "deletionCost": 10}]}, "10 of pools[1] ('hybrid')"),
    ({"pools": [{"name": "inference", "deletionCost": -5, "protected": True}]},
     "0 of defaultDeletionCost"),
])
def test_a_protected_pool_cheaper_than_an_unprotected_one_is_refused(document, against):
    with pytest.raises(PolicyError) as err:
        parse_policy(document, "policy file p.yaml")
    assert str(err.value).startswith("policy file p.yaml: pools[0].deletionCost: protected pool "
                                     "'inference' has cost -5, lower than " + against)


def test_equal_costs_are_accepted():
    parse_policy({"pools": [{"name": "inference", "deletionCost": 0, "protected": True},
                            {"name": "hybrid", "deletionCost": 0}]})


ARGOCD = "system:serviceaccount:argocd:argocd-application-controller"


def test_git_ops_controllers_are_opt_in_and_warned_by_default():
    """None listed by default; once listed, a GitOps controller's violation is answered by
    gitOps.enforcement (warn unless set), everyone else's by scaleDown.enforcement."""
    rules = default_policy().scale_down
    assert rules.git_ops.users == () and rules.git_ops.enforcement == "warn"
    listed = parse_policy({"pools": [{"name": "a", "deletionCost": 5}],
                           "scaleDown": {"gitOps": {"users": [ARGOCD]}}}).scale_down
    assert listed.enforcement_for(ARGOCD) == "warn" and not listed.clamps(ARGOCD)
    assert listed.enforcement_for("alice") == "enforce"
    clamping = parse_policy({"pools": [{"name": "a", "deletionCost": 5}], "scaleDown": {
        "gitOps": {"users": [ARGOCD], "enforcement": "clamp"}}}).scale_down
    # clamped by /mutate-scale; what reaches /validate-scale is judged as a person's
    assert clamping.clamps(ARGOCD) and clamping.enforcement_for(ARGOCD) == "enforce"


@pytest.mark.parametrize(("scale_down", "message"), [
    ({"exemptUsers": [ARGOCD], "gitOps": {"users": [ARGOCD]}},
     f"scaleDown.gitOps.users[0]: {ARGOCD!r} is also in scaleDown.exemptUsers"),
    ({"autoscalers": {"users": ["hpa"]}, "gitOps": {"users": ["x", "hpa"]}},
     "scaleDown.gitOps.users[1]: 'hpa' is also in scaleDown.autoscalers.users, which has an "
     "enforcement of its own; list it in one of the two"),
    ({"gitOps": {"enforcement": "deny"}},
     "scaleDown.gitOps.enforcement: must be one of clamp, enforce, warn, dryrun"),
    ({"gitOps": {"users": ARGOCD}}, "scaleDown.gitOps.users: must be a list of user names"),
    ({"gitOps": [{"user": ARGOCD}]}, "scaleDown.gitOps: must be a mapping, got a list"),
    ({"gitOps": {"user": [ARGOCD]}}, "scaleDown.gitOps.user: unknown field"),
])
def test_git_ops_errors_name_the_field(scale_down, message):
    with pytest.raises(PolicyError) as refused:
        parse_policy({"pools": [{"name": "a", "deletionCost": 5}], "scaleDown": scale_down})
    assert message in str(refused.value)
