"""The real Argo Rollouts controller (github.com/argoproj/argo-rollouts) in the e2e cluster.

tests/e2e/build_rollouts.sh builds `rollouts-controller` into `argo-rollouts/` beside the
control plane's bin directory and copies the module's CRDs (manifests/crds) and ClusterRole
(manifests/role) next to it. The controller runs as a process like the other components,
as the ServiceAccount `argo-rollouts:argo-rollouts` (a token) bound to the module's own
ClusterRole, the identity whose ReplicaSet writes poolguard never judges (their owner is
the Rollout). Leader election is off; no traffic router, analysis or notification
configuration exists, so only the Rollout reconciler acts.

Its metrics and health servers take a free port each. v1.10.2 binds them on every
interface: `controller/controller.go` formats both addresses from the constant
`listenAddr = "0.0.0.0:%d"`, and no flag or environment variable moves them to loopback
or turns the metrics server off (a constant cannot be set at link time either). The ports
are random and the process lives only as long as the tests.

The controller reconciles on every event, so a test waits for it to come to rest
(`wait_rollout_settled`) instead of driving it.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.controlplane import Process, free_port, wait_for
from tests.e2e.harness import (
    ControllerModule,
    Environment,
    cluster_role,
    controller_binary,
    controller_kubeconfig,
    install_crds,
    start_controller,
    stop_controller,
)
from tests.e2e.rollouts_manifests import API_VERSION, GROUP
from tests.e2e.workloads import settled

VERSION = "v1.10.2"
ACCOUNT = ("argo-rollouts", "argo-rollouts")  # (namespace, ServiceAccount)
ROLE = "argo-rollouts"  # the ClusterRoleBinding to the module's ClusterRole (manifests/role)
CRD = f"rollouts.{GROUP}"
# Where build_rollouts.sh put the binary, the CRDs (Rollout, AnalysisRun, AnalysisTemplate,
# ClusterAnalysisTemplate, Experiment: the controller's informers list them all) and the
# ClusterRole. `--manifests` copies the CRDs before the binary's build: they are installed
# before poolguard starts.
ROLLOUTS_MODULE = ControllerModule("argo-rollouts", crds="crds", crd=CRD)


@dataclass
class RolloutsController:
    """The controller process, as the ServiceAccount its install manifests make."""

    env: Environment
    process: Process | None = None
    healthz_port: int = 0

    @property
    def home(self) -> Path:
        return self.env.run_dir / "argo-rollouts"

    def start(self) -> None:
        """CRDs, RBAC and a token; then the process, until its health endpoint answers."""
        install_crds(self.env, ROLLOUTS_MODULE)
        self.home.mkdir(exist_ok=True)
        module = ROLLOUTS_MODULE.path(self.env)
        role = cluster_role(module / "role" / "argo-rollouts-clusterrole.yaml")
        kubeconfig = controller_kubeconfig(self.env, ACCOUNT, role, ROLE,
                                           self.home / "rollouts-controller.kubeconfig")
        self.healthz_port = free_port()
        namespace, _ = ACCOUNT
        binary = controller_binary(self.env, "rollouts", module / "rollouts-controller")
        self.process = start_controller(
            self.env, "rollouts-controller",
            [str(binary), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
             f"--metricsPort={free_port()}", f"--healthzPort={self.healthz_port}",
             "--loglevel=info"],
            self._healthy, what="the Argo Rollouts controller's health endpoint", timeout=90,
            variables={"POD_NAMESPACE": namespace})

    def stop(self) -> None:
        stop_controller(self.env, "rollouts-controller")
        self.process = None

    def _healthy(self, _process: Process) -> bool:
        """Its /healthz answers 200."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.healthz_port}/healthz",
                                        timeout=2) as response:
                return response.status == 200
        except OSError:
            return False


# --- waiting for the controller ---------------------------------------------------------------

def get_rollout(env: Environment, namespace: str, name: str) -> dict[str, Any]:
    return env.api_get(f"/apis/{GROUP}/{API_VERSION}/namespaces/{namespace}/rollouts/{name}")


def rollout_fingerprint(env: Environment, namespace: str, name: str) -> tuple[Any, ...] | None:
    """What the controller has decided about the Rollout and its ReplicaSets once it has
    observed the latest spec, with the namespace's pods caught up; None before."""
    base = settled(env, namespace)
    rollout = get_rollout(env, namespace, name)
    status = rollout.get("status") or {}
    if base is None or status.get("observedGeneration") != str(rollout["metadata"]["generation"]):
        return None
    decided = {key: status.get(key) for key in (
        "currentPodHash", "stableRS", "currentStepIndex", "controllerPause", "abort",
        "blueGreen", "canary", "replicas", "updatedReplicas", "readyReplicas",
        "availableReplicas", "phase")}
    decided["pauseConditions"] = [c.get("reason") for c in status.get("pauseConditions") or []]
    replicasets = sorted(
        (rs["metadata"]["name"], rs["spec"].get("replicas"),
         _annotation_subset(rs["metadata"].get("annotations") or {}))
        for rs in env.api_get(f"/apis/apps/v1/namespaces/{namespace}/replicasets")["items"])
    return (base, json.dumps(decided, sort_keys=True), tuple(replicasets))


def _annotation_subset(annotations: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in annotations.items() if "rollout" in k
                        or k == "scale-down-deadline"))


def wait_rollout_settled(env: Environment, namespace: str, name: str, timeout: float = 180,
                         quiet: float = 2.0) -> None:
    """Until the controller has observed the Rollout's spec and neither it nor the
    ReplicaSet controller changed anything for `quiet` seconds."""
    state: dict[str, Any] = {"print": None, "since": 0.0}

    def check() -> bool:
        env.plane.check_alive()
        now = rollout_fingerprint(env, namespace, name)
        if now is None or now != state["print"]:
            state.update({"print": now, "since": time.monotonic()})
            return False
        return time.monotonic() - state["since"] >= quiet

    wait_for(f"the Rollout {namespace}/{name} to come to rest", check, timeout=timeout,
             interval=0.5)


def promote_as_user(env: Environment, namespace: str, name: str) -> None:
    """What `kubectl argo rollouts promote` sends for a Rollout paused at a pause step or a
    blue-green pause: the pause conditions go (the controller then completes the pause)."""
    env.kubectl("-n", namespace, "patch", f"{CRD}/{name}", "--subresource=status",
                "--type=merge", "-p", '{"status":{"pauseConditions":null}}', check=True)


def abort_as_user(env: Environment, namespace: str, name: str) -> None:
    """What `kubectl argo rollouts abort` sends: status.abort (the stable ReplicaSet is
    scaled back up, the canary down)."""
    env.kubectl("-n", namespace, "patch", f"{CRD}/{name}", "--subresource=status",
                "--type=merge", "-p", '{"status":{"abort":true}}', check=True)
