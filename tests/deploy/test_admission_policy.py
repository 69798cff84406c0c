"""The MutatingAdmissionPolicy fallback: one generator, the kustomize component and the chart
agree; its CEL resolves a pod's pool exactly as the webhook does (evaluated with cel-python);
the objects are valid Kubernetes 1.37 objects. tests/e2e/test_admission_policy.py proves
that the API server applies it."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate.utils as kv
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.chart import CHART, REPO, helm, render
from webhook.cli.policy import admission_policy_yaml
from webhook.cluster.state import load_policy
from webhook.core.cost.admission_policy import admission_policy_objects
from webhook.core.cost.mutation import decide_cost, pinned_pool
from webhook.core.objects.deletion_cost import (
    DELETION_COST_ANNOTATION,
    MANAGED_COST_ANNOTATION,
    POOL_ANNOTATION,
)
from webhook.core.policy.policy import parse_policy

COMPONENT = REPO / "manifests" / "components" / "admission-policy"
KINDS = ("ConfigMap", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding")

celpy = pytest.importorskip("celpy", reason="cel-python evaluates the policy's CEL")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook", "policy", "admission-policy", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=60, check=False)


def _comparable(objects: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """The objects by kind and name, without labels and annotations (the chart adds its own)."""
    found = {}
    for obj in objects:
        obj = copy.deepcopy(obj)
        obj["metadata"].pop("labels")
        obj["metadata"].pop("annotations", None)
        found[(obj["kind"], obj["metadata"]["name"])] = obj
    return found


def _chart_objects(*values: Path, sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [o for o in render(*values, sets=("admissionPolicy.enabled=true", *sets))
            if o["kind"] in KINDS and o["metadata"]["name"].endswith("deletion-cost")]


# --------------------------------------------------------------------------- one source


def test_component_file_is_the_generated_output_for_the_base_policy() -> None:
    generated = _cli(str(REPO / "manifests" / "base" / "policy.yaml"))
    assert generated.returncode == 0, generated.stderr
    assert (COMPONENT / "admission-policy.yaml").read_text() == generated.stdout, (
        "regenerate: python -m webhook policy admission-policy manifests/base/policy.yaml "
        "> manifests/components/admission-policy/admission-policy.yaml")
    component = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    assert component["resources"] == ["admission-policy.yaml"]


def test_chart_renders_the_generated_objects_for_its_policy() -> None:
    chart = _chart_objects()
    policy = parse_policy(yaml.safe_load((CHART / "values.yaml").read_text())["policy"])
    assert _comparable(chart) == _comparable(admission_policy_objects(policy, "poolguard"))
    for obj in chart:
        assert obj["metadata"]["labels"]["app.kubernetes.io/component"] == "admission-policy"


def test_chart_follows_another_policy_and_namespace() -> None:
    values = CHART / "ci" / "custom-values.yaml"
    selectors = ("policy.namespaceSelector.matchLabels.team=ml",
                 "policy.podSelector.matchLabels.tier=serving")
    chart = _chart_objects(values, sets=selectors)
    document = yaml.safe_load(values.read_text())
    document["policy"]["namespaceSelector"] = {"matchLabels": {"team": "ml"}}
    document["policy"]["podSelector"] = {"matchLabels": {"tier": "serving"}}
    expected = admission_policy_objects(parse_policy(document["policy"]), "gpu-guard")
    assert _comparable(chart) == _comparable(expected)
    data = _comparable(chart)[("ConfigMap", "poolguard-deletion-cost")]["data"]
    assert data == {"poolLabel": "example.com/pool", "defaultDeletionCost": "0",
                    "pool.online": "500", "pool.shared": "-50"}


def test_chart_leaves_it_out_by_default() -> None:
    assert not [o for o in render() if o["kind"].startswith("MutatingAdmissionPolicy")]


def test_chart_refuses_a_pool_name_no_node_can_carry(tmp_path: Path) -> None:
    """The policy's schema refuses it, with the admission policy or without: serve and
    policy check refuse it too."""
    values = tmp_path / "values.yaml"
    values.write_text("policy:\n  pools:\n    - {name: inference, deletionCost: 1000}\n"
                      "    - {name: GPU pool, deletionCost: 10}\n")
    for enabled in ("true", "false"):
        result = helm("template", "poolguard", CHART, "--set",
                      f"admissionPolicy.enabled={enabled}", "--values", values)
        assert result.returncode != 0
        assert "values don't meet the specifications of the schema" in result.stderr
        assert "/policy/pools/1/name" in result.stderr, result.stderr


def test_cli_refuses_a_pool_name_no_node_can_carry(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("pools:\n  - {name: GPU pool, deletionCost: 10}\n")
    result = _cli(str(policy))
    assert result.returncode == 2
    assert result.stdout == ""
    assert "pools[0].name: 'GPU pool' is not a node label value" in result.stderr


def test_cli_without_a_file_prints_the_built_in_policy_for_a_namespace() -> None:
    result = _cli("--namespace", "guard")
    assert result.returncode == 0, result.stderr
    config_map, policy, binding = yaml.safe_load_all(result.stdout)
    assert config_map["metadata"]["namespace"] == "guard"
    assert config_map["data"]["pool.inference"] == "1000"
    excluded = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
    assert excluded[0] == {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                           "values": ["kube-system", "guard"]}
    assert excluded[1] == {"key": "poolguard.dev/skip", "operator": "NotIn", "values": ["true"]}
    assert binding["spec"]["paramRef"]["namespace"] == "guard"


@pytest.mark.parametrize("version", ["1.37.0"])
def test_generated_objects_validate_against_kubernetes_schemas(version: str) -> None:
    for obj in admission_policy_objects(load_policy(str(REPO / "examples" / "policy.yaml"))):
        kv.validate(obj, version, strict=True)


def test_yaml_round_trips_to_the_objects() -> None:
    objects = admission_policy_objects(load_policy(str(REPO / "examples" / "policy.yaml")))
    assert list(yaml.safe_load_all(admission_policy_yaml(objects))) == objects


# --------------------------------------------------------------------------- the CEL


POLICY = parse_policy({"poolLabel": "node.usage", "defaultDeletionCost": 5, "pools": [
    {"name": "inference", "deletionCost": 1000, "protected": True},
    {"name": "hybrid", "deletionCost": -100}]})
ENV = celpy.Environment()
_OBJECTS = admission_policy_objects(POLICY)
PARAMS = _OBJECTS[0]
SPEC = _OBJECTS[1]["spec"]


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    program = ENV.program(ENV.compile(expression))
    return program.evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()})


def _variables(pod: dict[str, Any]) -> dict[str, Any]:
    """The policy's variables for `pod`, in order, as the API server evaluates them."""
    variables: dict[str, Any] = {}
    for variable in SPEC["variables"]:
        value = _evaluate(variable["expression"],
                          {"object": pod, "params": PARAMS, "variables": variables})
        variables[variable["name"]] = value
    return variables


def _matches(pod: dict[str, Any]) -> bool:
    return all(bool(_evaluate(c["expression"], {"object": pod}))
               for c in SPEC["matchConditions"])


def _pod(spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", **metadata}, "spec": {"containers": [], **spec}}


def _required(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}}}}


def _in(*values: str, key: str = "node.usage", operator: str = "In") -> dict[str, Any]:
    return {"key": key, "operator": operator, "values": list(values)}


@pytest.mark.parametrize(("spec", "pool"), [
    ({}, ""),
    ({"nodeSelector": {"node.usage": "inference"}}, "inference"),
    ({"nodeSelector": {"other": "inference"}}, ""),
    (_required([_in("hybrid")]), "hybrid"),
    (_required([_in("hybrid")], [_in("hybrid"), _in("x", key="zone")]), "hybrid"),
    (_required([_in("hybrid")], [_in("inference")]), ""),  # either pool: not pinned
    (_required([_in("hybrid", "inference")]), ""),
    (_required([_in("hybrid", operator="NotIn")]), ""),
    (_required([_in("hybrid")], []), ""),  # an unconstrained term: any node
    ({"nodeSelector": {"node.usage": "hybrid"}, **_required([_in("hybrid")])}, "hybrid"),
    ({"nodeSelector": {"node.usage": "inference"}, **_required([_in("hybrid")])}, ""),
    ({"nodeSelector": {"node.usage": "hybrid"}, **_required([_in("a", "b")])}, "hybrid"),
    ({"nodeSelector": {"node.usage": "training"}}, "training"),
])
def test_cel_pins_the_pool_the_webhook_pins(spec: dict[str, Any], pool: str) -> None:
    pod = _pod(spec)
    assert (pinned_pool(POLICY, pod) or "") == pool
    assert _variables(pod)["pool"] == pool


@pytest.mark.parametrize(("pool", "cost"), [("inference", "1000"), ("hybrid", "-100"),
                                            ("training", "5")])
def test_cel_cost_is_the_cost_the_webhook_writes(pool: str, cost: str) -> None:
    variables = _variables(_pod({"nodeSelector": {"node.usage": pool}}))
    assert variables["cost"] == cost
    wanted = decide_cost(POLICY, {}, pool).annotations
    assert wanted == {DELETION_COST_ANNOTATION: cost, MANAGED_COST_ANNOTATION: cost,
                      POOL_ANNOTATION: pool}
    expression = SPEC["mutations"][0]["jsonPatch"]["expression"]
    for key in wanted:  # the patch writes these three annotations and no other
        assert f"'{key}'" in expression
        assert f"/metadata/annotations/{key.replace('/', '~1')}'" in expression


_VALUES = st.sampled_from(["inference", "hybrid", "training"])
_EXPRESSIONS = st.builds(
    lambda values, key, operator: {"key": key, "operator": operator, "values": values},
    st.lists(_VALUES, max_size=2), st.sampled_from(["node.usage", "zone"]),
    st.sampled_from(["In", "NotIn"]))


@settings(max_examples=150, deadline=None)
@given(selector=st.one_of(st.none(), _VALUES),
       terms=st.one_of(st.none(), st.lists(st.lists(_EXPRESSIONS, max_size=3), max_size=3)))
def test_cel_pool_equals_the_webhooks_for_any_pinning(selector: str | None,
                                                      terms: list[list[dict]] | None) -> None:
    spec: dict[str, Any] = {}
    if selector is not None:
        spec["nodeSelector"] = {"node.usage": selector}
    if terms is not None:
        spec.update(_required(*terms))
    pod = _pod(spec)
    assert _variables(pod)["pool"] == (pinned_pool(POLICY, pod) or "")


def test_cel_keeps_an_explicit_cost_and_honours_the_skip_label() -> None:
    pinned = {"nodeSelector": {"node.usage": "inference"}}
    assert _matches(_pod(pinned))
    assert _matches(_pod(pinned, annotations={"team": "a"}, labels={"app": "x"}))
    assert not _matches(_pod(pinned, annotations={DELETION_COST_ANNOTATION: "7"}))
    assert not _matches(_pod(pinned, labels={"poolguard.dev/skip": "true"}))
    assert _matches(_pod(pinned, labels={"poolguard.dev/skip": "false"}))
