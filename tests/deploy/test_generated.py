"""The deploy files' parts generated from the workload-kind registry are current.

`make generate` (`python -m webhook.deploy_gen`) writes each kind's webhook rules, its RBAC
and the chart's switch into marked blocks of manifests/ and charts/poolguard/; these tests
run it into a copy of those files and compare, so a registry change without `make
generate` fails here, naming the command.
"""

from __future__ import annotations

import difflib
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from webhook.core.kinds.registry import KINDS
from webhook.deploy_gen.rules import read_rules, scale_rules, template_rules
from webhook.deploy_gen.targets import BASE_WEBHOOKS, CHART_RBAC, CHART_SCHEMA, blocks

REPO = Path(__file__).resolve().parents[2]
GENERATED = sorted([*blocks(), CHART_SCHEMA])


def generate(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "webhook.deploy_gen", "--root", str(root),
                           *args], capture_output=True, text=True, cwd=REPO, timeout=60,
                          check=False)


def copy_of_the_files(tmp_path: Path) -> Path:
    for path in GENERATED:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(REPO / path, tmp_path / path)
    return tmp_path


def test_the_committed_files_are_what_the_registry_generates(tmp_path: Path) -> None:
    root = copy_of_the_files(tmp_path)
    result = generate(root)
    assert result.returncode == 0, result.stderr
    stale = {path: "".join(difflib.unified_diff(
        (REPO / path).read_text().splitlines(keepends=True),
        (root / path).read_text().splitlines(keepends=True), path, f"{path} (generated)"))
        for path in GENERATED if (REPO / path).read_text() != (root / path).read_text()}
    assert not stale, ("the deploy files are not what the kind registry gives; run `make "
                       "generate` and commit the result:\n" + "\n".join(stale.values()))


def test_a_hand_edited_block_is_found_and_regenerated(tmp_path: Path) -> None:
    root = copy_of_the_files(tmp_path)
    rbac = root / CHART_RBAC
    rbac.write_text(rbac.read_text().replace('resources: ["clonesets"]', 'resources: []', 1))
    check = generate(root, "--check")
    assert check.returncode == 1
    assert check.stderr == f"{CHART_RBAC}: not current; run `make generate`\n"
    assert generate(root).returncode == 0
    assert rbac.read_text() == (REPO / CHART_RBAC).read_text()
    assert generate(root, "--check").returncode == 0


def test_a_file_without_its_markers_is_refused_naming_the_file_and_block(
        tmp_path: Path) -> None:
    root = copy_of_the_files(tmp_path)
    hooks = root / BASE_WEBHOOKS
    hooks.write_text(hooks.read_text().replace("# end template-rules", "#", 1))
    result = generate(root)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {BASE_WEBHOOKS}:")
    assert "block template-rules has no end marker" in result.stderr
    assert "Traceback" not in result.stderr
    assert hooks.read_text().count("# end template-rules") == 0  # nothing written


def _pairs(rules, key: str = "resources") -> set[tuple[str, str, str | None]]:
    return {(group, resource, rule.switch) for rule in rules
            for group in dict(rule.fields)["apiGroups"] for resource in dict(rule.fields)[key]}


def test_a_new_custom_kind_gets_its_rules_behind_its_switch_and_its_children_read() -> None:
    lws = next(kind for kind in KINDS if kind.kind == "LeaderWorkerSet")
    widget = replace(lws, resource=replace(lws.resource, name="widgets", kind="Widget",
                                           api_version="example.com/v2"),
                     sizes=("StatefulSet", "Gadget"))
    gadget = replace(widget, resource=replace(widget.resource, name="gadgets", kind="Gadget"),
                     sizes=())
    kinds = (*KINDS, widget)
    scale = scale_rules(kinds)
    assert ("example.com", "widgets/scale", "widgets") in _pairs(scale)
    assert _pairs(scale) - _pairs(scale_rules(KINDS)) == {
        ("example.com", "widgets", "widgets"), ("example.com", "widgets/scale", "widgets")}
    assert template_rules(kinds) == template_rules(KINDS)  # not validated by the API server
    reads = read_rules(("list",), (*kinds, gadget))
    # its StatefulSets are read already (apps/v1); its Gadgets only with it, behind its switch
    assert _pairs(reads) - _pairs(read_rules(("list",), KINDS)) == {
        ("example.com", "widgets", "widgets"), ("example.com", "gadgets", "widgets"),
        ("example.com", "gadgets", "gadgets")}
