"""The policy's `rebalance` section: off by default, and errors that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.core.policy.policy import default_policy, parse_policy
from webhook.core.policy.policy_field import PolicyError
from webhook.core.policy.policy_schema import policy_schema
from webhook.core.policy.policy_text import explain_policy

POOLS = [{"name": "inference", "deletionCost": 1000, "protected": True},
         {"name": "hybrid", "deletionCost": -100}]


def test_rebalancing_is_off_unless_the_policy_turns_it_on() -> None:
    assert default_policy().rebalance.enabled is False
    assert parse_policy({"pools": POOLS}).rebalance.enabled is False
    assert parse_policy({"pools": POOLS, "rebalance": None}).rebalance.enabled is False
    policy = parse_policy({"pools": POOLS, "rebalance": {
        "enabled": True, "priorityClassPools": {"serving-high": "inference"}}})
    assert policy.rebalance.enabled is True
    assert policy.rebalance.pool_for_priority_class("serving-high") == "inference"
    assert policy.rebalance.pool_for_priority_class("batch") is None


@pytest.mark.parametrize(("section", "pools", "message"), [
    ({"enabled": "yes"}, POOLS, "rebalance.enabled: must be true or false"),
    ([], POOLS, "rebalance: must be a mapping"),
    ({"dryRun": True}, POOLS, "rebalance.dryRun: unknown field (known: enabled, "
     "priorityClassPools)"),
    ({"priorityClassPools": {"high": "gpu"}}, POOLS,
     "rebalance.priorityClassPools.high: 'gpu' is not a pool of this policy (pools: "
     "inference, hybrid)"),
    ({"priorityClassPools": {"High_Class": "inference"}}, POOLS,
     "rebalance.priorityClassPools.High_Class: 'High_Class' is not a PriorityClass name"),
    ({"priorityClassPools": ["inference"]}, POOLS, "rebalance.priorityClassPools: must map"),
    ({"enabled": True}, [{"name": "a", "deletionCost": 1}], "rebalance.enabled: true needs "
     "a protected pool to move pods home to, and no pool is protected"),
    ({"enabled": True}, POOLS[:1], "rebalance.enabled: true needs an unprotected pool"),
])
def test_a_bad_section_is_refused_naming_the_field(section: Any, pools: list, message: str
                                                   ) -> None:
    with pytest.raises(PolicyError) as raised:
        parse_policy({"pools": pools, "rebalance": section}, "policy file p.yaml")
    assert str(raised.value).startswith(f"policy file p.yaml: {message}")


def test_the_schema_describes_the_section() -> None:
    section = policy_schema()["properties"]["rebalance"]
    assert section["type"] == ["object", "null"]
    assert section["additionalProperties"] is False
    assert section["properties"]["enabled"] == {
        "description": section["properties"]["enabled"]["description"], "type": "boolean",
        "default": False}
    assert section["properties"]["priorityClassPools"]["additionalProperties"] == {
        "type": "string"}


def test_policy_check_explains_the_section_only_when_the_file_sets_it() -> None:
    assert not any("Rebalance" in line for line in explain_policy(default_policy()))
    lines = explain_policy(parse_policy({"pools": POOLS, "rebalance": {
        "enabled": True, "priorityClassPools": {"serving-high": "inference"}}}))
    assert lines[-2] == ("Rebalance: on: the reconciler holding the Lease moves settled "
                         "overflow pods home, whole nodes at a time (docs/rebalance.md).")
    assert lines[-1] == ("  pods of PriorityClass serving-high whose preferred node affinity "
                         "names no pool belong in pool inference")
