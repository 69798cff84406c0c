"""`serve` reads its container's memory limit (a fake cgroup here) and says, in /readyz and
/metrics and its log, when the limit does not hold the caches; it stays ready (fail-open)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.cgroups import cgroup_v1, cgroup_v2
from tests.support.serving import running_server, verifying_session
from webhook.cluster.memory_budget import MIB, SERVE
from webhook.cluster.state import EXAMPLE_STATE


def gauges(text: str) -> dict[str, float]:
    return {sample.name: sample.value for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name.startswith("poolguard_memory_")}


def test_a_limit_too_low_is_named_in_readyz_metrics_and_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 100 * MIB  # below what two workers need with the example's pods
    monkeypatch.setenv("POOLGUARD_CGROUP_ROOT",
                       str(cgroup_v2(tmp_path / "cgroup", str(limit), 60 * MIB)))
    with running_server(tmp_path, "--state", str(EXAMPLE_STATE), workers=2) as (url, ca, _):
        session = verifying_session(ca)
        ready = session.get(url + "/readyz", timeout=5)
        assert ready.status_code == 200 and ready.json()["ready"] is True  # still serving
        warning = ready.json()["memory"]
        assert warning.startswith("the memory limit 100 MiB is too low for ")
        assert "2 caches of them need" in warning
        measured = gauges(session.get(url + "/metrics", timeout=5).text)
        assert measured["poolguard_memory_limit_bytes"] == limit
        assert measured["poolguard_memory_used_bytes"] == 60 * MIB
        assert measured["poolguard_memory_projected_bytes"] > limit * 0.9
        assert measured["poolguard_memory_projected_bytes"] >= SERVE.need(0, caches=2)
    log = (tmp_path / "server.log").read_text()
    assert "memory: container limit 100 MiB (cgroup v2" in log
    assert "WARNING memory: the memory limit 100 MiB is too low" in log


def test_a_limit_with_room_is_ok(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    limit = 2048 * MIB
    monkeypatch.setenv("POOLGUARD_CGROUP_ROOT",
                       str(cgroup_v1(tmp_path / "cgroup", str(limit), 200 * MIB)))
    with running_server(tmp_path, "--state", str(EXAMPLE_STATE)) as (url, ca, _):
        session = verifying_session(ca)
        assert session.get(url + "/readyz", timeout=5).json()["memory"] == "ok"
        measured = gauges(session.get(url + "/metrics", timeout=5).text)
        assert measured["poolguard_memory_limit_bytes"] == limit
    assert "room for about" in (tmp_path / "server.log").read_text()
