"""The alert rules under Prometheus' own tool: the PromQL parses, and the alerts fire.

promtool is Debian's (its prometheus package) or built from the Go module proxy, by `make
promtool` (mk/chart.mk; `make test` does it first). `promtool check rules` parses every
expression; `promtool test rules` feeds tests/deploy/prometheus-rules-test.yaml's synthetic
series through the shipped rule file and compares the alerts that fire, with their labels
and rendered annotations.
(tests/deploy/test_metrics_contract.py checks the metric names against live servers.)
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "charts" / "poolguard" / "files" / "prometheus-rules.yaml"
UNIT_TESTS = Path(__file__).with_name("prometheus-rules-test.yaml")
GOMOD = REPO / "tests" / "deploy" / "gomod" / "promtool" / "go.mod"
VERSION = re.search(r"^require github\.com/prometheus/prometheus (\S+)$", GOMOD.read_text(),
                    re.M).group(1)
CACHE = Path.home() / ".cache" / "poolguard-e2e"
# `make promtool`: the one built from Go, else Debian's (mk/chart.mk checks it first).
PROMTOOLS = (CACHE / f"promtool-{VERSION}" / "promtool", CACHE / "promtool-debian" / "promtool")


def promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    found = [path for path in PROMTOOLS if path.is_file()]
    if not found:
        if shutil.which("go") is None and shutil.which("apt-get") is None:
            pytest.skip("SKIPPED: neither Go nor apt-get is installed, so there is no "
                        "promtool; the alert rules are NOT checked on this machine")
        built = subprocess.run(["make", "--no-print-directory", "promtool"], cwd=REPO,
                               capture_output=True, text=True, timeout=3600, check=False)
        found = [path for path in PROMTOOLS if path.is_file()]
        assert built.returncode == 0 and found, built.stdout + built.stderr
    return subprocess.run([str(found[0]), *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=120, check=False)


def test_every_rule_parses() -> None:
    result = promtool("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    rules = sum(len(g["rules"]) for g in yaml.safe_load(RULES.read_text())["groups"])
    assert f"SUCCESS: {rules} rules found" in result.stdout


def test_alerts_fire_on_synthetic_series() -> None:
    result = promtool("test", "rules", UNIT_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_unit_tests_cover_most_alerts_and_would_catch_a_broken_rule(tmp_path: Path) -> None:
    tests = yaml.safe_load(UNIT_TESTS.read_text())["tests"]
    covered = {t["alertname"] for test in tests for t in test["alert_rule_test"]}
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    assert covered <= alerts and len(covered) >= 6, covered
    # The same unit tests against a rule file whose certificate threshold is wrong must fail.
    broken = tmp_path / "files" / "prometheus-rules.yaml"
    broken.parent.mkdir()
    broken.write_text(RULES.read_text().replace("< 3 * 86400", "< 1 * 86400"))
    mutated = tmp_path / "tests" / "rules-test.yaml"
    mutated.parent.mkdir()
    document = yaml.safe_load(UNIT_TESTS.read_text())
    document["rule_files"] = [str(broken)]
    mutated.write_text(yaml.safe_dump(document))
    result = promtool("test", "rules", mutated)
    assert result.returncode != 0
    assert "PoolguardServingCertificateExpiresSoon" in result.stdout + result.stderr
