"""The policy's JSON Schema and the policy parser say the same thing.

The schema is generated from the policy model; the chart's values.schema.json carries it
(so `helm install` refuses what `serve` would refuse at start), and the README documents
the same fields. A policy is accepted by the schema exactly when the parser accepts it,
except for the rules across fields, which the parser refuses and the chart's template
checks (tests/deploy/test_chart_values.py).
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhook.cli.policy import chart_policy_schema
from webhook.core.policy.policy import parse_policy
from webhook.core.policy.policy_field import PolicyError
from webhook.core.policy.policy_schema import policy_schema

REPO = Path(__file__).resolve().parents[3]
VALUES_SCHEMA = REPO / "charts" / "poolguard" / "values.schema.json"
VALIDATOR = jsonschema.Draft7Validator(policy_schema())
# The parser's refusals that JSON Schema cannot express (the chart checks them).
ACROSS_FIELDS = ("duplicate pool", "protected pool", "also in scaleDown.exemptUsers",
                 "also in scaleDown.autoscalers.users")

BASE: dict[str, Any] = {
    "poolLabel": "node.usage",
    "pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
              {"name": "hybrid", "deletionCost": -100}],
    "defaultDeletionCost": 0,
    "namespaceSelector": {"matchLabels": {"team": "ml"},
                          "matchExpressions": [{"key": "tier", "operator": "In",
                                                "values": ["gold"]}]},
    "podSelector": {},
    "scaleDown": {"enforcement": "enforce", "protectedLast": True, "minProtectedReplicas": 0,
                  "exemptUsers": ["system:serviceaccount:kube-system:deployment-controller"],
                  "autoscalers": {"users": ["system:serviceaccount:keda:keda-operator"],
                                  "enforcement": "clamp"},
                  "gitOps": {"users": [
                      "system:serviceaccount:argocd:argocd-application-controller"],
                      "enforcement": "warn"}},
}
PATHS: list[tuple[Any, ...]] = [
    (), ("poolLabel",), ("pools",), ("pools", 0), ("pools", 0, "name"),
    ("pools", 1, "name"), ("pools", 0, "deletionCost"), ("pools", 1, "deletionCost"),
    ("pools", 0, "protected"), ("pools", 1, "protected"), ("pools", 0, "weight"),
    ("defaultDeletionCost",), ("namespaceSelector",), ("namespaceSelector", "matchLabels"),
    ("namespaceSelector", "matchLabels", "team"), ("namespaceSelector", "matchExpressions"),
    ("namespaceSelector", "matchExpressions", 0, "operator"),
    ("namespaceSelector", "matchExpressions", 0, "values"),
    ("namespaceSelector", "matchExpressions", 0, "value"), ("podSelector",),
    ("podSelector", "matchNames"), ("scaleDown",), ("scaleDown", "enforcement"),
    ("scaleDown", "protectedLast"), ("scaleDown", "minProtectedReplicas"),
    ("scaleDown", "exemptUsers"), ("scaleDown", "exemptUsers", 0), ("scaleDown", "autoscalers"),
    ("scaleDown", "autoscalers", "users"), ("scaleDown", "autoscalers", "users", 0),
    ("scaleDown", "autoscalers", "enforcement"), ("scaleDown", "gitOps"),
    ("scaleDown", "gitOps", "users"), ("scaleDown", "gitOps", "users", 0),
    ("scaleDown", "gitOps", "enforcement"), ("scaleDown", "enforcment"), ("pool",),
]
VALUES = st.one_of(
    st.sampled_from([None, True, False, 0, 1, -1, 1000, -5000, 2**31, -(2**31) - 1, 2**31 - 1,
                     1.5, "", "hybrid", "Hybrid Pool", "gpu.pool_2", "-bad", "a" * 64, "50%",
                     "100%", "101%", "007%", "enforce", "warn", "dryrun", "clamp", "audit",
                     "In", "Exists", "node.usage", "example.com/pool", "bad key!",
                     "system:serviceaccount:kube-system:deployment-controller",
                     [], ["x"], [""], [1], {}, {"a": "b"}, {"a": 1},
                     {"name": "hybrid", "deletionCost": 5},
                     {"key": "k", "operator": "Exists"}, {"deletionCost": -5000}]),
    st.integers(), st.text(max_size=8))


def put(document: dict[str, Any], path: tuple[Any, ...], value: Any) -> Any:
    """`document` with the value at `path` replaced (or added); the whole when path is ()."""
    if not path:
        return value
    changed = copy.deepcopy(document)
    target = changed
    for step in path[:-1]:
        target = target[step]
    if isinstance(target, list) and path[-1] >= len(target):
        target.append(value)
    else:
        target[path[-1]] = value
    return changed


def parser_says(document: Any) -> str | None:
    """None when the parser accepts `document`, else its message."""
    try:
        parse_policy(document)
    except PolicyError as err:
        return str(err)
    return None


def schema_errors(document: Any) -> list[str]:
    return [f"/{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in VALIDATOR.iter_errors(document)]


def assert_agree(document: Any) -> None:
    refusal, errors = parser_says(document), schema_errors(document)
    if refusal is not None and any(rule in refusal for rule in ACROSS_FIELDS):
        assert not errors, (refusal, errors)
        return
    assert (refusal is None) == (not errors), (document, refusal, errors)


def test_the_base_and_the_examples_are_valid_for_both() -> None:
    for document in (BASE, yaml.safe_load((REPO / "examples" / "policy.yaml").read_text()),
                     yaml.safe_load((REPO / "charts/poolguard/values.yaml").read_text())["policy"],
                     {"pools": [{"name": "a", "deletionCost": 1}]}):
        assert parser_says(document) is None
        assert schema_errors(document) == []


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), value=VALUES)
def test_schema_and_parser_accept_and_refuse_the_same_policies(path: tuple[Any, ...],
                                                                value: Any) -> None:
    assert_agree(put(BASE, path, value))


@pytest.mark.parametrize(("path", "value", "schema_path", "message"), [
    (("pools", 0), {"deletionCost": -5000}, "/pools/0", "pools[0].name: must be a non-empty"),
    (("pools", 1, "name"), "Hybrid Pool", "/pools/1/name", "is not a node label value"),
    (("pools", 0, "deletionCost"), 2**31, "/pools/0/deletionCost", "outside the int32 range"),
    (("scaleDown", "minProtectedReplicas"), "101%", "/scaleDown/minProtectedReplicas",
     "percentage from 0% to 100%"),
    (("scaleDown", "autoscalers", "enforcement"), "deny", "/scaleDown/autoscalers/enforcement",
     "must be one of clamp"),
    (("scaleDown", "gitOps", "enforcement"), "deny", "/scaleDown/gitOps/enforcement",
     "must be one of clamp"),
    (("namespaceSelector", "matchExpressions", 0, "value"), ["gold"],
     "/namespaceSelector/matchExpressions/0", "matchExpressions[0].value: unknown field"),
])
def test_both_refuse_naming_the_same_field(path: tuple[Any, ...], value: Any, schema_path: str,
                                           message: str) -> None:
    document = put(BASE, path, value)
    assert message in (parser_says(document) or "")
    assert any(error.startswith(schema_path) for error in schema_errors(document)), \
        schema_errors(document)


def test_a_user_both_exempt_and_an_autoscaler_is_refused_by_name() -> None:
    user = "system:serviceaccount:kube-system:deployment-controller"
    document = put(BASE, ("scaleDown", "autoscalers", "users"), ["x", user])
    assert parser_says(document) == (
        f"policy: scaleDown.autoscalers.users[1]: {user!r} is also in scaleDown.exemptUsers, "
        "whose requests are never checked, so it would never be clamped; list it in one of "
        "the two")


def test_a_user_both_exempt_and_a_git_ops_controller_is_refused_by_name() -> None:
    user = "system:serviceaccount:kube-system:deployment-controller"
    document = put(BASE, ("scaleDown", "gitOps"), {"users": [user]})
    assert parser_says(document) == (
        f"policy: scaleDown.gitOps.users[0]: {user!r} is also in scaleDown.exemptUsers, "
        "whose requests are never checked, so its enforcement would never apply; list it in "
        "one of the two")
    assert schema_errors(document) == []  # a rule across fields: the chart checks it


def test_the_chart_values_schema_carries_the_generated_policy_schema() -> None:
    """Regenerate with `make chart-schema` after changing the policy model."""
    values_schema = json.loads(VALUES_SCHEMA.read_text())
    assert values_schema["properties"]["policy"] == chart_policy_schema(), \
        "charts/poolguard/values.schema.json is stale: run make chart-schema"


def _paths(schema: dict[str, Any], prefix: str = "") -> set[str]:
    """Every field path the schema names (list items as `[]`)."""
    found = set()
    for key, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{key}"
        found.add(path)
        found |= _paths(sub, path + ".")
        if isinstance(sub.get("items"), dict):
            found |= _paths(sub["items"], path + "[].")
    return found


def _document_paths(value: Any, prefix: str = "") -> set[str]:
    found = set()
    if isinstance(value, dict):
        for key, sub in value.items():
            found.add(f"{prefix}{key}")
            found |= _document_paths(sub, f"{prefix}{key}.")
    elif isinstance(value, list):
        for item in value:
            found |= _document_paths(item, prefix[:-1] + "[].")
    return found


def test_the_policy_reference_documents_every_field() -> None:
    """docs/policy.md's policy block names exactly the model's fields, below the selectors
    (whose fields are Kubernetes' own), and is itself a valid policy; the README links it."""
    assert "](docs/policy.md)" in (REPO / "README.md").read_text()
    section = (REPO / "docs" / "policy.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    document = yaml.safe_load(block)
    assert parser_says(document) is None
    selectors = ("namespaceSelector.", "podSelector.")
    schema_fields = {p for p in _paths(policy_schema()) if not p.startswith(selectors)}
    assert _document_paths(document) == schema_fields
