"""The memory check: the container's cgroup read (fake cgroup directories), the sizing
model judged, and what the watch logs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.support import factories as f
from tests.support.cgroups import V1_UNLIMITED, cgroup_v1, cgroup_v2
from tests.support.kubeapi.server import FakeKubeAPI
from webhook.cluster.cgroup import ContainerMemory, read_container_memory
from webhook.cluster.kubeclient import api_client_from
from webhook.cluster.live import LiveCluster
from webhook.cluster.memory_budget import (
    MIB,
    RECONCILER,
    SERVE,
    WARN_SHARE,
    Footprint,
    check_memory,
)
from webhook.cluster.memory_watch import MemoryWatch

# ----- reading the cgroup ----------------------------------------------------------------

def test_cgroup_v2_limit_and_working_set(tmp_path: Path) -> None:
    root = cgroup_v2(tmp_path, str(512 * MIB), 300 * MIB, inactive_file=40 * MIB)
    memory = read_container_memory(root)
    assert memory.limit == 512 * MIB
    assert memory.used == 260 * MIB  # usage less inactive file pages, as the kubelet counts
    assert memory.source == f"cgroup v2 {root / 'memory.max'}"


def test_cgroup_v2_without_a_limit(tmp_path: Path) -> None:
    memory = read_container_memory(cgroup_v2(tmp_path, "max", 100 * MIB))
    assert memory.limit is None and memory.used == 100 * MIB


def test_cgroup_v1_is_the_fallback(tmp_path: Path) -> None:
    root = cgroup_v1(tmp_path, str(1024 * MIB), 700 * MIB, total_inactive_file=100 * MIB)
    memory = read_container_memory(root)
    assert (memory.limit, memory.used) == (1024 * MIB, 600 * MIB)
    assert memory.source == f"cgroup v1 {root / 'memory' / 'memory.limit_in_bytes'}"


def test_cgroup_v1_unlimited_is_no_limit(tmp_path: Path) -> None:
    memory = read_container_memory(cgroup_v1(tmp_path, V1_UNLIMITED, 10 * MIB))
    assert memory.limit is None and memory.used == 10 * MIB


def test_no_memory_cgroup_is_named_not_guessed(tmp_path: Path) -> None:
    memory = read_container_memory(tmp_path)
    assert memory == ContainerMemory(limit=None, used=None,
                                     source=f"no memory cgroup under {tmp_path}")


def test_unreadable_figures_are_unknown_not_zero(tmp_path: Path) -> None:
    root = cgroup_v2(tmp_path, "garbage", 1)
    (root / "memory.current").unlink()
    memory = read_container_memory(root)
    assert memory.limit is None and memory.used is None


def test_the_environment_names_the_cgroup_root(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POOLGUARD_CGROUP_ROOT", str(cgroup_v2(tmp_path, str(64 * MIB), 1)))
    assert read_container_memory().limit == 64 * MIB


# ----- the sizing model and the check ----------------------------------------------------

def test_the_shipped_limit_does_not_hold_a_100k_pod_cluster() -> None:
    result = check_memory(SERVE, limit=512 * MIB, used=200 * MIB, pods=100_000)
    assert not result.ok
    assert result.warning.startswith("the memory limit 512 MiB is too low for 100,000 pods")
    assert "docs/performance.md#sizing" in result.warning
    assert result.projected == SERVE.need(100_000)


def test_a_limit_with_room_is_ok() -> None:
    result = check_memory(SERVE, limit=4096 * MIB, used=300 * MIB, pods=20_000)
    assert result.ok and result.warning is None


def test_every_worker_keeps_a_cache_of_its_own() -> None:
    pods = 30_000
    one, three = (check_memory(SERVE, 4096 * MIB, None, pods, caches=n) for n in (1, 3))
    cache = SERVE.per_cache + pods * SERVE.per_10k_pods // 10_000
    assert three.projected - one.projected == 2 * cache


def test_a_working_set_near_the_limit_warns_even_when_the_pods_fit() -> None:
    limit = 1024 * MIB
    result = check_memory(SERVE, limit, used=int(limit * 0.95), pods=0)
    assert result.warning.startswith("the container uses 973 MiB of its 1,024 MiB memory limit")


def test_no_limit_never_warns() -> None:
    assert check_memory(SERVE, limit=None, used=10**12, pods=10**6).ok


@given(pods=st.integers(0, 2_000_000), caches=st.integers(1, 8),
       limit_mib=st.integers(64, 65_536))
def test_the_check_warns_exactly_past_the_share_of_the_limit(pods: int, caches: int,
                                                             limit_mib: int) -> None:
    limit = limit_mib * MIB
    result = check_memory(SERVE, limit, used=0, pods=pods, caches=caches)
    assert result.ok == (SERVE.need(pods, caches) <= limit * WARN_SHARE)


@given(limit_mib=st.integers(64, 65_536), caches=st.integers(1, 8))
def test_pods_within_is_the_largest_count_that_passes(limit_mib: int, caches: int) -> None:
    limit = limit_mib * MIB
    most = SERVE.pods_within(limit, caches)
    if most:
        assert check_memory(SERVE, limit, 0, most, caches).ok
    if SERVE.need(0, caches) <= limit * WARN_SHARE:
        assert not check_memory(SERVE, limit, 0, most + 2, caches).ok


def test_the_reconciler_has_its_own_footprint() -> None:
    assert isinstance(RECONCILER, Footprint)
    assert RECONCILER.need(10_000) == RECONCILER.fixed + RECONCILER.per_cache + (
        RECONCILER.per_10k_pods)


# ----- the watch: read, judge, report, log on change -------------------------------------

def test_the_watch_reports_every_check_and_logs_only_changes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = cgroup_v2(tmp_path, str(512 * MIB), 100 * MIB)
    pods = [0]
    reported = []
    watch = MemoryWatch(SERVE, lambda: pods[0], on_check=reported.append,
                        read=lambda: read_container_memory(root))
    with caplog.at_level(logging.INFO, logger="poolguard"):
        assert watch.check().ok
        assert "memory: container limit 512 MiB (cgroup v2" in caplog.text
        assert "room for about" in caplog.text
        pods[0] = 200_000
        caplog.clear()
        for _ in range(3):
            watch.check()
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "too low for 200,000 pods" in warnings[0].getMessage()
        caplog.clear()
        pods[0] = 1_000
        assert watch.check().ok
        assert "the limit holds the cache again" in caplog.text
    assert len(reported) == 5 and reported[-1].ok and not reported[1].ok


def test_the_watch_says_when_there_is_no_limit(tmp_path: Path,
                                               caplog: pytest.LogCaptureFixture) -> None:
    watch = MemoryWatch(SERVE, lambda: 0, read=lambda: read_container_memory(tmp_path))
    with caplog.at_level(logging.INFO, logger="poolguard"):
        watch.check()
    assert "no container memory limit (no memory cgroup under" in caplog.text


# ----- the count: the pods the first list will bring, before they are all in ------------

def test_the_pod_count_knows_the_whole_list_from_its_first_page(
        api: FakeKubeAPI, kubeconfig: str) -> None:
    """A cluster too big for the limit is judged at its first page of 100 pods, not once
    the cache holds them all (by then the container may be OOM-killed)."""
    api.put(*(f.pod(f"p-{index:03}", node_name="n1") for index in range(250)))
    client = api_client_from(kubeconfig)
    cluster = LiveCluster(client)
    during: list[tuple[int, int]] = []

    def seen(resource: str, *_: object) -> None:
        if resource == "pods" and not during:  # the first pod applied: one page is in
            during.append((len(cluster.all_pods()), cluster.pod_count()))

    cluster.on_event(seen)
    try:
        cluster.start()
        assert cluster.wait_for_sync(10)
        assert cluster.pod_count() == 250
    finally:
        cluster.stop()
        client.close()
    cached, counted = during[0]
    assert cached < 250 and counted == 250
