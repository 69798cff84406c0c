"""The e2e environment: the control plane with fake Nodes and the fake kubelet, poolguard
installed from manifests/overlays/local-dev, and helpers the scenarios share.

poolguard runs exactly as a user runs it locally: `python -m webhook serve` and
`python -m webhook reconcile` as processes, authenticated with tokens of the shipped
ServiceAccounts (TokenRequest), so the shipped RBAC is what is exercised.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.e2e.controlplane import ControlPlane, Process, free_port, kubeconfig_text, wait_for
from webhook.cluster.state import load_policy

REPO = Path(__file__).resolve().parents[2]
PY = sys.executable
POOL_LABEL = "node.usage"
POLICY_CONFIGMAP = "poolguard/poolguard-policy"  # where a refused policy's Event goes
# Several nodes per pool, so pods double up on nodes only sometimes (rank, rule 5).
NODES = {"inference": 3, "hybrid": 3, "training": 2}
COSTS = {"inference": 1000, "hybrid": -100, "training": 0}  # the shipped policy's pool tops
COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
SHIPPED_POLICY = load_policy(REPO / "manifests" / "base" / "policy.yaml")


def service_cidr() -> str:
    """The Services' ClusterIP range: on loopback, so the API server reaches a webhook
    Service's ClusterIP on this machine (tests/e2e/helm.py); the rest of the tier never uses
    them. A random /24 of 127.0.0.0/8 (E2E_SERVICE_CIDR to choose one), so two runs on one
    machine hardly ever hand out the same ClusterIP:port."""
    return os.environ.get("E2E_SERVICE_CIDR") or (
        f"127.{random.randint(100, 254)}.{random.randint(0, 255)}.0/24")


FAKE_KUBELET_RBAC = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-fake-kubelet}
rules:
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["get", "list", "watch", "delete"]
  - apiGroups: [""]
    resources: ["pods/status"]
    verbs: ["patch", "update"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-fake-kubelet}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-fake-kubelet}
subjects:
  - {apiGroup: rbac.authorization.k8s.io, kind: Group, name: "e2e:fake-kubelets"}
"""


def node_names(pool: str) -> list[str]:
    return [f"{pool}-{i}" for i in range(1, NODES[pool] + 1)]


@dataclass
class Result:
    """A finished command: exit code and output."""

    args: list[str]
    code: int
    stdout: str
    stderr: str

    def __str__(self) -> str:
        return (f"$ {' '.join(self.args)}\nexit {self.code}\nstdout:\n{self.stdout}\n"
                f"stderr:\n{self.stderr}")


POOL_SIZE = 32  # connections kept to the API server: the bench and scenarios run threads


def api_client(kubeconfig: Path, pool_size: int = POOL_SIZE) -> client.ApiClient:
    """A client for `kubeconfig` that keeps up to `pool_size` connections.

    urllib3 builds its pool when the ApiClient is created: the size must be in the
    Configuration before that (setting it on the client's configuration afterwards
    changes nothing, and threads beyond the default 5 per CPU reconnect every time).
    """
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration,
                            persist_config=False)
    configuration.connection_pool_maxsize = pool_size
    return client.ApiClient(configuration)


@dataclass
class Environment:
    """Everything a scenario touches."""

    plane: ControlPlane
    keep: bool = False
    webhook_port: int = 0
    serve: Process | None = None
    reconciler: Process | None = None
    api: client.ApiClient = field(init=False)

    def __post_init__(self) -> None:
        self.api = api_client(self.plane.kubeconfig())
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)

    @property
    def run_dir(self) -> Path:
        return self.plane.run_dir

    @property
    def policy_file(self) -> Path:
        return self.run_dir / "poolguard" / "policy.yaml"

    # -- commands --

    def run(self, args: Sequence[str | os.PathLike[str]], *, stdin: str | None = None,
            timeout: float = 120, env: Mapping[str, str] | None = None) -> Result:
        argv = [str(a) for a in args]
        done = subprocess.run(argv, input=stdin, capture_output=True, text=True, cwd=REPO,
                              timeout=timeout, env={**os.environ, **(env or {})}, check=False)
        return Result(argv, done.returncode, done.stdout, done.stderr)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = False,
                kubeconfig: Path | None = None) -> Result:
        result = self.run([self.plane.binary("kubectl"), "--kubeconfig",
                           str(kubeconfig or self.plane.kubeconfig()), *args], stdin=stdin)
        if check:
            assert result.code == 0, str(result)
        return result

    def poolguard(self, *args: str | os.PathLike[str], timeout: float = 120) -> Result:
        """`python -m webhook ARGS` (the CLI a user runs)."""
        return self.run([PY, "-m", "webhook", *args], timeout=timeout)

    # -- cluster setup --

    def bootstrap(self) -> None:
        """Fake Nodes, the fake kubelet, and the controllers' ServiceAccounts ready."""
        self.kubectl("apply", "-f", "-", stdin=FAKE_KUBELET_RBAC, check=True)
        index = 0
        for pool in NODES:
            for name in node_names(pool):
                index += 1
                self.core.create_node(fake_node(name, pool, index))
        # Nodes take their status on create; the scheduler filters on taints and
        # allocatable only.
        for node in self.core.list_node().items:
            assert node.status.allocatable["pods"] == "110", node.status
            assert not node.spec.taints, f"{node.metadata.name} has taints {node.spec.taints}"
        self.plane.spawn("fake-kubelet", [PY, "-m", "tests.e2e.fake_kubelet", "--kubeconfig",
                                          str(self.plane.kubeconfig("fake-kubelet"))])
        wait_for("the serviceaccount controller to make default/default",
                 lambda: self.core.read_namespaced_service_account("default", "default"),
                 timeout=120)

    def new_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> str:
        """A namespace, once its `default` ServiceAccount exists (pods need it)."""
        self.core.create_namespace(client.V1Namespace(
            metadata=client.V1ObjectMeta(name=name, labels=dict(labels or {}))))
        wait_for(f"ServiceAccount {name}/default",
                 lambda: self.core.read_namespaced_service_account("default", name), timeout=60)
        return name

    def delete_namespace(self, name: str) -> None:
        try:
            self.core.delete_namespace(name)
        except ApiException as err:
            if err.status != 404:
                raise

    # -- poolguard --

    def install_poolguard(self) -> None:
        """Certificates, the local-dev overlay on our port, applied; then `serve` runs."""
        home = self.run_dir / "poolguard"
        certs = home / "certs"
        home.mkdir(parents=True, exist_ok=True)
        done = self.run([PY, "-m", "certs", "create", "--out-dir", certs,
                         "--extra-name", "localhost", "--extra-ip", "127.0.0.1"])
        assert done.code == 0, str(done)
        self.webhook_port = free_port()
        overlay = home / "overlay"
        overlay.mkdir(exist_ok=True)
        (overlay / "kustomization.yaml").write_text(local_overlay(self.webhook_port, overlay))
        rendered = self.kubectl("kustomize", str(overlay), check=True).stdout
        injected = self.run([PY, "-m", "certs", "inject", "--ca-file", certs / "ca.crt"],
                            stdin=rendered)
        assert injected.code == 0, str(injected)
        (home / "poolguard.yaml").write_text(injected.stdout)
        self.kubectl("apply", "--server-side", "--field-manager=poolguard", "-f",
                     str(home / "poolguard.yaml"), check=True)
        # The policy a pod would see mounted from the ConfigMap.
        policy = self.kubectl("-n", "poolguard", "get", "configmap", "poolguard-policy",
                              "-o", "jsonpath={.data.policy\\.yaml}", check=True).stdout
        assert "poolLabel" in policy, policy
        self.policy_file.write_text(policy)
        for account in ("poolguard-webhook", "poolguard-reconciler"):
            token = self.kubectl("-n", "poolguard", "create", "token", account,
                                 "--duration=24h", check=True).stdout.strip()
            (home / f"{account}.kubeconfig").write_text(kubeconfig_text(
                self.plane.server, self.plane.pki / "ca.crt",
                f"system:serviceaccount:poolguard:{account}", token=token))
        self.start_serve()

    def uninstall_poolguard(self) -> None:
        """Stop `serve` and the reconciler and delete what install_poolguard applied (the
        Helm chart makes the same cluster-scoped objects)."""
        self.stop_serve()
        self.stop_reconciler()
        self.kubectl("delete", "--ignore-not-found", "--wait=false", "-f",
                     str(self.run_dir / "poolguard" / "poolguard.yaml"), check=True)

    def start_serve(self, ready_timeout: float = 90, access_log: bool = True) -> None:
        """`serve` live; `access_log` False runs it as the manifests do (bench-scale)."""
        home = self.run_dir / "poolguard"
        self.serve = self.plane.spawn("poolguard-serve", [
            PY, "-m", "webhook", "serve",
            "--kubeconfig", str(home / "poolguard-webhook.kubeconfig"),
            "--policy", str(self.policy_file), "--policy-configmap", POLICY_CONFIGMAP,
            "--cert", str(home / "certs" / "tls.crt"),
            "--key", str(home / "certs" / "tls.key"), "--host", "127.0.0.1",
            "--port", str(self.webhook_port), *(["--access-log"] if access_log else [])])
        wait_for("poolguard serve /readyz", lambda: self.webhook_get("/readyz")[0] == 200,
                 timeout=ready_timeout)

    def stop_serve(self) -> None:
        self.plane.stop_process("poolguard-serve")
        self.serve = None

    def webhook_get(self, path: str) -> tuple[int, str]:
        if self.serve is not None and not self.serve.alive():
            raise RuntimeError(f"poolguard serve exited:\n{self.serve.tail()}")
        context = ssl.create_default_context(
            cafile=str(self.run_dir / "poolguard" / "certs" / "ca.crt"))
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.webhook_port}{path}",
                                        context=context, timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def start_reconciler(self, ready_timeout: float = 60, extra_args: Sequence[str] = ()) -> None:
        """`reconcile` running and holding its Lease (nothing if it runs already);
        `extra_args` are further flags of `reconcile`."""
        if self.reconciler is not None and self.reconciler.alive():
            return
        home = self.run_dir / "poolguard"
        self.reconciler = self.plane.spawn("poolguard-reconcile", [
            PY, "-m", "webhook", "reconcile",
            "--kubeconfig", str(home / "poolguard-reconciler.kubeconfig"),
            "--policy", str(self.policy_file), "--policy-configmap", POLICY_CONFIGMAP,
            "--metrics-port", str(free_port()), *extra_args],
            env={"POD_NAMESPACE": "poolguard", "POD_NAME": "e2e-reconciler"})

        def leading() -> bool:
            process = self.reconciler
            if process is None or not process.alive():
                raise RuntimeError(f"reconciler exited:\n{process and process.tail()}")
            lease = self.api_get("/apis/coordination.k8s.io/v1/namespaces/poolguard/leases/"
                                 "poolguard-reconciler")
            return lease["spec"].get("holderIdentity", "").startswith("e2e-reconciler")

        wait_for("the reconciler to hold its Lease", leading, timeout=ready_timeout)

    def stop_reconciler(self) -> None:
        self.plane.stop_process("poolguard-reconcile")
        self.reconciler = None

    def set_policy(self, **scale_down: Any) -> None:
        """Change scaleDown settings in the ConfigMap and in the mounted file, as the
        kubelet would sync it; wait out the server's policy re-check interval."""
        policy = yaml.safe_load(self.policy_file.read_text())
        if all(policy["scaleDown"].get(k) == v for k, v in scale_down.items()):
            return
        policy["scaleDown"].update(scale_down)
        self.write_policy(yaml.safe_dump(policy, sort_keys=False))
        # Each serve worker re-reads a changed policy file at most 5 s after its last check
        # (Settings.policy_check_seconds); the reconciler follows the file likewise.
        time.sleep(6.0)

    def write_policy(self, text: str) -> None:
        """The policy ConfigMap's `policy.yaml` set to `text`, and the mounted file the
        kubelet would sync from it (the processes read that file)."""
        self.kubectl("-n", "poolguard", "patch", "configmap", "poolguard-policy",
                     "--type=merge", "-p", json.dumps({"data": {"policy.yaml": text}}),
                     check=True)
        self.policy_file.write_text(text)

    # -- reading --

    def api_get(self, path: str) -> dict[str, Any]:
        response = self.api.call_api(*self.api.param_serialize(
            "GET", path, header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"]))
        response.read()
        return json.loads(response.data)

    def pods(self, namespace: str, selector: str | None = None) -> list[dict[str, Any]]:
        query = f"?labelSelector={selector}" if selector else ""
        return self.api_get(f"/api/v1/namespaces/{namespace}/pods{query}")["items"]

    def node_pool(self) -> dict[str, str]:
        return {n.metadata.name: (n.metadata.labels or {}).get(POOL_LABEL, "")
                for n in self.core.list_node().items}

    def audit_events(self) -> Iterable[dict[str, Any]]:
        with open(self.plane.audit_log, encoding="utf-8") as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)


# --- other projects' controllers ------------------------------------------------------------


# tests/e2e/run.sh builds the Argo Rollouts and CloneSet controllers beside the first tests
# (which need neither), one after the other: in the run directory, the builds' pid, each
# build's exit status once it has ended and its log.
CONTROLLER_BUILDS_PID = "builds/pid"


def controller_binary(env: Environment, build: str, path: Path) -> Path:
    """`path`, a controller binary `make e2e` builds beside the first tests (`build`:
    `rollouts` or `kruise`, tests/e2e/build_BUILD.sh), once that build has ended (at once
    when none runs). FileNotFoundError, with the end of the build's log, when it failed or
    the binary is not there."""
    status = env.run_dir / "builds" / f"{build}.status"
    log = env.run_dir / "logs" / f"{build}-build.log"
    pid_file = env.run_dir / CONTROLLER_BUILDS_PID
    if pid_file.is_file():
        pid = int(pid_file.read_text())
        wait_for(f"the {build} build ({log.relative_to(env.run_dir)}) to end",
                 lambda: status.is_file() or not _alive(pid), timeout=3600, interval=2.0)
        failed = not status.is_file() or status.read_text().strip() != "0"
    else:
        failed = False
    if failed or not path.is_file():
        tail = log.read_text(errors="replace").splitlines()[-15:] if log.is_file() else []
        raise FileNotFoundError("\n".join([f"{path}: not built; run tests/e2e/build_{build}.sh "
                                           "(make e2e)", *tail]))
    return path


def _alive(pid: int) -> bool:
    """Is process `pid` alive (not gone, not a zombie its parent has yet to reap)?"""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


@dataclass(frozen=True)
class ControllerModule:
    """What a build script copied of another project's controller module into `directory`
    beside the control plane's bin directory: its CRDs in `crds` (`crd`: the one whose
    Established condition says they are served), its ClusterRole and more. A module whose
    CRDs come with a controller `make e2e` builds beside the first tests names that `build`
    and the `binary` it makes (`controller_binary`), waited for first."""

    directory: str
    crds: str
    crd: str
    build: str | None = None
    binary: str = ""

    def path(self, env: Environment) -> Path:
        """The module's directory, once built; FileNotFoundError when it is not."""
        path = env.plane.bin_dir.parent / self.directory
        if self.build is not None:
            controller_binary(env, self.build, path / self.binary)
        if not (path / self.crds).is_dir():
            raise FileNotFoundError(f"{path}: not built; run tests/e2e/build.sh (make e2e)")
        return path


def install_crds(env: Environment, module: ControllerModule) -> None:
    """The CRDs a controller's module ships, applied server-side (some are too large for
    the last-applied annotation; a minimal CRD another test made under the same name is
    replaced), then until its `crd` is Established. Again on a cluster that has them: a
    no-op apply."""
    env.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=e2e-crds",
                "-f", str(module.path(env) / module.crds), check=True)

    def established() -> bool:  # `kubectl wait` fails while the status has no conditions
        found = env.api_get(
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{module.crd}")
        return any(c["type"] == "Established" and c["status"] == "True"
                   for c in (found.get("status") or {}).get("conditions") or [])

    wait_for(f"CRD {module.crd} to be established", established, timeout=60)


def cluster_role(path: Path, name: str | None = None) -> dict[str, Any]:
    """The ClusterRole manifest a controller's module ships at `path`; `name` renames it
    (the module's own name may clash with another install's)."""
    role = yaml.safe_load(path.read_text())
    if name is not None:
        role["metadata"] = {"name": name}
    return dict(role)


def controller_kubeconfig(env: Environment, account: tuple[str, str], role: Mapping[str, Any],
                          binding: str, path: Path) -> Path:
    """A controller's own identity, as its install manifests would make it: the
    ServiceAccount `account` (namespace, name), made if missing, bound by the
    ClusterRoleBinding `binding` to the ClusterRole `role` (applied as given); `path` gets a
    kubeconfig with a 24 h token of it. The controller then meets the shipped RBAC and
    poolguard sees its real user name."""
    namespace, name = account
    if env.kubectl("get", "namespace", namespace).code != 0:
        env.kubectl("create", "namespace", namespace, check=True)
    if env.kubectl("-n", namespace, "get", "serviceaccount", name).code != 0:
        env.kubectl("-n", namespace, "create", "serviceaccount", name, check=True)
    role_binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": binding},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io",
                                "kind": "ClusterRole", "name": role["metadata"]["name"]},
                    "subjects": [{"kind": "ServiceAccount", "name": name,
                                  "namespace": namespace}]}
    env.kubectl("apply", "--server-side", "--field-manager=e2e", "-f", "-",
                stdin=json.dumps(role) + "\n---\n" + json.dumps(role_binding), check=True)
    token = env.kubectl("-n", namespace, "create", "token", name, "--duration=24h",
                        check=True).stdout.strip()
    path.write_text(kubeconfig_text(env.plane.server, env.plane.pki / "ca.crt",
                                    f"system:serviceaccount:{namespace}:{name}", token=token))
    return path


def start_controller(env: Environment, name: str, argv: Sequence[str],
                     ready: Callable[[Process], bool], *, what: str, timeout: float,
                     variables: Mapping[str, str] | None = None) -> Process:
    """Run a controller binary as a component of the control plane (its own process group,
    its output in RUN_DIR/logs/NAME.log, stopped with the plane) and wait up to `timeout`
    seconds until `ready(process)` holds (`what` names that in the timeout's message).
    A process that exits meanwhile is reported with the tail of its log."""
    process = env.plane.spawn(name, argv, env=dict(variables or {}))

    def check() -> bool:
        if not process.alive():
            raise RuntimeError(f"{name} exited:\n{process.tail()}")
        return ready(process)

    wait_for(what, check, timeout=timeout)
    return process


def stop_controller(env: Environment, name: str) -> None:
    """Stop what `start_controller(env, name, ...)` started (nothing if it is not running)."""
    env.plane.stop_process(name)


def fake_node(name: str, pool: str, index: int) -> client.V1Node:
    now = dt.datetime.now(dt.UTC)
    resources = {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return client.V1Node(
        metadata=client.V1ObjectMeta(name=name, labels={
            POOL_LABEL: pool, "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
            "e2e.poolguard.dev/fake": "true"}),
        status=client.V1NodeStatus(
            capacity=resources, allocatable=resources,
            addresses=[client.V1NodeAddress(type="InternalIP", address=f"10.1.0.{index}")],
            conditions=[client.V1NodeCondition(type="Ready", status="True", reason="KubeletReady",
                                               last_heartbeat_time=now,
                                               last_transition_time=now)]))


def local_overlay(port: int, directory: Path) -> str:
    """A kustomization on top of manifests/overlays/local-dev that moves the URLs to `port`
    (what the overlay's header tells a user with another port to do)."""
    paths = {"MutatingWebhookConfiguration": ("mutate-pods", "mutate-bindings", "mutate-scale"),
             "ValidatingWebhookConfiguration": ("validate-scale", "validate-workloads")}
    patches = []
    for kind, ends in paths.items():
        ops = [{"op": "replace", "path": f"/webhooks/{i}/clientConfig/url",
                "value": f"https://127.0.0.1:{port}/{end}"} for i, end in enumerate(ends)]
        patches.append({"target": {"group": "admissionregistration.k8s.io", "kind": kind,
                                   "name": "poolguard"}, "patch": json.dumps(ops)})
    return yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        # kustomize refuses absolute paths to other kustomizations
        "resources": [os.path.relpath(REPO / "manifests" / "overlays" / "local-dev", directory)],
        "patches": patches}, sort_keys=False)


def annotations(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("annotations") or {})


def has_pool_cost(obj: Mapping[str, Any], pool: str) -> bool:
    """Does `obj` carry a cost of `pool`'s band in the shipped policy: the pool's cost, or
    in a pool that consolidates (hybrid) a node rank inside its band?"""
    value = annotations(obj).get(COST_ANNOTATION)
    found = SHIPPED_POLICY.pool_by_name(pool)
    low, high = ((found.band.low, found.band.high) if found else
                 (SHIPPED_POLICY.default_deletion_cost,) * 2)
    return value is not None and value.lstrip("-").isdigit() and low <= int(value) <= high


def is_active(pod: Mapping[str, Any]) -> bool:
    return (not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))
