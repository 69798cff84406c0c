"""Memory sized for the cluster: the chart's requests and limits follow expectedPods by the
sizing table the memory check judges by (webhook/cluster/memory_budget.py), the kustomize
base ships the chart's defaults, and docs/performance.md shows the same figures."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import yaml

from tests.support.chart import find, render
from webhook.cluster.memory_budget import MIB, RECONCILER, SERVE, WARN_SHARE, check_memory

REPO = Path(__file__).resolve().parents[2]
FOOTPRINTS = {"webhook": SERVE, "reconciler": RECONCILER}
UNITS = {"Mi": MIB, "Gi": 1024 * MIB}


def quantity(text: str) -> int:
    number, unit = re.fullmatch(r"(\d+)(Mi|Gi)", text).groups()
    return int(number) * UNITS[unit]


def memory_of(deployment: dict) -> tuple[int, int]:
    resources = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]
    return quantity(resources["requests"]["memory"]), quantity(resources["limits"]["memory"])


def chart_memory(pods: int | None, *sets: str) -> dict[str, tuple[int, int]]:
    assignments = (*((f"expectedPods={pods}",) if pods is not None else ()), *sets)
    objects = render(sets=assignments)
    return {component: memory_of(find(objects, "Deployment", f"poolguard-{component}"))
            for component in FOOTPRINTS}


@pytest.mark.parametrize("pods", [0, 10_000, 100_000, 150_000, 123_457])
def test_the_chart_sizes_memory_for_expected_pods_as_the_check_judges(pods: int) -> None:
    for component, (request, limit) in chart_memory(pods).items():
        need = FOOTPRINTS[component].need(pods)
        assert request == math.ceil(need / (64 * MIB)) * 64 * MIB, component
        assert limit == math.ceil(need / WARN_SHARE / (64 * MIB)) * 64 * MIB, component
        # the limit the chart gives for N pods holds N pods without a warning
        assert check_memory(FOOTPRINTS[component], limit, None, pods).ok, component


def test_the_defaults_hold_a_100k_pod_cluster() -> None:
    for component, (_, limit) in chart_memory(None).items():
        assert FOOTPRINTS[component].pods_within(limit) >= 100_000, component


def test_memory_set_in_resources_wins_over_expected_pods() -> None:
    sized = chart_memory(10_000, "webhook.resources.limits.memory=3Gi",
                         "reconciler.resources.requests.memory=1Gi")
    assert sized["webhook"][1] == 3 * 1024 * MIB
    assert sized["reconciler"][0] == 1024 * MIB


@pytest.mark.parametrize("component", FOOTPRINTS)
def test_the_kustomize_base_ships_memory_for_100k_pods(component: str) -> None:
    documents = yaml.safe_load_all((REPO / "manifests" / "base" / f"{component}.yaml").read_text())
    deployment = next(d for d in documents if d and d["kind"] == "Deployment")
    _, limit = memory_of(deployment)
    assert FOOTPRINTS[component].pods_within(limit) >= 100_000


def test_the_sizing_table_shows_the_checks_figures() -> None:
    text = (REPO / "docs" / "performance.md").read_text()
    section = text[text.index("## Sizing"):]
    section = section[:section.index("\n## ", 1)]
    for pods in (10_000, 50_000, 100_000, 150_000):
        need = SERVE.need(pods) // MIB
        limit = math.ceil(SERVE.need(pods) / WARN_SHARE / (64 * MIB)) * 64
        assert f"| {pods:,} | {need} MiB | {limit}Mi |" in section, pods
