"""`make bench-scale`'s pure parts: its settings, the cluster it plans, histogram quantiles.

The run itself needs the e2e control plane and half an hour; these check what it is told
and how it reads the figures, in milliseconds.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.scale_plan import (
    BIG_NAME,
    BIG_NAMESPACE,
    DEPLOYMENT_SIZE,
    Settings,
    SettingsError,
    bucket_range,
    counter_sum,
    delta,
    histograms,
    load_range,
    node_pools,
    percentile_ms,
    quantile,
    workloads,
)

ROOT = Path(__file__).resolve().parents[2]

EXPOSITION = """\
# HELP poolguard_admission_duration_seconds Time to answer an admission request
# TYPE poolguard_admission_duration_seconds histogram
poolguard_admission_duration_seconds_bucket{endpoint="/mutate-pods",le="0.001"} 80.0
poolguard_admission_duration_seconds_bucket{endpoint="/mutate-pods",le="0.01"} 99.0
poolguard_admission_duration_seconds_bucket{endpoint="/mutate-pods",le="+Inf"} 100.0
poolguard_admission_duration_seconds_count{endpoint="/mutate-pods"} 100.0
poolguard_admission_duration_seconds_sum{endpoint="/mutate-pods"} 0.2
poolguard_admission_duration_seconds_bucket{endpoint="/validate-scale",le="0.001"} 0.0
poolguard_admission_duration_seconds_bucket{endpoint="/validate-scale",le="0.01"} 0.0
poolguard_admission_duration_seconds_bucket{endpoint="/validate-scale",le="+Inf"} 0.0
# HELP apiserver_request_total Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",resource="pods",subresource="",verb="POST"} 300
apiserver_request_total{code="201",resource="pods",subresource="binding",verb="POST"} 250
apiserver_request_total{code="500",resource="pods",subresource="",verb="POST"} 7
"""


def test_defaults_are_the_issue_s_cluster() -> None:
    settings = Settings.from_env({})
    assert (settings.pods, settings.nodes, settings.big) == (30_000, 1_000, 5_000)
    assert settings.timeout == 2_400


def test_numbers_may_be_written_with_separators() -> None:
    settings = Settings.from_env({"BENCH_SCALE_PODS": "60_000", "BENCH_SCALE_NODES": "2,000"})
    assert (settings.pods, settings.nodes) == (60_000, 2_000)


def test_the_big_deployment_never_outgrows_the_run() -> None:
    assert Settings.from_env({"BENCH_SCALE_PODS": "600", "BENCH_SCALE_NODES": "40"}).big == 600


@pytest.mark.parametrize(("environ", "message"), [
    ({"BENCH_SCALE_PODS": "lots"}, "BENCH_SCALE_PODS='lots': not a whole number"),
    ({"BENCH_SCALE_NODES": "0"}, "BENCH_SCALE_NODES=0: must be 1 or more"),
    ({"BENCH_SCALE_NODES": "5"}, "BENCH_SCALE_NODES=5: at least 6"),
    ({"BENCH_SCALE_PODS": "70000"}, "BENCH_SCALE_PODS=70000: more than 60 per node on 1000 "
                                    "nodes; raise BENCH_SCALE_NODES to at least 1167"),
    ({"BENCH_SCALE_TIMEOUT": "60"}, "BENCH_SCALE_TIMEOUT=60: at least 300 seconds"),
])
def test_out_of_bounds_settings_name_the_variable(environ: dict[str, str],
                                                  message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        Settings.from_env(environ)
    assert message in str(raised.value)


def test_bench_scale_refuses_bad_settings_before_starting_anything() -> None:
    done = subprocess.run([sys.executable, "-m", "bench.bench_scale"], cwd=ROOT, text=True,
                          capture_output=True, timeout=60,
                          env={"BENCH_SCALE_NODES": "3", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2
    assert done.stderr.strip() == "bench-scale: BENCH_SCALE_NODES=3: at least 6 (two nodes " \
                                  "per pool)"
    assert done.stdout == ""


def test_nodes_are_split_like_the_e2e_pools() -> None:
    assert node_pools(1_000) == {"inference": 375, "hybrid": 375, "training": 250}
    assert node_pools(9) == {"inference": 4, "hybrid": 3, "training": 2}


@given(st.integers(6, 5_000))
def test_every_node_gets_a_pool(nodes: int) -> None:
    pools = node_pools(nodes)
    assert sum(pools.values()) == nodes
    assert min(pools.values()) >= 2


@given(st.integers(6, 400), st.integers(1, 60), st.integers(1, 6_000))
def test_workloads_add_up_to_the_pods_asked_for(nodes: int, per_node: int, big: int) -> None:
    settings = Settings(pods=nodes * per_node, nodes=nodes, big=min(big, nodes * per_node))
    planned = workloads(settings)
    assert sum(w.replicas for w in planned) == settings.pods
    first = planned[0]
    assert (first.namespace, first.name, first.replicas) == (BIG_NAMESPACE, BIG_NAME,
                                                             settings.big)
    assert first.pools == ("inference", "hybrid")
    assert all(0 < w.replicas <= DEPLOYMENT_SIZE for w in planned[1:])
    assert len({(w.namespace, w.name) for w in planned}) == len(planned)


def test_the_default_cluster_mixes_pinned_and_unpinned_deployments() -> None:
    planned = workloads(Settings())
    assert len(planned) == 26
    assert {w.pools for w in planned[1:]} == {("inference", "hybrid"), ("training",), None}


def test_quantiles_interpolate_within_the_bucket_as_prometheus_does() -> None:
    buckets = histograms(EXPOSITION, "poolguard_admission_duration_seconds", "endpoint")
    pods = buckets["/mutate-pods"]
    assert pods == [(0.001, 80.0), (0.01, 99.0), (float("inf"), 100.0)]
    assert quantile(pods, 0.5) == pytest.approx(0.001 * 50 / 80)
    assert quantile(pods, 0.9) == pytest.approx(0.001 + 0.009 * 10 / 19)
    # the rank falls in +Inf: the highest finite bound, as histogram_quantile answers
    assert quantile(pods, 0.999) == 0.01
    assert quantile(buckets["/validate-scale"], 0.5) is None


def test_delta_keeps_only_what_happened_between_two_scrapes() -> None:
    before = [(0.001, 80.0), (0.01, 99.0), (float("inf"), 100.0)]
    after = [(0.001, 80.0), (0.01, 109.0), (float("inf"), 110.0)]
    assert delta(before, after) == [(0.001, 0.0), (0.01, 10.0), (float("inf"), 10.0)]
    assert quantile(delta(before, after), 0.5) == pytest.approx(0.001 + 0.009 * 5 / 10)
    assert delta(None, after) == after


def test_counters_are_summed_over_matching_labels() -> None:
    assert counter_sum(EXPOSITION, "apiserver_request_total",
                       {"verb": "POST", "resource": "pods", "subresource": ""}) == 307
    assert counter_sum(EXPOSITION, "apiserver_request_total",
                       {"subresource": "binding", "code": "201"}) == 250
    assert counter_sum(EXPOSITION, "apiserver_request_total", {"verb": "PATCH"}) == 0


def test_percentiles_of_timings_are_nearest_rank_in_milliseconds() -> None:
    timings = [0.001 * n for n in range(1, 101)]
    assert percentile_ms(timings, 0.5) == pytest.approx(50)
    assert percentile_ms(timings, 0.99) == pytest.approx(99)
    assert percentile_ms([0.2], 0.99) == pytest.approx(200)


def test_coarse_histograms_report_the_bucket_a_quantile_falls_in() -> None:
    buckets = [(0.005, 10.0), (0.025, 40.0), (0.1, 90.0), (float("inf"), 100.0)]
    assert bucket_range(buckets, 0.5) == "0.025-0.1 s"
    assert bucket_range(buckets, 0.05) == "0-0.005 s"
    assert bucket_range(buckets, 0.99) == "> 0.1 s"
    assert bucket_range([(0.005, 0.0), (float("inf"), 0.0)], 0.5) == ""


def test_load_range_spans_the_one_minute_averages() -> None:
    assert load_range(["15.45 14.80 10.52", "9.46 12.48 11.33", "20.59 17.58 14.17"]) == \
        "9.5-20.6"
