"""The reconciler against the fake API server: writes, leadership, cleanup, dry run."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shlex
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import factories as f
from tests.support.cgroups import cgroup_v2
from tests.support.kubeapi.helpers import wait_until
from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.policies import FLAT_POLICY_FILE, flat_policy
from tests.support.reconcilers import FAST, client_for, fake_api
from tests.support.reconcilers import running as run_service
from webhook.cli.main import build_parser, main
from webhook.cluster.listing import read_snapshot
from webhook.cluster.memory_budget import MIB
from webhook.core.objects.deletion_cost import (
    DELETION_COST_ANNOTATION as COST,
)
from webhook.core.objects.deletion_cost import (
    MANAGED_COST_ANNOTATION as MARKER,
)
from webhook.core.objects.deletion_cost import (
    POOL_ANNOTATION as POOL,
)
from webhook.core.view.resource import NAMESPACES, NODES, PODS
from webhook.reconciler.lease import LeaderElector
from webhook.reconciler.metrics import serve_http
from webhook.reconciler.options import Options
from webhook.reconciler.passes import run_once
from webhook.reconciler.service import Service
from webhook.reconciler.workqueue import TokenBucket, WorkQueue
from webhook.reconciler.writer import Reconciler

LEASE_FLAGS = ["--lease-duration", "1", "--renew-deadline", "0.5", "--retry-period", "0.05"]


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    with fake_api(f.node("inf-1", "inference"), f.node("hyb-1", "hybrid")) as server:
        yield server


@pytest.fixture
def kubeconfig(api: FakeKubeAPI, tmp_path: Path) -> str:
    return str(api.write_kubeconfig(tmp_path / "kubeconfig"))


def annotations(api: FakeKubeAPI, name: str) -> dict[str, str]:
    pod = api.get("Pod", "ml", name)
    assert pod is not None
    return pod["metadata"].get("annotations") or {}


def pod_writes(api: FakeKubeAPI, identity: str | None = None) -> int:
    agent = None if identity is None else f"test/{identity}"
    return len(api.writes("PATCH", "/pods/", user_agent=agent))


def seed_pods(api: FakeKubeAPI) -> None:
    api.put(f.pod("on-inf", node_name="inf-1", annotations={"team.example/owner": "ml"}),
            f.pod("on-hyb", node_name="hyb-1"),
            f.pod("by-hand", node_name="hyb-1", cost="42"),
            f.pod("pending", node_name=None),
            f.pod("on-ghost", node_name="ghost-node"),
            f.pod("sys", namespace="kube-system", node_name="inf-1"))


def running(kubeconfig: str, options: Options) -> contextlib.AbstractContextManager[Service]:
    """The service with the flat policy, as the candidate `options.identity`."""
    return run_service(client_for(kubeconfig, options.identity), flat_policy(), options)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# ----- one pass ---------------------------------------------------------------------------


def test_once_sets_costs_keeps_people_and_then_writes_nothing(api: FakeKubeAPI,
                                                             kubeconfig: str) -> None:
    seed_pods(api)
    client = client_for(kubeconfig, "a")
    summary = run_once(client, flat_policy(), FAST, out=lambda line: None)
    assert summary.line() == ("6 pods: patched 2, unchanged 0, kept 1, skipped 3 "
                              "(excluded-namespace 1, unknown-node 1, unscheduled 1), failed 0")
    assert annotations(api, "on-inf") == {"team.example/owner": "ml", COST: "1000",
                                          MARKER: "1000", POOL: "inference"}
    assert annotations(api, "on-hyb") == {COST: "-100", MARKER: "-100", POOL: "hybrid"}
    assert annotations(api, "by-hand") == {COST: "42"}
    assert "annotations" not in api.get("Pod", "ml", "pending")["metadata"]
    assert pod_writes(api) == 2
    assert {r.path for r in api.writes("PATCH")} == {"/api/v1/namespaces/ml/pods/on-inf",
                                                     "/api/v1/namespaces/ml/pods/on-hyb"}
    again = run_once(client, flat_policy(), FAST, out=lambda line: None)
    assert again.line().startswith("6 pods: patched 0, unchanged 2, kept 1")
    assert pod_writes(api) == 2  # the second pass wrote nothing to pods


def test_a_concurrent_change_by_a_person_wins(api: FakeKubeAPI, kubeconfig: str) -> None:
    api.put(f.pod("raced", node_name="hyb-1"))
    client = client_for(kubeconfig, "a")
    view = read_snapshot(client, (NAMESPACES, NODES, PODS))
    api.modify("Pod", "ml", "raced",  # after our read, before our write
               lambda pod: pod["metadata"].update(annotations={COST: "7"}))
    reconciler = Reconciler(client, view, flat_policy(), FAST)
    stale = view.all_pods()[0]
    assert reconciler.reconcile(stale) == ("kept", "")
    assert annotations(api, "raced") == {COST: "7"}
    assert len(api.writes("PATCH")) == 1  # answered 409 Conflict, then re-read


@pytest.mark.parametrize(("mode", "expected"), [
    (["--once", "--policy", FLAT_POLICY_FILE], [
        "would patch ml/on-hyb: deletion cost (none) -> -100 (node hyb-1, pool hybrid)",
        "would patch ml/on-inf: deletion cost (none) -> 1000 (node inf-1, pool inference)",
        "reconcile: 7 pods: would patch 2, unchanged 1, kept 1, skipped 3 "
        "(excluded-namespace 1, unknown-node 1, unscheduled 1), failed 0"]),
    (["--cleanup"], [
        f"would remove from ml/costed: {COST}, {MARKER}, {POOL}",
        "cleanup: 7 pods: would clean 1, untouched 6, failed 0"]),
], ids=["once", "cleanup"])
def test_cli_dry_run_prints_the_changes_and_writes_nothing(
        api: FakeKubeAPI, kubeconfig: str, capsys: pytest.CaptureFixture[str],
        mode: list[str], expected: list[str]) -> None:
    seed_pods(api)
    api.put(f.pod("costed", node_name="inf-1",
                  annotations={COST: "1000", MARKER: "1000", POOL: "inference"}))
    code, out, _ = run_cli(capsys, "reconcile", "--kubeconfig", kubeconfig, "--dry-run", *mode)
    assert code == 0
    assert out.splitlines() == expected
    assert api.write_count() == 0  # no pods, no events, no lease


def test_cli_once_then_cleanup_removes_only_poolguard_annotations(
        api: FakeKubeAPI, kubeconfig: str, capsys: pytest.CaptureFixture[str]) -> None:
    seed_pods(api)
    base = ["reconcile", "--kubeconfig", kubeconfig, *LEASE_FLAGS]
    code, out, _ = run_cli(capsys, *base, "--once", "--policy", FLAT_POLICY_FILE)
    assert code == 0 and out.startswith("reconcile: 6 pods: patched 2,")
    api.modify("Pod", "ml", "on-hyb",  # a person overrides poolguard's value
               lambda pod: pod["metadata"]["annotations"].update({COST: "5"}))
    writes = pod_writes(api)
    code, out, _ = run_cli(capsys, *base, "--cleanup")
    assert (code, out) == (0, "cleanup: 6 pods: cleaned 2, untouched 4, failed 0\n")
    assert annotations(api, "on-inf") == {"team.example/owner": "ml"}
    assert annotations(api, "on-hyb") == {COST: "5"}
    assert annotations(api, "by-hand") == {COST: "42"}
    assert pod_writes(api) == writes + 2
    lease = api.get("Lease", "poolguard", "poolguard-reconciler")
    assert lease["spec"]["holderIdentity"] == ""  # released at exit


def test_cli_once_refuses_to_run_beside_a_live_leader(api: FakeKubeAPI, kubeconfig: str,
                                                      capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    seed_pods(api)
    other = LeaderElector(client_for(kubeconfig, "b"), "poolguard", "poolguard-reconciler",
                          "other", lease_duration=1, renew_deadline=0.5, retry_period=0.05)
    stop = threading.Event()
    renewing = threading.Thread(target=other.run, args=(stop,), daemon=True)
    renewing.start()
    try:
        wait_until(other.is_leader, message="the other leader")
        code, out, err = run_cli(capsys, "reconcile", "--kubeconfig", kubeconfig, "--once",
                                 "--policy", FLAT_POLICY_FILE, *LEASE_FLAGS)
    finally:
        stop.set()
        renewing.join()
    assert code == 1 and out == ""
    assert "lease poolguard/poolguard-reconciler is held by other" in err
    assert pod_writes(api) == 0


def test_cli_reports_an_unreachable_api_server(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with FakeKubeAPI() as dead:
        kubeconfig = str(dead.write_kubeconfig(tmp_path / "kubeconfig"))
    code, _, err = run_cli(capsys, "reconcile", "--kubeconfig", kubeconfig, "--once",
                           "--dry-run", "--policy", FLAT_POLICY_FILE)
    assert code == 2
    assert err.splitlines()[-1].startswith(f"error: cannot reach the API server at {dead.url}")
    code, _, err = run_cli(capsys, "reconcile", "--kubeconfig", kubeconfig, "--once")
    assert code == 2 and "--policy" in err


# ----- the long-running service -----------------------------------------------------------


def test_service_costs_new_pods_and_follows_node_relabels(api: FakeKubeAPI,
                                                          kubeconfig: str) -> None:
    seed_pods(api)
    with running(kubeconfig, FAST) as service:
        wait_until(lambda: annotations(api, "on-hyb").get(COST) == "-100", message="on-hyb")
        api.put(f.pod("new", node_name="inf-1"))
        wait_until(lambda: annotations(api, "new").get(COST) == "1000", message="new pod")
        api.modify("Node", "", "inf-1",
                   lambda node: node["metadata"]["labels"].update({"node.usage": "hybrid"}))
        wait_until(lambda: annotations(api, "on-inf").get(POOL) == "hybrid"
                   and annotations(api, "new").get(POOL) == "hybrid", message="re-costed")
        assert annotations(api, "on-inf")[COST] == "-100"
        api.put(f.node("ghost-node", "inference"))  # the unknown node appears
        wait_until(lambda: annotations(api, "on-ghost").get(COST) == "1000", message="ghost")
        assert annotations(api, "by-hand") == {COST: "42"}
        assert service.is_leader()
    events = api.objects("Event")
    assert {e["involvedObject"]["name"] for e in events} >= {"on-hyb", "new", "on-inf"}
    assert events[0]["reason"] == "DeletionCostSet"


def resyncs_of(service: Any) -> float:
    """The resync counter as /metrics reports it (prometheus' public sample API)."""
    return service.metrics.registry.get_sample_value("poolguard_reconciler_resyncs_total") or 0


def test_service_makes_no_writes_on_an_unchanged_cluster(api: FakeKubeAPI,
                                                         kubeconfig: str) -> None:
    seed_pods(api)
    options = Options(**{**FAST.__dict__, "resync_seconds": 0.1})
    with running(kubeconfig, options) as service:
        wait_until(lambda: resyncs_of(service) >= 1, message="first resync")
        wait_until(lambda: pod_writes(api) == 2 and len(service.queue) == 0, message="settle")
        api.modify("Pod", "ml", "on-inf",  # status churn must not cause writes
                   lambda pod: pod["status"].update(phase="Running", podIP="10.0.0.9"))
        resyncs = resyncs_of(service)
        wait_until(lambda: resyncs_of(service) >= resyncs + 3,
                   message="three more resyncs")
    assert pod_writes(api) == 2


def test_two_reconcilers_sharing_a_lease_never_both_write(api: FakeKubeAPI,
                                                          kubeconfig: str) -> None:
    seed_pods(api)
    b_options = Options(**{**FAST.__dict__, "identity": "b"})
    with running(kubeconfig, FAST) as first:
        wait_until(lambda: annotations(api, "on-inf").get(COST) == "1000", message="a writes")
        with running(kubeconfig, b_options) as second:
            wait_until(lambda: second.cluster.synced, message="b synced")
            for index in range(5):
                api.put(f.pod(f"burst-{index}", node_name="hyb-1"))
            wait_until(lambda: all(annotations(api, f"burst-{i}").get(COST) == "-100"
                                   for i in range(5)), message="burst costed")
            assert first.is_leader() and not second.is_leader()
            assert pod_writes(api, "b") == 0
    assert pod_writes(api, "a") == 7 and pod_writes(api, "b") == 0
    assert api.writes("PUT", "/leases/", user_agent="test/b") == []  # b never took the lease


def test_takeover_after_release_and_after_expiry(api: FakeKubeAPI, kubeconfig: str) -> None:
    seed_pods(api)
    with running(kubeconfig, FAST):
        wait_until(lambda: annotations(api, "on-inf").get(COST) == "1000", message="a writes")
    with running(kubeconfig, Options(**{**FAST.__dict__, "identity": "b"})) as second:
        wait_until(second.is_leader, timeout=2, message="b leads at once after a released")
        api.put(f.pod("late", node_name="inf-1"))
        wait_until(lambda: annotations(api, "late").get(COST) == "1000", message="b writes")
    last_a = max(r.at for r in api.writes("PATCH", "/pods/", user_agent="test/a"))
    assert min(r.at for r in api.writes("PATCH", "/pods/", user_agent="test/b")) > last_a
    # A holder that dies without releasing keeps the lease until it expires.
    crashed = LeaderElector(client_for(kubeconfig, "x"), "poolguard", "poolguard-reconciler",
                            "crashed", lease_duration=1, renew_deadline=0.5, retry_period=0.05)
    assert crashed.try_acquire_or_renew()
    waiting = LeaderElector(client_for(kubeconfig, "y"), "poolguard", "poolguard-reconciler",
                            "waiting", lease_duration=1, renew_deadline=0.5, retry_period=0.05)
    assert not waiting.try_acquire_or_renew()
    wait_until(waiting.try_acquire_or_renew, timeout=3, interval=0.05, message="expiry")
    assert not crashed.is_leader()  # it stopped writing before the other could start
    assert not crashed.try_acquire_or_renew()


# ----- parts --------------------------------------------------------------------------------


def test_metrics_and_healthz_endpoints(api: FakeKubeAPI, kubeconfig: str) -> None:
    seed_pods(api)
    with running(kubeconfig, FAST) as service:
        wait_until(lambda: service.metrics.registry.get_sample_value(
            "poolguard_reconciler_patches_total", {"result": "patched"}) == 2,
            message="two patches")
        server = serve_http(0, service.metrics, service.health, host="127.0.0.1")
        port = server.server_address[1]
        try:
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
            health: dict[str, Any] = json.loads(
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz").read())
        finally:
            server.shutdown()
            server.server_close()
    assert 'poolguard_reconciler_patches_total{result="patched"} 2.0' in metrics
    assert 'poolguard_reconciler_pods_skipped_total{reason="unscheduled"}' in metrics
    assert "poolguard_reconciler_leader 1.0" in metrics
    assert "poolguard_reconciler_queue_depth" in metrics
    assert health["ok"] and health["leader"] and health["synced"]


def test_memory_limit_too_low_is_named_in_healthz_and_metrics(
        api: FakeKubeAPI, kubeconfig: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The reconciler reads its container's cgroup (a fake one here): a limit below what
    its cache needs is a warning in /healthz and the gauges, never unhealthy."""
    monkeypatch.setenv("POOLGUARD_CGROUP_ROOT",
                       str(cgroup_v2(tmp_path / "cgroup", str(64 * MIB), 50 * MIB)))
    seed_pods(api)
    with running(kubeconfig, FAST) as service:
        wait_until(lambda: service.memory.latest is not None, message="a memory check")
        healthy, details = service.health()
        values = {name: service.metrics.registry.get_sample_value(name) for name in (
            "poolguard_memory_limit_bytes", "poolguard_memory_used_bytes",
            "poolguard_memory_projected_bytes")}
    assert healthy
    assert details["memory"].startswith("the memory limit 64 MiB is too low for ")
    assert values == {"poolguard_memory_limit_bytes": 64 * MIB,
                      "poolguard_memory_used_bytes": 50 * MIB,
                      "poolguard_memory_projected_bytes": service.memory.latest.projected}


def _cost_owned_by(manager: str) -> list[dict[str, Any]]:
    return [{"manager": manager, "operation": "Update", "time": "2026-11-01T00:00:00Z",
             "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:annotations": {
                 f"f:{COST}": {}}}}}]


def test_foreign_cost_pods_gauge_counts_governed_pods_per_writer(
        api: FakeKubeAPI, kubeconfig: str) -> None:
    """Pods whose cost Karpenter or OpenKruise owns are kept (never patched) and counted by
    manager; a person's value is not counted; a writer gone at the next resync drops out."""
    owned = [("karpenter-1", "karpenter"), ("karpenter-2", "karpenter"),
             ("kruise-1", "kruise-manager"), ("person", "kubectl-annotate")]
    for name, manager in owned:
        pod = f.pod(name, node_name="hyb-1", cost="7")
        pod["metadata"]["managedFields"] = _cost_owned_by(manager)
        api.put(pod)
    finished = f.pod("finished", node_name="hyb-1", cost="7", phase="Succeeded")
    finished["metadata"]["managedFields"] = _cost_owned_by("karpenter")
    api.put(finished)

    def gauge(manager: str) -> float | None:
        return service.metrics.registry.get_sample_value("poolguard_foreign_cost_pods",
                                                         {"manager": manager})

    with running(kubeconfig, FAST) as service:
        wait_until(lambda: gauge("karpenter") == 2, message="karpenter's pods counted")
        assert gauge("kruise-manager") == 1
        assert gauge("kubectl-annotate") is None
        assert {name: annotations(api, name)[COST] for name, _ in owned} == {
            name: "7" for name, _ in owned}  # kept
        api.modify("Pod", "ml", "kruise-1", lambda pod: pod["metadata"].update(
            managedFields=_cost_owned_by("kubectl-edit")))
        wait_until(lambda: [p for p in service.cluster.all_pod_facts()
                            if p.name == "kruise-1" and not p.cost_writer],
                   message="the cache saw the change")
        service.enqueue_all()
        assert gauge("kruise-manager") is None and gauge("karpenter") == 2
    assert pod_writes(api) == 0


def test_work_queue_dedupes_and_requeues_keys_added_while_processing() -> None:
    queue = WorkQueue()
    for key in ("a", "b", "a"):
        queue.add(key)
    assert len(queue) == 2
    assert queue.get(0.1) == "a"
    queue.add("a")  # while "a" is processed
    assert queue.get(0.1) == "b"
    queue.done("b")
    assert queue.get(0.01) is None
    queue.done("a")
    assert queue.get(0.1) == "a"
    queue.add_after("c", 0.05)
    assert queue.get(0.5) == "c"


def test_token_bucket_allows_a_burst_then_the_rate() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=5, burst=10, clock=lambda: now[0])
    assert sum(bucket.try_acquire() for _ in range(20)) == 10
    now[0] += 1.0
    assert sum(bucket.try_acquire() for _ in range(20)) == 5


def test_a_node_leaving_every_pool_gets_the_default_cost_and_loses_the_pool_name(
        api: FakeKubeAPI, kubeconfig: str) -> None:
    api.put(f.node("plain", None),
            f.pod("was-pooled", node_name="plain", annotations={
                COST: "0", MARKER: "0", POOL: "hybrid"}))
    summary = run_once(client_for(kubeconfig, "a"), flat_policy(), FAST,
                       out=lambda line: None)
    assert summary.outcomes["patched"] == 1
    assert annotations(api, "was-pooled") == {COST: "0", MARKER: "0"}


def test_docs_commands_and_flags_match_the_parser() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "reconciler.md").read_text()
    parser = build_parser()
    commands = [line.strip() for line in doc.splitlines()
                if line.strip().startswith("python -m webhook ")]
    assert len(commands) >= 5
    for command in commands:
        parser.parse_args(shlex.split(command)[3:])  # exits (SystemExit) if a flag is wrong
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    reconcile = subcommands.choices["reconcile"]
    flags = {opt for action in reconcile._actions for opt in action.option_strings
             if opt.startswith("--") and opt not in ("--help", "--version")}
    documented = set(re.findall(r"^\| `(--[a-z-]+)", doc, flags=re.MULTILINE))
    assert documented == flags


def test_default_identities_never_collide(monkeypatch: pytest.MonkeyPatch) -> None:
    from webhook.cli.reconcile import unique_identity

    monkeypatch.setenv("POD_NAME", "poolguard-reconciler-abc")
    first, second = unique_identity(), unique_identity()
    assert first != second  # a `kubectl exec` into the leader's pod is another candidate
    assert first.startswith("poolguard-reconciler-abc_")


def test_service_follows_a_changed_policy_file(api: FakeKubeAPI, kubeconfig: str,
                                               tmp_path: Path) -> None:
    from webhook.cluster.state import PolicyHolder

    seed_pods(api)
    path = tmp_path / "policy.yaml"
    document = {"pools": [{"name": "inference", "deletionCost": 1000, "protected": True},
                          {"name": "hybrid", "deletionCost": -100}]}
    path.write_text(json.dumps(document))
    holder = PolicyHolder(str(path))
    with run_service(client_for(kubeconfig, FAST.identity), holder.policy, FAST,
                     policy_file=holder):
        assert wait_until(lambda: annotations(api, "on-hyb").get(
            "controller.kubernetes.io/pod-deletion-cost") == "-100", timeout=10)
        document["pools"][1]["deletionCost"] = -250
        path.write_text(json.dumps(document))
        assert wait_until(lambda: annotations(api, "on-hyb").get(
            "controller.kubernetes.io/pod-deletion-cost") == "-250", timeout=10)
