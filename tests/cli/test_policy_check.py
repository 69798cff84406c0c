"""`python -m webhook policy check FILE`: exit codes and the printed explanation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
POOLS = "pools:\n  - {name: a, deletionCost: 1, protected: true}\n"


def check(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook", "policy", "check", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=60, check=False)


def test_the_example_policy_is_explained_in_plain_words() -> None:
    result = check("examples/policy.yaml")
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[0] == "examples/policy.yaml: a valid poolguard policy."
    text = result.stdout
    assert "Pools, by the node label node.usage (listed most protected first):" in text
    assert ("  inference  nodes with node.usage=inference: pods get deletion cost 1000  "
            "protected") in lines
    assert ("  hybrid     nodes with node.usage=hybrid: pods get a deletion cost in the band "
            "[-1073741923, -100], ranked by how cheaply their node empties") in lines
    assert lines[lines.index("Bands, highest first (no two share a value, so no rank can put "
                             "a pool's pods before a less protected pool's):") + 1:][:3] == [
        "  inference: 1000", "  other nodes: 0", "  hybrid: [-1073741923, -100]"]
    assert ("the lowest cost goes first: hybrid pods ([-1073741923, -100]), then pods on other "
            "nodes (0), then inference pods (1000).") in text
    assert ("Governed namespaces: all namespaces (the selector is empty), except kube-system "
            "and poolguard's own namespace (poolguard unless installed elsewhere), which the "
            "webhooks and the reconciler always skip.") in lines
    assert ("Scale-downs (enforcement: enforce): a scale-down that breaks a rule is denied, "
            "with the reason and the fix.") in lines
    assert ("  protectedLast: a scale-down must not remove a pod on inference while a pod of "
            "the same workload outside the protected pools survives.") in lines
    assert "  minProtectedReplicas: 0, no minimum." in lines
    assert "system:serviceaccount:kube-system:deployment-controller" in lines[-1]


def test_a_policy_without_consolidation_prints_no_bands() -> None:
    result = check("tests/support/flat-policy.yaml")
    assert result.returncode == 0, result.stderr
    assert "  hybrid     nodes with node.usage=hybrid: pods get deletion cost -100" in (
        result.stdout.splitlines())
    assert "Bands" not in result.stdout


def test_overlapping_bands_are_refused_with_both_bands(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("pools:\n- {name: hybrid, deletionCost: -100, consolidate: nodes}\n"
                      "- {name: training, deletionCost: -5000}\n")
    result = check(policy)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (f"error: policy file {policy}: pools: the band of pool 'hybrid' "
                             "[-1073741923, -100] overlaps the band of pool 'training' -5000; "
                             "bands must not share a value\n")


def test_selectors_percentages_and_modes_are_spelled_out(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("""
poolLabel: example.com/pool
pools:
  - {name: online, deletionCost: 500, protected: true}
  - {name: batch, deletionCost: 500}
defaultDeletionCost: -10
namespaceSelector:
  matchLabels: {team: ml}
  matchExpressions:
    - {key: tier, operator: In, values: [gold, silver]}
    - {key: legacy, operator: DoesNotExist}
scaleDown: {enforcement: dryrun, protectedLast: false, minProtectedReplicas: "50%",
            exemptUsers: []}
""")
    result = check(policy)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert ("Governed namespaces: namespaces whose labels match team=ml and tier in (gold, "
            "silver) and legacy is not set, except kube-system and poolguard's own namespace "
            "(poolguard unless installed elsewhere), which the webhooks and the reconciler "
            "always skip.") in lines
    assert ("the lowest cost goes first: pods on other nodes (-10), then online pods and "
            "batch pods (500).") in result.stdout
    assert any(line.startswith("Scale-downs (enforcement: dryrun): a scale-down that breaks "
                               "a rule is allowed silently") for line in lines)
    assert "  protectedLast: off." in lines
    assert ("  minProtectedReplicas: a scale-down that removes pods on online must leave at "
            "least 50% of the new replica count there (rounded up).") in lines
    assert not any("Never checked" in line for line in lines)


def test_no_protected_pool_says_no_rule_can_be_broken(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("pools:\n  - {name: a, deletionCost: 5}\nscaleDown: {enforcement: warn}\n")
    result = check(policy)
    assert result.returncode == 0
    assert "No pool is protected, so no scale-down rule can be broken" in result.stdout
    quiet = check(policy, "--quiet")
    assert (quiet.returncode, quiet.stdout) == (0, "")


@pytest.mark.parametrize(("text", "message"), [
    ("pools:\n  - name: a\n    deletionCost: abc\n",
     "pools[0].deletionCost: must be an integer, got 'abc'"),
    (POOLS + "scaleDown:\n  enforcement: audit\n", "scaleDown.enforcement"),
    ("poolLabel: node.usage\nextra: 1\n", "extra: unknown field"),
    ("pools: [\n", "line"),
    (POOLS + "scaleDown:\n  minProtectedReplicas: 150%\n", "scaleDown.minProtectedReplicas"),
    ("poolLabel: node.usage\n", "pools: must be a non-empty list of pools"),
])
def test_an_invalid_policy_exits_2_naming_the_field(tmp_path: Path, text: str,
                                                    message: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    result = check(policy)
    assert (result.returncode, result.stdout) == (2, "")
    line, = result.stderr.splitlines()
    assert line.startswith(f"error: policy file {policy}") and message in line, line


def test_a_missing_file_and_missing_argument(tmp_path: Path) -> None:
    missing = check(tmp_path / "nope.yaml")
    assert missing.returncode == 2
    assert "nope.yaml" in missing.stderr and missing.stderr.startswith("error: ")
    usage = subprocess.run([sys.executable, "-m", "webhook", "policy", "check"],
                           capture_output=True, text=True, cwd=REPO, check=False)
    assert usage.returncode == 2 and usage.stderr.startswith("error: ")


def test_autoscalers_default_to_clamping_the_hpa_keda_and_knative() -> None:
    result = check("examples/policy.yaml")
    assert result.returncode == 0, result.stderr
    [line] = [x for x in result.stdout.splitlines() if x.startswith("  autoscalers")]
    assert line.startswith("  autoscalers (enforcement: clamp): scale-downs by "
                           "system:serviceaccount:kube-system:horizontal-pod-autoscaler, "
                           "system:serviceaccount:keda:keda-operator, "
                           "system:serviceaccount:knative-serving:controller are lowered "
                           "to the smallest safe replica count")


def test_autoscalers_can_be_listed_and_judged_like_people(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POOLS + "scaleDown:\n  autoscalers: {users: [my-scaler], "
                      "enforcement: warn}\n")
    result = check(policy)
    assert result.returncode == 0, result.stderr
    assert ("  autoscalers (enforcement: warn): scale-downs by my-scaler are allowed with "
            "warnings when they break a rule.") in result.stdout.splitlines()


def test_git_ops_controllers_are_explained_with_their_enforcement(tmp_path: Path) -> None:
    default = check("examples/policy.yaml")
    assert ("  GitOps controllers: none listed; Argo CD's and Flux's syncs are judged as "
            "people's.") in default.stdout.splitlines()
    policy = tmp_path / "policy.yaml"
    argocd = "system:serviceaccount:argocd:argocd-application-controller"
    policy.write_text(POOLS + f"scaleDown:\n  gitOps: {{users: [{argocd}]}}\n")
    result = check(policy)
    assert result.returncode == 0, result.stderr
    assert (f"  GitOps controllers (enforcement: warn): scale-downs by {argocd} are allowed "
            "with warnings when they break a rule, so that a sync never fails on them."
            ) in result.stdout.splitlines()
    both = tmp_path / "both.yaml"
    both.write_text(POOLS + f"scaleDown:\n  exemptUsers: [{argocd}]\n"
                    f"  gitOps: {{users: [{argocd}]}}\n")
    refused = check(both)
    assert refused.returncode == 2
    assert f"scaleDown.gitOps.users[0]: {argocd!r} is also in scaleDown.exemptUsers" in (
        refused.stderr)


@pytest.mark.parametrize(("scale_down", "message"), [
    ("{autoscalers: {enforcement: deny}}",
     "scaleDown.autoscalers.enforcement: must be one of clamp, enforce, warn, dryrun, "
     "got 'deny'"),
    ("{autoscalers: {users: system:serviceaccount:kube-system:horizontal-pod-autoscaler}}",
     "scaleDown.autoscalers.users: must be a list of user names"),
    ("{autoscalers: {users: [hpa], mode: clamp}}",
     "scaleDown.autoscalers.mode: unknown field (known: enforcement, users)"),
    ("{autoscalers: [hpa]}", "scaleDown.autoscalers: must be a mapping, got a list"),
])
def test_autoscaler_errors_name_the_field(tmp_path: Path, scale_down: str, message: str) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POOLS + f"scaleDown: {scale_down}\n")
    result = check(policy)
    assert result.returncode == 2
    assert message in result.stderr, result.stderr


def test_pools_listed_out_of_protection_order_are_shown_reordered_saying_so(
        tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("pools:\n  - {name: hybrid, deletionCost: -100}\n"
                      "  - {name: training, deletionCost: -200}\n"
                      "  - {name: inference, deletionCost: 1000, protected: true}\n")
    result = check(policy)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    start = lines.index("Pools, by the node label node.usage (listed most protected first):")
    assert lines[start + 1] == (
        "  (the policy lists them as hybrid, training, inference: shown here most protected "
        "first; only their protection and deletion costs decide what goes first, never the "
        "order of the list)")
    assert [line.split()[0] for line in lines[start + 2:start + 5]] == [
        "inference", "hybrid", "training"]
