"""`plan` outputs and exit codes: the HTML page (in headless Chromium), CI gating, the audit."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from webhook.cluster.state import EXAMPLE_STATE

NOW = "2026-11-22T12:00:00Z"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking", "--no-first-run"]
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "plan-page.png"


def plan(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", "plan", *args],
                          capture_output=True, text=True, timeout=60, **kwargs)


def example(*args: str) -> subprocess.CompletedProcess:
    return plan("--state", str(EXAMPLE_STATE), "--now", NOW, *args)


# --- exit codes and CI gating ----------------------------------------------------------


def test_fail_on_deny_exits_3_only_when_the_verdict_denies():
    denied = example("--workload", "deploy/ml/llm-serve", "--replicas", "3", "--fail-on-deny")
    assert denied.returncode == 3 and "Verdict: DENIED" in denied.stdout
    allowed = example("--workload", "deploy/ml/llm-serve", "--replicas", "4", "--fail-on-deny")
    assert allowed.returncode == 0 and "Verdict: ALLOWED" in allowed.stdout
    # Without the flag, the verdict does not change the exit code.
    assert example("--workload", "deploy/ml/llm-serve", "--replicas", "3").returncode == 0


def test_replicas_delta_is_relative_to_the_current_count():
    result = example("--workload", "deploy/ml/llm-serve", "--replicas-delta", "-3", "-o", "json")
    assert json.loads(result.stdout)["replicas"] == {"from": 6, "to": 3}


def test_a_replicas_delta_below_zero_is_refused_naming_the_workload():
    result = example("--workload", "deploy/ml/llm-serve", "--replicas-delta", "-10")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == ("error: --replicas-delta -10: deploy/ml/llm-serve has 6 replicas, "
                             "so the target would be -4; use a delta of -6 or more, or "
                             "--replicas 0\n")
    audit = example("--all-workloads", "--replicas-delta", "-4")
    assert (audit.returncode, audit.stdout) == (2, "")
    assert audit.stderr == ("error: --replicas-delta -4: LeaderWorkerSet/ml/llm-multi has 3 "
                            "replicas, so the target would be -1; use a delta of -3 or more, "
                            "or --replicas 0\n")


def test_output_to_a_file(tmp_path):
    target = tmp_path / "plan.json"
    result = example("--workload", "deploy/ml/llm-serve", "--replicas", "3", "-o", "json",
                     str(target))
    assert result.returncode == 0 and result.stdout == ""
    assert json.loads(target.read_text())["safeReplicas"] == 4


@pytest.mark.parametrize(("output", "expected"), [
    (["xml"], "--output 'xml': choose from text, json, html"),
    (["json", "a", "b"], "expected a format and at most one file"),
])
def test_bad_output_choice_is_a_usage_error(output, expected):
    result = example("--workload", "deploy/ml/llm-serve", "--replicas", "3", "-o", *output)
    assert result.returncode == 2 and expected in result.stderr


def test_a_closed_pipe_ends_quietly_with_the_verdict_exit_code():
    # `plan ... | head -1` where head has gone: the write fails with EPIPE.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "webhook", "plan", "--state", str(EXAMPLE_STATE), "--now",
             NOW, "--workload", "deploy/ml/llm-serve", "--replicas", "3", "--fail-on-deny"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60)
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 3


def test_an_empty_state_file_says_so(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n")
    result = plan("--state", str(empty), "--workload", "deploy/ml/x", "--replicas", "1")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: state file {empty}: it is empty")


def test_a_state_file_without_workloads_says_so(tmp_path):
    nodes_only = tmp_path / "nodes.yaml"
    nodes_only.write_text(yaml.safe_dump({"kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}]}))
    result = plan("--state", str(nodes_only), "--workload", "deploy/ml/x", "--replicas", "1")
    assert result.returncode == 2
    assert ("Deployment ml/x: not found in the cluster state, which holds no Deployments, "
            "ReplicaSets, StatefulSets, LeaderWorkerSets, Rollouts or CloneSets") in result.stderr


# --- the audit over every workload ----------------------------------------------------


def test_audit_lists_every_workload_worst_first_and_gates():
    result = example("--all-workloads", "--replicas-delta", "-3", "--fail-on-deny")
    assert result.returncode == 3
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["WORKLOAD", "REPLICAS", "VERDICT", "DETAIL"]
    assert lines[1].startswith("Deployment ml/embedder") and "DENIED" in lines[1]
    assert lines[2].split() == ["Deployment", "ml/llm-serve", "6", "->", "3", "DENIED",
                                "protectedLast;", "safe", "down", "to", "4", "replicas"]
    assert ["ReplicaSet", "ml/gpu-probe", "3", "->", "0", "ALLOWED"] in [
        line.split() for line in lines]
    # ReplicaSets a Deployment or a Rollout owns, and a LeaderWorkerSet's StatefulSets, are
    # planned through their owner.
    assert "embedder-5f6c7d8e9" not in result.stdout
    assert "reranker-6d4b8c7f5" not in result.stdout
    assert "StatefulSet ml/llm-multi" not in result.stdout
    assert lines[-1] == ("6 workloads: 2 denied, 0 allowed despite violations, 4 allowed, "
                         "0 not checked.")


def test_audit_of_the_next_scale_down_as_json():
    result = example("--all-workloads", "--replicas-delta", "-1", "-o", "json")
    documents = json.loads(result.stdout)
    assert [(d["workload"]["name"], d["replicas"]["to"], d["allowed"]) for d in documents] == [
        ("embedder", 4, True), ("llm-serve", 5, True), ("llm-multi", 2, True),
        ("gpu-probe", 2, True), ("reranker", 3, True), ("kv-cache", 2, True)]
    assert example("--all-workloads", "--replicas-delta", "-1", "--fail-on-deny").returncode == 0


def test_html_draws_one_workload_only():
    result = example("--all-workloads", "--replicas-delta", "-1", "-o", "html")
    assert result.returncode == 2 and "--output html draws one workload" in result.stderr


# --- the HTML page ---------------------------------------------------------------------


def html_page(tmp_path: Path, workload: str, replicas: int) -> Path:
    page = tmp_path / "plan.html"
    result = example("--workload", workload, "--replicas", str(replicas), "-o", "html",
                     str(page))
    assert result.returncode == 0, result.stderr
    return page


def test_html_page_is_self_contained(tmp_path):
    text = html_page(tmp_path, "deploy/ml/llm-serve", 3).read_text()
    assert "default-src 'none'" in text  # the browser would refuse any fetch anyway
    assert not re.search(r"https?:|src=|url\(|@import|<script|<link", text)


def chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": "disabled:"})


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs "
                    "it with apt-get where it can)")
def test_html_page_in_headless_chromium(tmp_path):
    page = html_page(tmp_path, "deploy/ml/llm-serve", 3)
    profile = f"--user-data-dir={tmp_path / 'profile'}"
    dom = chromium(profile, "--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr
    html = dom.stdout
    # The verdict and the fix on top, before any pool.
    assert html.index('id="verdict"') < html.index('class="pools"')
    assert "DENIED" in html and "<b>Fix, any of:</b><ul><li>scale to 4 replicas for now" in html
    # Nodes grouped by pool, protected pool first, each pod where it runs.
    pools = re.findall(r'data-pool="([^"]+)"', html)
    assert pools == ["inference", "hybrid"]
    nodes = re.findall(r'data-node="([^"]+)"', html)
    assert nodes == ["gpu-inf-1", "gpu-inf-2", "gpu-hyb-1", "gpu-hyb-2"]
    fates = dict(re.findall(r'data-pod="([^"]+)" data-fate="([^"]+)"', html))
    assert fates["llm-serve-7c9d8f6b5-h2w5d"] == "victim"
    assert fates["llm-serve-7c9d8f6b5-k4z9s"] == "survives"
    assert fates["llm-serve-7c9d8f6b5-b9q4m"] == "possible-victim"
    # Victims numbered in deletion order.
    numbers = re.findall(r'data-pod="([^"]+)"[^>]*><span class="order">(\d+)</span>', html)
    assert sorted(numbers, key=lambda n: n[1]) == [("llm-serve-7c9d8f6b5-h2w5d", "1"),
                                                   ("llm-serve-7c9d8f6b5-j6t1r", "2"),
                                                   ("llm-serve-7c9d8f6b5-x7k2p", "3")]
    shot = tmp_path / "plan.png"
    result = chromium(profile, f"--screenshot={shot}", "--window-size=1200,700", page.as_uri())
    assert result.returncode == 0, result.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_html_page_shows_the_replicaset_split_of_a_rollout(tmp_path):
    page = html_page(tmp_path, "deploy/ml/embedder", 2)
    dom = chromium(f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri())
    html = dom.stdout
    split = json.loads(example("--workload", "deploy/ml/embedder", "--replicas", "2", "-o",
                               "json").stdout)["replicaSets"]
    assert len(split) == 2  # a rollout: the controller splits the change
    assert re.findall(r"<tr><td>([^<]+)</td><td>(\d+)</td><td>(\d+)</td></tr>", html) == [
        (name, str(sizes["from"]), str(sizes["to"])) for name, sizes in split.items()]
    assert html.count('<span class="rs">[embedder-') == 6  # each pod names its ReplicaSet


def test_docs_keep_a_screenshot_of_the_page():
    assert DOCS_SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def chips(html: str) -> dict[str, str]:
    """Each pod's chip (its inner HTML) by pod name."""
    return dict(re.findall(r'<span class="pod [a-z-]+" data-pod="([^"]+)"[^>]*>(.*?)</span>'
                           r'(?=\s*(?:<span class="pod |</div>|</section>))', html, re.S))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_html_page_says_each_pods_cost_and_why(tmp_path):
    page = html_page(tmp_path, "deploy/ml/llm-serve", 3)
    html = chromium(f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                    page.as_uri()).stdout
    by_pod = chips(html)
    assert set(by_pod) == {p["name"] for p in json.loads(example(
        "--workload", "deploy/ml/llm-serve", "--replicas", "3", "-o", "json").stdout)["pods"]}
    # the example's hybrid pods carry their node ranks (the hybrid pool consolidates)
    assert '<span class="cost">cost -44969438</span>' in by_pod["llm-serve-7c9d8f6b5-h2w5d"]
    assert '<span class="reason">deletion cost -44969438 &lt; 1000</span>' in by_pod[
        "llm-serve-7c9d8f6b5-h2w5d"]
    # a possible victim says why it is possible: the victim it is tied with
    assert re.search(r'<span class="reason">tied with llm-serve-7c9d8f6b5-x7k2p on rules 1-5: '
                     r"1 of these 2 are deleted", by_pod["llm-serve-7c9d8f6b5-b9q4m"])
    assert '<span class="cost">cost 2000</span>' in by_pod["llm-serve-7c9d8f6b5-k4z9s"]
    assert "reason" not in by_pod["llm-serve-7c9d8f6b5-k4z9s"]  # a survivor needs no why


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_html_page_numbers_deletions_within_each_replicaset(tmp_path):
    page = html_page(tmp_path, "deploy/ml/embedder", 2)
    html = chromium(f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
                    page.as_uri()).stdout
    numbers = dict(re.findall(r'data-pod="([^"]+)"[^>]*><span class="order">(\d+)</span>',
                              html))
    assert numbers == {"embedder-5f6c7d8e9-p2x2q": "1", "embedder-5f6c7d8e9-p1x1q": "2",
                       "embedder-5f6c7d8e9-p0x0q": "3", "embedder-6a7b8c9d0-p2x2q": "1"}
    assert "numbered in deletion order within its ReplicaSet" in html


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
def test_html_page_draws_unscheduled_pods_apart_from_the_pools(tmp_path):
    page = html_page(tmp_path, "rs/ml/gpu-probe", 1)
    profile = f"--user-data-dir={tmp_path / 'profile'}"
    html = chromium(profile, "--dump-dom", page.as_uri()).stdout
    pools = re.findall(r'<section class="pool[^"]*" data-pool="([^"]+)">(.*?)</section>', html,
                       re.S)
    assert [name for name, _ in pools] == ["inference", "hybrid"]
    assert all("gpu-probe-2abcd" not in body for _, body in pools)
    apart = re.search(r'<section class="unscheduled" id="unscheduled">(.*?)</section>', html,
                      re.S)
    assert apart is not None and 'data-pod="gpu-probe-2abcd"' in apart.group(1)
    assert "not scheduled" in chips(html)["gpu-probe-2abcd"]
    shot = tmp_path / "plan.png"
    result = chromium(profile, f"--screenshot={shot}", "--window-size=1200,700", page.as_uri())
    assert result.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_violation_gives_its_problem_apart_from_its_fix(tmp_path):
    """JSON `problem` is the message without its fix; the page shows the problem under the
    rule and the fix's options once, in their own list."""
    document = json.loads(example("--workload", "deploy/ml/llm-serve", "--replicas", "3",
                                  "-o", "json").stdout)
    violations = document["violations"]
    assert violations and all(v["fixes"] for v in violations)
    for violation in violations:
        assert violation["message"].startswith(violation["problem"])
        assert "fix:" in violation["message"] and "fix:" not in violation["problem"]
    text = html_page(tmp_path, "deploy/ml/llm-serve", 3).read_text()
    for violation in violations:
        assert re.search(r'<p class="why">\[' + re.escape(violation["rule"]) + r"\] [^<]*</p>",
                         text)
    assert "; fix:" not in text
