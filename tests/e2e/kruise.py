"""The real OpenKruise CloneSet controller (github.com/openkruise/kruise v1.8.0) in the e2e
cluster, and what the CloneSet tests share: manifests, placement, settling, and the
prediction the tests compare the controller with.

tests/e2e/build_kruise.sh builds `cloneset-controller` (the wrapper tests/e2e/gomod/kruise:
a controller-runtime manager with only pkg/controller/cloneset) into the control plane's
cache (`../kruise/bin`) and copies the module's CloneSet CRD and its manager ClusterRole next
to it. The controller runs as a process like the other components, as the ServiceAccount
`kruise-system/kruise-manager` (a token) bound to that ClusterRole. OpenKruise's webhooks do
not run (the manifests below spell out the defaults its defaulting webhook would set), nor
does its leader election.

The prediction is `plan --workload clone/NS/NAME --output json`, run as a user runs it on
the cluster just before the scale, and again on the state it saved (`predicted`).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from tests.e2e.controlplane import Process, wait_for
from tests.e2e.fake_kubelet import MANUAL_LABEL
from tests.e2e.harness import (
    ControllerModule,
    Environment,
    cluster_role,
    controller_kubeconfig,
    install_crds,
    is_active,
    start_controller,
    stop_controller,
)
from tests.e2e.workloads import plan
from webhook.core.objects.kube import format_time_ns

API = "apps.kruise.io/v1alpha1"
CRD = "clonesets.apps.kruise.io"
ACCOUNT = ("kruise-system", "kruise-manager")
ROLE = "e2e-kruise-manager-role"
SCHEDULER = "e2e-driver"
LIFECYCLE_LABEL = "lifecycle.apps.kruise.io/state"
IMAGE = "registry.k8s.io/pause:3.10"
# Where build_kruise.sh put the controller, the CloneSet CRD and the ClusterRole, once built
# (`make e2e` builds them beside the first tests: the module's path waits for that build).
KRUISE_MODULE = ControllerModule("kruise", crds="crd", crd=CRD, build="kruise",
                                 binary="bin/cloneset-controller")


@dataclass
class CloneSetController:
    """The controller process, with its own identity."""

    env: Environment
    process: Process | None = None

    @property
    def home(self) -> Path:
        return self.env.run_dir / "kruise"

    def start(self) -> None:
        install_crds(self.env, KRUISE_MODULE)
        self.home.mkdir(exist_ok=True)
        module = KRUISE_MODULE.path(self.env)
        role = cluster_role(module / "rbac" / "role.yaml", ROLE)
        kubeconfig = controller_kubeconfig(self.env, ACCOUNT, role, ROLE,
                                           self.home / "cloneset-controller.kubeconfig")
        self.process = start_controller(
            self.env, "cloneset-controller",
            [str(module / KRUISE_MODULE.binary), "--v=2"],
            # its manager logs this once its informers synced and the reconciler runs
            lambda process: "Starting workers" in process.log.read_text(errors="replace"),
            what="the CloneSet controller's workers", timeout=120,
            variables={"KUBECONFIG": str(kubeconfig)})

    def stop(self) -> None:
        stop_controller(self.env, "cloneset-controller")
        self.process = None


# --- workloads ----------------------------------------------------------------------------


def cloneset(name: str, replicas: int, *, revision: int = 1, partition: int | str = 0,
             max_unavailable: int | str = "20%", min_ready_seconds: int = 0) -> dict[str, Any]:
    """A CloneSet whose pods the driver places and starts (schedulerName, manual status),
    with the defaults OpenKruise's defaulting webhook would have set spelled out."""
    template = {"metadata": {"labels": {"app": name, MANUAL_LABEL: "true"},
                             "annotations": {"e2e.poolguard.dev/revision": str(revision)}},
                "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 30,
                         "containers": [{"name": "server", "image": IMAGE}]}}
    return {"apiVersion": API, "kind": "CloneSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": template, "revisionHistoryLimit": 10,
                     "minReadySeconds": min_ready_seconds, "scaleStrategy": {},
                     "updateStrategy": {"type": "ReCreate", "partition": partition,
                                        "maxUnavailable": max_unavailable, "maxSurge": 0}}}


def read_cloneset(env: Environment, namespace: str, name: str) -> dict[str, Any]:
    return env.api_get(f"/apis/{API}/namespaces/{namespace}/clonesets/{name}")


def caught_up(env: Environment, namespace: str, name: str, updated: int | None = None) -> bool:
    """The controller observed its spec, has exactly spec.replicas active pods, all in
    lifecycle state Normal, and (`updated`) that many of them of the update revision."""
    cs = read_cloneset(env, namespace, name)
    status = cs.get("status") or {}
    if status.get("observedGeneration") != cs["metadata"]["generation"]:
        return False
    pods = [p for p in env.pods(namespace, f"app={name}") if is_active(p)]
    if len(pods) != cs["spec"]["replicas"] or status.get("replicas") != len(pods):
        return False
    if any((p["metadata"].get("labels") or {}).get(LIFECYCLE_LABEL) != "Normal" for p in pods):
        return False
    return updated is None or status.get("updatedReplicas") == updated


T = TypeVar("T")
Place = Callable[[Mapping[str, Any]], None]  # binds and starts one new pod as it chooses


def drive(env: Environment, namespace: str, name: str, place: Place, placed: set[str],
          updated: int | None = None, timeout: float = 180) -> None:
    """Place every new pod as the controller creates them, until it has caught up."""
    def check() -> bool:
        env.plane.check_alive()
        for pod in env.pods(namespace, f"app={name}"):
            uid = pod["metadata"]["uid"]
            if uid in placed or not is_active(pod):
                continue
            placed.add(uid)
            place(pod)
        return caught_up(env, namespace, name, updated)

    wait_for(f"CloneSet {namespace}/{name} to catch up", check, timeout=timeout, interval=0.5)


def settle_after_scale(env: Environment, namespace: str, name: str, quiet: float = 5.0,
                       timeout: float = 120) -> None:
    """Until the controller observed the scale and the namespace's pods stopped changing
    for `quiet` seconds (held pods stay: the count may stay above the target)."""
    state: dict[str, Any] = {"print": None, "since": 0.0}

    def check() -> bool:
        env.plane.check_alive()
        cs = read_cloneset(env, namespace, name)
        if (cs.get("status") or {}).get("observedGeneration") != cs["metadata"]["generation"]:
            return False
        now = tuple(sorted(p["metadata"]["uid"] + str(p["metadata"].get("deletionTimestamp"))
                           for p in env.pods(namespace)))
        if now != state["print"]:
            state.update({"print": now, "since": time.monotonic()})
            return False
        return time.monotonic() - state["since"] >= quiet

    wait_for(f"CloneSet {namespace}/{name} to settle", check, timeout=timeout, interval=0.5)


def wait_webhook_reads_clonesets(env: Environment, timeout: float = 90) -> None:
    """Until poolguard's cache lists CloneSets: it asks for a CRD installed after it started
    within a minute, and answers a scale of a CloneSet it has not seen as unchecked."""
    def reads() -> bool:
        found = _find(json.loads(env.webhook_get("/readyz")[1]), "clonesets")
        return isinstance(found, Mapping) and found.get("absent") is None \
            and bool(found.get("synced"))

    wait_for("poolguard's cache to list clonesets", reads, timeout=timeout, interval=1.0)


def _find(tree: Any, key: str) -> Any:
    """The first value of `key` anywhere in a decoded JSON `tree`, else None."""
    if isinstance(tree, Mapping):
        if key in tree:
            return tree[key]
        tree = list(tree.values())
    for item in tree if isinstance(tree, list) else ():
        found = _find(item, key)
        if found is not None:
            return found
    return None


def predicted(env: Environment, namespace: str, name: str, target: int,
              then: Callable[[], T], change: Mapping[str, Any] | None = None,
              saved: Path | None = None) -> tuple[dict[str, Any], T]:
    """What `plan --workload clone/NS/NAME --output json` says of a scale to `target` (the
    command a user runs, reading the cluster as it is now), and what `then` (the scale)
    returned, run right after it.

    `plan` saves the state it read (`--save-state`, to `saved` or a temporary file) and is
    run again on that file, with the same clock, after `then`: plan on the cluster and plan
    on the state it saved must agree. (The replay comes after the scale so that no pod
    passes `minReadySeconds` between plan's reading and the scale that plan did not see.)
    With `change` (spec fields the scale request also sets, such as
    `scaleStrategy.podsToDelete`) the replay reads the CloneSet as that request leaves it,
    and its answer is the one returned.
    """
    if saved is not None:
        return _predicted(env, namespace, name, target, then, change, saved)
    handle, path = tempfile.mkstemp(prefix="cloneset-", suffix=".json")
    os.close(handle)
    try:
        return _predicted(env, namespace, name, target, then, change, Path(path))
    finally:
        os.unlink(path)  # a megabyte per scenario and state otherwise, left in /tmp


def _predicted(env: Environment, namespace: str, name: str, target: int,
               then: Callable[[], T], change: Mapping[str, Any] | None,
               saved: Path) -> tuple[dict[str, Any], T]:
    ref, now = f"clone/{namespace}/{name}", format_time_ns(time.time_ns())
    live = plan(env, ref, target, "--now", now, "--save-state", str(saved))
    outcome = then()
    if change:
        _apply_change(saved, namespace, name, change)
    result = env.poolguard("plan", "--state", saved, "--workload", ref, "--replicas",
                           str(target), "--now", now, "-o", "json")
    assert result.code == 0, str(result)
    replayed = json.loads(result.stdout)
    if not change:
        assert _fates(replayed) == _fates(live), (
            f"plan on the live cluster and on the state it saved disagree:\n"
            f"live {_fates(live)}\nstate file {_fates(replayed)}")
    return replayed, outcome


def _apply_change(saved: Path, namespace: str, name: str, change: Mapping[str, Any]) -> None:
    """Rewrite the state file (JSON: plan saves a `.json` path as JSON, in tens of
    milliseconds where YAML takes a second of a cluster this size) with the CloneSet's spec
    as the scale request left it."""
    state = json.loads(saved.read_text())
    for item in state["items"]:
        if (item.get("kind"), item["metadata"].get("namespace"),
                item["metadata"]["name"]) == ("CloneSet", namespace, name):
            item["spec"] = {**item["spec"], **change}
    saved.write_text(json.dumps(state))


def _fates(document: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of a plan document the live cache and a state file must agree on."""
    return {"victims": [(v["name"], v["certain"]) for v in document["victims"]],
            "possibleVictims": sorted(document["possibleVictims"]),
            "blocked": [b["name"] for b in document["blocked"]],
            "allowed": document["allowed"]}
