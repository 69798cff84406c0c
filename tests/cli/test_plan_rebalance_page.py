"""The plan page's cluster section: the rebalance plan `rebalance --dry-run` prints, drawn
when it concerns the reader, and absent from a page where it does not."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest

from tests.support.rebalance_example import REBALANCE_STATE as STATE
from tests.support.rebalance_example import with_home_tainted
from webhook.cli.main import main
from webhook.cli.plan_rebalance import TOP_REASONS, render_rebalance_html
from webhook.cluster.state import EXAMPLE_STATE
from webhook.core.consolidation.rebalance.overflow_pods import Stayer
from webhook.core.consolidation.rebalance.rebalance_plan import RebalancePlan
from webhook.core.policy.policy import Policy

NOW = "2026-11-22T12:00:00Z"
ENABLED_POLICY = ("pools:\n- {name: inference, deletionCost: 1000, protected: true}\n"
                  "- {name: hybrid, deletionCost: -100}\nrebalance: {enabled: true}\n")


def page(tmp_path: Path, state: Path, workload: str, *args: str) -> str:
    out = tmp_path / "plan.html"
    assert main(["plan", "--state", str(state), "--now", NOW, "--workload", workload,
                 "--replicas", "1", "--output", "html", str(out), *args]) == 0
    return out.read_text()


def section(html: str) -> str:
    found = re.search(r'<section id="rebalance">(.*?)</section>', html, re.S)
    assert found, "the page has no rebalance section"
    return found.group(1)


def text_of(html: str) -> str:
    """What a reader sees: inline tags dropped, the others read as a space, entities
    decoded, spaces collapsed."""
    inline = re.sub(r"</?(?:span|code|b)\b[^>]*>", "", html)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", inline)).split())


def rebalance_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    capsys.readouterr()
    assert main(["rebalance", "--state", str(STATE), "--dry-run", "-o", "json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_page_shows_the_moves_and_freed_nodes_the_rebalance_command_plans(
        tmp_path: Path, capsys) -> None:
    html = page(tmp_path, STATE, "deploy/ml/chat")
    plan = rebalance_json(capsys)
    drawn = section(html)
    moves = re.findall(r'<tr data-move="([^"]+)">(.*?)</tr>', drawn)
    assert [name for name, _ in moves] == [f"{m['namespace']}/{m['name']}"
                                           for m in plan["moves"]]
    for (_, row), move in zip(moves, plan["moves"], strict=True):
        cells = [text_of(cell) for cell in re.findall(r"<td>(.*?)</td>", row)]
        assert cells[1:5] == [move["workload"], f"{move['node']} ({move['pool']})",
                              move["toPool"], str(move["gpus"])]
        assert cells[5].startswith("away from its home, pool inference")
        assert cells[5].endswith("room on gpu-inf-2")
    freed = re.findall(r'data-freed-node="([^"]+)"', drawn)
    assert freed == [node["node"] for node in plan["freedNodes"]] == ["gpu-hyb-1"]
    words = text_of(drawn)
    # The policy leaves rebalance off: the page says so, and that nothing is evicted.
    assert "rebalance.enabled: false; this is what it would plan if enabled" in words
    assert "dry run: nothing is evicted" in words
    assert "2 pods move home, freeing 1 node (8 GPUs): gpu-hyb-1." in words
    # Every pod that stays is on the page with the command's own reason.
    stays = re.findall(r'data-stays="([^"]+)"', drawn)
    assert sorted(stays) == sorted(f"{s['namespace']}/{s['name']}" for s in plan["skipped"])
    for stayer in plan["skipped"]:
        assert stayer["reason"] in words
    # Drawn after the workload's own plan: the verdict and pools come first.
    assert html.index('id="verdict"') < html.index('class="pools"') \
        < html.index('id="rebalance"')


def test_when_nothing_moves_the_page_says_so_and_why(tmp_path: Path) -> None:
    tainted = with_home_tainted(tmp_path)
    policy = tmp_path / "policy.yaml"
    policy.write_text(ENABLED_POLICY)
    drawn = section(page(tmp_path, tainted, "deploy/ml/chat", "--policy", str(policy)))
    words = text_of(drawn)
    assert "Nothing moves: no node of an unprotected pool can be emptied now." in words
    assert "rebalance-moves" not in drawn and "rebalance-frees" not in drawn
    assert "rebalance.enabled: false" not in words
    assert "rebalance.enabled: true: the reconciler that holds the Lease" in words
    assert "Why nothing moves" in words
    # The reason shared by the most pods comes first.
    first = re.search(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", drawn)
    assert text_of(first.group(2)) == ("node gpu-hyb-1 is not emptied: inference has no "
                                       "room for its 2 GPU pods (4 GPUs)")
    assert re.findall(r'data-stays="([^"]+)"', first.group(1)) == [
        "ml/llm-serve-7d9f8c-ex4k", "ml/llm-serve-7d9f8c-fx5k"]


def test_the_example_page_has_no_rebalance_section(tmp_path: Path) -> None:
    """The built-in policy leaves rebalance at its default and nothing in the example could
    move: the section would only distract from the scale-down."""
    html = page(tmp_path, EXAMPLE_STATE, "deploy/ml/embedder")
    assert 'id="rebalance"' not in html and "Rebalance" not in html


def test_a_policy_that_sets_rebalance_gets_the_section_even_when_nothing_moves(
        tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(ENABLED_POLICY.replace("protected: true}", "protected: true}\n"
                      "- {name: training, deletionCost: -1000}"))
    words = text_of(section(page(tmp_path, EXAMPLE_STATE, "deploy/ml/embedder",
                                 "--policy", str(policy))))
    assert "Nothing moves" in words and "Why nothing moves" in words


def test_the_page_lists_the_commonest_reasons_and_points_to_the_command_for_the_rest() -> None:
    stayers = [Stayer("ml", f"pod-{reason}-{i}", f"node-{reason}", f"reason {reason}")
               for reason in range(TOP_REASONS + 2) for i in range(reason + 1)]
    drawn = render_rebalance_html(RebalancePlan(skipped=stayers), Policy())
    rows = re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", drawn)
    commonest = list(range(TOP_REASONS + 1, 1, -1))
    assert [text for _, text in rows] == [f"reason {r}" for r in commonest]
    # Three pods are named per reason, then how many more.
    assert text_of(rows[0][0]) == ("ml/pod-6-0 on node-6, ml/pod-6-1 on node-6, "
                                   "ml/pod-6-2 on node-6 and 4 more")
    assert "2 more reasons, for 3 more pods: python -m webhook rebalance --dry-run lists " \
        "every pod and why." in text_of(drawn)
