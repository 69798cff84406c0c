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

The prediction is the pure core's (`webhook.core.cloneset`) on the objects read from the
cluster just before the scale, until `plan` knows the kind.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.controlplane import Process, wait_for
from tests.e2e.fake_kubelet import MANUAL_LABEL
from tests.e2e.harness import (
    Environment,
    cluster_role,
    controller_kubeconfig,
    is_active,
    start_controller,
    stop_controller,
)
from webhook.core.cloneset.prediction import predict_cloneset
from webhook.core.view.snapshot import Snapshot

API = "apps.kruise.io/v1alpha1"
CRD = "clonesets.apps.kruise.io"
ACCOUNT = ("kruise-system", "kruise-manager")
ROLE = "e2e-kruise-manager-role"
SCHEDULER = "e2e-driver"
LIFECYCLE_LABEL = "lifecycle.apps.kruise.io/state"
IMAGE = "registry.k8s.io/pause:3.10"


def module_dir(env: Environment) -> Path:
    """Where build_kruise.sh put the controller, the CRD and the ClusterRole."""
    path = env.plane.bin_dir.parent / "kruise"
    if not (path / "bin" / "cloneset-controller").is_file():
        raise FileNotFoundError(f"{path}: not built; run tests/e2e/build.sh (make e2e)")
    return path


def install_crd(env: Environment) -> None:
    """The module's CloneSet CRD, once per cluster (server-side: it is large)."""
    if env.kubectl("get", "crd", CRD).code != 0:
        env.kubectl("apply", "--server-side", "--field-manager=e2e", "-f",
                    str(module_dir(env) / "crd"), check=True)
    established = "jsonpath={.status.conditions[?(@.type=='Established')].status}"
    wait_for(f"CRD {CRD} established",
             lambda: env.kubectl("get", "crd", CRD, "-o", established).stdout == "True",
             timeout=60)


@dataclass
class CloneSetController:
    """The controller process, with its own identity."""

    env: Environment
    process: Process | None = None

    @property
    def home(self) -> Path:
        return self.env.run_dir / "kruise"

    def start(self) -> None:
        install_crd(self.env)
        self.home.mkdir(exist_ok=True)
        role = cluster_role(module_dir(self.env) / "rbac" / "role.yaml", ROLE)
        kubeconfig = controller_kubeconfig(self.env, ACCOUNT, role, ROLE,
                                           self.home / "cloneset-controller.kubeconfig")
        self.process = start_controller(
            self.env, "cloneset-controller",
            [str(module_dir(self.env) / "bin" / "cloneset-controller"), "--v=2"],
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


def predicted(env: Environment, cloneset_obj: Mapping[str, Any], target: int) -> dict[str, Any]:
    """The prediction for the cluster as it is now, in plan's JSON shape (victims with their
    `certain` flag, possibleVictims, blocked), for `workloads.compare`."""
    namespace = cloneset_obj["metadata"]["namespace"]
    nodes = env.api_get("/api/v1/nodes")["items"]
    pods = env.pods(namespace)
    for obj, kind in [(n, "Node") for n in nodes] + [(p, "Pod") for p in pods]:
        obj.setdefault("kind", kind)
    prediction = predict_cloneset(Snapshot([*nodes, *pods]), cloneset_obj, target,
                                  time.time_ns())
    tied = {id(p) for group in prediction.tie_groups for p in group.members}
    return {"victims": [{"name": p.name, "certain": id(p) not in tied}
                        for p in prediction.victims],
            "possibleVictims": [p.name for p in prediction.possible_victims],
            "blocked": [{"name": b.pod.name, "reason": b.wait.reason}
                        for b in prediction.blocked],
            "violations": [],  # judged once CloneSets are a registered kind
            "notes": prediction.notes}
