"""The real LeaderWorkerSet controller (sigs.k8s.io/lws) in the e2e cluster, and the
workloads and placement the LWS tests share.

tests/e2e/build.sh builds `lws-controller` into the control plane's bin directory and copies
the module's CRDs, ClusterRole and webhook registrations next to it (`../lws`). The
controller runs as a process like the other components, as the ServiceAccount
`lws-system:lws-controller-manager` (a token) with the module's own ClusterRole, the identity
poolguard exempts from judging its StatefulSet writes. Its webhooks (the LWS defaulting and
validation, and the pod webhook that sets the group labels) serve TLS with a certificate of
`python -m certs`, registered by URL on 127.0.0.1; its internal certificate management and
leader election are off in its configuration file.

Its pod webhooks have failurePolicy Fail: `stop()` removes the registrations before the
process, so no pod creation in the cluster ever waits on a controller that is gone.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.controlplane import Process, free_port, wait_for
from tests.e2e.harness import (
    PY,
    ControllerModule,
    Environment,
    cluster_role,
    controller_kubeconfig,
    install_crds,
    is_active,
    node_names,
    start_controller,
    stop_controller,
)
from tests.e2e.workloads import bind, running_ready, wait_settled

API = "leaderworkerset.x-k8s.io/v1"
CRD = "leaderworkersets.leaderworkerset.x-k8s.io"
ACCOUNT = ("lws-system", "lws-controller-manager")
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
SCHEDULER = "e2e-driver"
ROLE = "e2e-lws-manager-role"
WEBHOOKS = "e2e-lws"  # both configurations' names
# Where build.sh copied the module's CRDs (LeaderWorkerSet and DisaggregatedSet: the manager
# watches both), ClusterRole and webhook manifests.
LWS_MODULE = ControllerModule("lws", crds="crd", crd=CRD)


@dataclass
class LwsController:
    """The controller process and its webhook registrations."""

    env: Environment
    process: Process | None = None
    port: int = 0

    @property
    def home(self) -> Path:
        return self.env.run_dir / "lws"

    def start(self) -> None:
        """RBAC, a token, certificates, the configuration; then the process, serving."""
        install_crds(self.env, LWS_MODULE)
        self.home.mkdir(exist_ok=True)
        role = cluster_role(LWS_MODULE.path(self.env) / "rbac" / "role.yaml", ROLE)
        kubeconfig = controller_kubeconfig(self.env, ACCOUNT, role, ROLE,
                                           self.home / "lws-controller.kubeconfig")
        certs = self.home / "certs"
        # --force: a second module of the session starts the controller again
        made = self.env.run([PY, "-m", "certs", "create", "--out-dir", certs, "--force",
                             "--extra-name", "localhost", "--extra-ip", "127.0.0.1"])
        assert made.code == 0, str(made)
        self.port = free_port()
        config = self.home / "config.yaml"
        config.write_text(yaml.safe_dump({
            "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": self.port, "certDir": str(certs)},
            "metrics": {"bindAddress": "0"},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
        }))
        self.process = start_controller(
            self.env, "lws-controller",
            [self.env.plane.binary("lws-controller"), f"--config={config}",
             "--zap-log-level=info"],
            self._serving, what="the LWS controller's webhook server", timeout=60,
            variables={"KUBECONFIG": str(kubeconfig)})
        self._register(certs / "ca.crt")

    def stop(self) -> None:
        """Registrations first (failurePolicy Fail), then the process."""
        for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
            self.env.kubectl("delete", "--ignore-not-found", kind, WEBHOOKS, check=True)
        stop_controller(self.env, "lws-controller")
        self.process = None

    def _serving(self, _process: Process) -> bool:
        """Its webhook server completes a TLS handshake (the pod webhooks can be registered)."""
        context = ssl.create_default_context(cafile=str(self.home / "certs" / "ca.crt"))
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as raw, \
                context.wrap_socket(raw, server_hostname="127.0.0.1"):
            return True

    def _register(self, ca_file: Path) -> None:
        """The module's registrations, by URL on our port, with the pod webhooks limited to
        LWS pods as its config/webhook/*-patch.yaml do."""
        ca = base64.b64encode(ca_file.read_bytes()).decode()
        documents = [d for d in yaml.safe_load_all(
            (LWS_MODULE.path(self.env) / "webhook" / "manifests.yaml").read_text()) if d]
        for document in documents:
            document["metadata"] = {"name": WEBHOOKS}
            for hook in document["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{self.port}{path}",
                                        "caBundle": ca}
                if hook["rules"][0]["resources"] == ["pods"]:
                    hook["objectSelector"] = {"matchExpressions": [
                        {"key": NAME_LABEL, "operator": "Exists"}]}
        self.env.kubectl("apply", "--server-side", "--field-manager=e2e", "-f", "-",
                         stdin="\n---\n".join(json.dumps(d) for d in documents), check=True)


# --- workloads ----------------------------------------------------------------------------


def lws_template(app: str, role: str) -> dict[str, Any]:
    """A leader or worker template: the driver places its pods (schedulerName), the fake
    kubelet starts them."""
    return {"metadata": {"labels": {"app": app, "e2e.poolguard.dev/role": role}},
            "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 30,
                     "containers": [{"name": "server", "image": "registry.k8s.io/pause:3.10"}]}}


def leader_worker_set(name: str, replicas: int, size: int,
                      leader: Mapping[str, Any] | None = None,
                      worker: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An LWS of `replicas` groups of `size` pods (a leader and size-1 workers)."""
    template: dict[str, Any] = {"size": size,
                                "workerTemplate": dict(worker or lws_template(name, "worker"))}
    template["leaderTemplate"] = dict(leader or lws_template(name, "leader"))
    return {"apiVersion": API, "kind": "LeaderWorkerSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "startupPolicy": "LeaderCreated",
                     "leaderWorkerTemplate": template}}


def group_and_worker(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(group index, worker index; 0 for the leader) from the labels LWS's pod webhook set."""
    labels = pod["metadata"].get("labels") or {}
    return int(labels[GROUP_LABEL]), int(labels.get(WORKER_LABEL, "0"))


Placement = Callable[[Mapping[str, Any]], str]  # pod -> pool


def place_pending(env: Environment, namespace: str, pool_of: Placement,
                  counter: dict[str, int]) -> int:
    """Bind every unbound pod of the driver's scheduler to a node of the pool `pool_of`
    chooses (round robin over the pool's nodes); how many were bound."""
    bound = 0
    for pod in env.pods(namespace):
        meta, spec = pod["metadata"], pod["spec"]
        if spec.get("nodeName") or meta.get("deletionTimestamp"):
            continue
        if spec.get("schedulerName") != SCHEDULER or GROUP_LABEL not in (meta.get("labels")
                                                                          or {}):
            continue
        pool = pool_of(pod)
        index = counter.get(pool, 0)
        counter[pool] = index + 1
        nodes = node_names(pool)
        try:
            bind(env, namespace, meta["name"], nodes[index % len(nodes)])
            bound += 1
        except Exception:  # deleted or bound meanwhile: the next round sees it as it is
            continue
    return bound


def wait_groups(env: Environment, namespace: str, name: str, replicas: int, size: int,
                pool_of: Placement, timeout: float = 180) -> list[dict[str, Any]]:
    """Place the pods as the LWS controller and the StatefulSet controller create them,
    until `replicas` groups of `size` Running and Ready pods stand and LWS counts them
    ready; the pods."""
    counter: dict[str, int] = {}

    def check() -> list[dict[str, Any]] | None:
        env.plane.check_alive()
        place_pending(env, namespace, pool_of, counter)
        pods = [p for p in env.pods(namespace, f"{NAME_LABEL}={name}") if is_active(p)]
        if len(pods) != replicas * size or not all(running_ready(p) for p in pods):
            return None
        status = env.api_get(f"/apis/{API}/namespaces/{namespace}/leaderworkersets/{name}"
                             ).get("status") or {}
        return pods if status.get("readyReplicas") == replicas else None

    pods = wait_for(f"{replicas} groups of {size} pods of LWS {namespace}/{name}", check,
                    timeout=timeout, interval=0.5)
    wait_settled(env, namespace)
    return pods


def deleted_since(before: Mapping[str, Mapping[str, Any]],
                  after: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """The pods of `before` (name -> pod) gone from `after`, by uid: a leader the StatefulSet
    controller replaced (a rolling update) has its old name again but was deleted."""
    alive = {pod["metadata"]["uid"] for pod in after.values()}
    return {name for name, pod in before.items() if pod["metadata"]["uid"] not in alive}


def lws_replicas(env: Environment, namespace: str, name: str) -> int:
    lws = env.api_get(f"/apis/{API}/namespaces/{namespace}/leaderworkersets/{name}")
    return int(lws["spec"]["replicas"])
