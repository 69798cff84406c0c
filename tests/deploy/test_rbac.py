"""RBAC grants exactly what the code calls: requests seen by the fake API vs the roles."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path

import pytest
import yaml

from tests.support.kubeapi.server import FakeKubeAPI
from webhook.cluster.kubeclient import api_client_from
from webhook.cluster.live import LiveCluster
from webhook.cluster.state import EXAMPLE_STATE
from webhook.core.kinds.registry import KINDS

ROOT = Path(__file__).resolve().parents[2]
_PATH = re.compile(r"^/(?:api/v1|apis/(?P<group>[^/]+)/[^/]+)"
                   r"(?:/namespaces/[^/]+)?/(?P<resource>[^/]+)(?P<name>/[^/]+)?(?P<sub>/.+)?$")


def rbac_verb(method: str, query: dict[str, str], has_name: bool) -> str:
    if method == "GET":
        if query.get("watch") in ("1", "true"):
            return "watch"
        return "get" if has_name else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]


def used_permissions(requests: Iterable) -> set[tuple[str, str, str]]:
    """(apiGroup, resource, verb) for every request the fake API saw."""
    used = set()
    for request in requests:
        match = _PATH.match(request.path)
        assert match, f"unexpected API path {request.path}"
        resource = match["resource"] + (match["sub"] or "")
        used.add((match["group"] or "", resource,
                  rbac_verb(request.method, request.query, bool(match["name"]))))
    return used


def granted(role_name: str, kind: str = "ClusterRole") -> set[tuple[str, str, str]]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is needed to render the manifests")
    rendered = subprocess.run(["kubectl", "kustomize", str(ROOT / "manifests" / "base")],
                              capture_output=True, text=True, check=True).stdout
    for document in yaml.safe_load_all(rendered):
        if document and document["kind"] == kind and document["metadata"]["name"] == role_name:
            return {(group, resource, verb)
                    for rule in document["rules"] for group in rule["apiGroups"]
                    for resource in rule["resources"] for verb in rule["verbs"]}
    raise AssertionError(f"{kind} {role_name} not in the manifests")


def test_webhook_cluster_role_is_exactly_what_the_caches_call(tmp_path):
    objects = yaml.safe_load(EXAMPLE_STATE.read_text())["items"]
    with FakeKubeAPI() as api:
        for kind in KINDS:  # with their CRDs, the custom kinds are watched too
            if kind.custom:
                api.install_crd(kind.kind)
        api.put(*objects)
        cluster = LiveCluster(api_client_from(str(api.write_kubeconfig(tmp_path / "kc"))))
        cluster.start()
        try:
            assert cluster.wait_for_sync(15)
            api.compact()  # force a relist path too
            api.drop_watches()
            api.put({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "late"}})
            deadline = time.monotonic() + 10
            while cluster.node("late") is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert cluster.node("late") is not None
        finally:
            cluster.stop()
        used = used_permissions(api.requests)
    assert used == granted("poolguard-webhook")


def test_without_the_crds_the_webhook_lists_the_custom_kinds_and_nothing_more(tmp_path):
    with FakeKubeAPI() as api:
        api.put(*yaml.safe_load(EXAMPLE_STATE.read_text())["items"])
        cluster = LiveCluster(api_client_from(str(api.write_kubeconfig(tmp_path / "kc"))))
        cluster.start()
        try:
            assert cluster.wait_for_sync(15)
        finally:
            cluster.stop()
        used = used_permissions(api.requests)
    custom = {(group, resource, verb) for group, resource, verb in used
              if group in ("leaderworkerset.x-k8s.io", "argoproj.io")}
    assert custom == {("leaderworkerset.x-k8s.io", "leaderworkersets", "list"),
                      ("argoproj.io", "rollouts", "list")}
    assert used <= granted("poolguard-webhook")


def test_the_webhooks_event_on_a_refused_policy_is_granted_by_its_role(tmp_path):
    """The one write the webhook makes: an Event on the policy ConfigMap, in its namespace."""
    from webhook.admission.runtime import _refusal_reporter

    with FakeKubeAPI() as api:
        client = api_client_from(str(api.write_kubeconfig(tmp_path / "kc")))
        counted = []
        _refusal_reporter("poolguard/poolguard-policy", client, type(
            "Counter", (), {"inc": lambda self: counted.append(1)})())("a reason")
        client.close()
        used = used_permissions(api.requests)
    assert counted and used == {("", "events", "create")}
    assert used <= granted("poolguard-webhook-events", kind="Role")


def test_reconciler_roles_are_exactly_what_it_calls(tmp_path):
    """One long-running reconciler (watches, patches, Events, Lease) and a cleanup run."""
    import signal
    import sys

    objects = yaml.safe_load(EXAMPLE_STATE.read_text())["items"]
    for obj in objects:  # strip costs so the reconciler has pods to patch
        if obj["kind"] == "Pod":
            obj["metadata"].pop("annotations", None)
    with FakeKubeAPI() as api:
        api.put(*objects)
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kc"))
        common = ["--kubeconfig", kubeconfig, "--lease-namespace", "poolguard",
                  "--qps", "1000", "--burst", "1000"]
        policy = str(ROOT / "examples" / "policy.yaml")
        service = subprocess.Popen([sys.executable, "-m", "webhook", "reconcile", *common,
                                    "--policy", policy,
                                    "--metrics-port", "0"], cwd=ROOT,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 20
            while api.write_count("PATCH", "/pods/") < 10 and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            service.send_signal(signal.SIGTERM)
            service.wait(timeout=20)
        cleanup = subprocess.run([sys.executable, "-m", "webhook", "reconcile", *common,
                                  "--cleanup"], cwd=ROOT, capture_output=True, timeout=60)
        assert cleanup.returncode == 0, cleanup.stderr
        used = used_permissions(api.requests)
    assert ("", "pods", "patch") in used and ("", "pods", "watch") in used
    allowed = granted("poolguard-reconciler") | granted(
        "poolguard-reconciler-leader-election", kind="Role")
    assert used <= allowed, f"used but not granted: {used - allowed}"
    # get pods only re-reads a pod after a 409 Conflict (tests/reconciler/test_reconciler.py)
    assert allowed - used == {("", "pods", "get")}, f"granted but never used: {allowed - used}"
