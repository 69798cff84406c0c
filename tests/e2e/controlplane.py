"""A local Kubernetes control plane for the e2e tier: etcd, kube-apiserver,
kube-controller-manager and kube-scheduler on 127.0.0.1, with a PKI of its own.

Every component runs under its own identity (client certificates whose CN is the user and
O the groups), RBAC is on, and the controllers use per-controller ServiceAccount
credentials, as in a real cluster. Each process runs in its own process group, recorded
in RUN_DIR/pids so `python -m tests.e2e.controlplane down RUN_DIR` can stop whatever is
left (make e2e calls it from a trap).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

K8S_VERSION = "v1.37.2"
REPO = Path(__file__).resolve().parents[2]
DEFAULT_BIN = Path.home() / ".cache" / "poolguard-e2e" / K8S_VERSION / "bin"
# The disruption controller keeps PodDisruptionBudgets' status, which the Eviction API
# decides on (tests/e2e/test_rebalance.py); with no budget it writes nothing. No Job
# controller: tests/e2e/helm.py plays it for the chart's hook Jobs.
CONTROLLERS = ("deployment-controller", "replicaset-controller", "statefulset-controller",
               "serviceaccount-controller", "garbage-collector-controller",
               "namespace-controller", "horizontal-pod-autoscaler-controller",
               "disruption-controller")
# The front proxy's client certificate: the API server presents it when it proxies a request
# to an aggregated API (an APIService), with the caller in X-Remote-User/-Group headers.
FRONT_PROXY_CLIENT = "front-proxy-client"
# Identities: kubeconfig name -> (user, groups)
IDENTITIES = {
    "admin": ("e2e-admin", ("system:masters",)),
    "controller-manager": ("system:kube-controller-manager", ()),
    "scheduler": ("system:kube-scheduler", ()),
    "fake-kubelet": ("e2e-fake-kubelet", ("e2e:fake-kubelets",)),
}
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  # Scale requests and workload updates: the admission webhooks' audit annotations.
  - level: Metadata
    resources:
      - group: apps
        resources: ["deployments", "deployments/scale", "replicasets", "replicasets/scale",
                    "statefulsets", "statefulsets/scale"]
    verbs: ["update", "patch"]
  - level: None
"""

T = TypeVar("T")


def wait_for(what: str, check: Callable[[], T | None], timeout: float = 60.0,
             interval: float = 0.2) -> T:
    """Poll `check` until it returns a truthy value; TimeoutError naming `what` otherwise."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while True:
        try:
            value = check()
            if value:
                return value
        except Exception as err:  # the thing polled may not exist yet
            last_error = err
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick for an ephemeral bind)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- PKI ---------------------------------------------------------------------------------


def _pem_key(key: Any) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _certificate(subject: x509.Name, public_key: Any, issuer: x509.Name, signing_key: Any,
                 *, ca: bool = False, server_names: Sequence[str] = (),
                 server_ips: Sequence[str] = (), client: bool = False) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
               .public_key(public_key).serial_number(x509.random_serial_number())
               .not_valid_before(now - dt.timedelta(minutes=5))
               .not_valid_after(now + dt.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                          content_commitment=False, key_encipherment=False,
                          data_encipherment=False, key_agreement=False, encipher_only=False,
                          decipher_only=False), critical=True)
    else:
        usages = ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else []) + (
            [ExtendedKeyUsageOID.SERVER_AUTH] if server_names or server_ips else [])
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if server_names or server_ips:
        sans: list[x509.GeneralName] = [x509.DNSName(n) for n in server_names]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in server_ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(signing_key, hashes.SHA256())


def make_pki(directory: Path) -> None:
    """CA, apiserver serving cert, ServiceAccount key pair, one client cert per identity,
    and the front proxy's CA and client cert (the aggregation layer)."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "poolguard-e2e-ca")])
    ca_cert = _certificate(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
    (directory / "ca.crt").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    (directory / "ca.key").write_bytes(_pem_key(ca_key))

    def issue(stem: str, subject: x509.Name, **kwargs: Any) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(subject, key.public_key(), ca_name, ca_key, **kwargs)
        (directory / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (directory / f"{stem}.key").write_bytes(_pem_key(key))

    issue("apiserver", x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]),
          server_names=("localhost", "kubernetes", "kubernetes.default",
                        "kubernetes.default.svc"),
          server_ips=("127.0.0.1", "10.0.0.1"))
    for stem, (user, groups) in IDENTITIES.items():
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, user)]
        attributes += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        issue(f"client-{stem}", x509.Name(attributes), client=True)
    # A CA of its own, as kubeadm does: a client certificate of the cluster CA must not
    # be able to assert any user in X-Remote-User to an aggregated API server.
    proxy_key = ec.generate_private_key(ec.SECP256R1())
    proxy_ca = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "poolguard-e2e-front-proxy")])
    proxy_cert = _certificate(proxy_ca, proxy_key.public_key(), proxy_ca, proxy_key, ca=True)
    (directory / "front-proxy-ca.crt").write_bytes(
        proxy_cert.public_bytes(serialization.Encoding.PEM))
    client_key = ec.generate_private_key(ec.SECP256R1())
    client_cert = _certificate(
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, FRONT_PROXY_CLIENT)]),
        client_key.public_key(), proxy_ca, proxy_key, client=True)
    (directory / "front-proxy-client.crt").write_bytes(
        client_cert.public_bytes(serialization.Encoding.PEM))
    (directory / "front-proxy-client.key").write_bytes(_pem_key(client_key))
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (directory / "sa.key").write_bytes(_pem_key(sa_key))
    (directory / "sa.pub").write_bytes(sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))


def kubeconfig_text(server: str, ca_file: Path, user: str, *, cert: Path | None = None,
                    key: Path | None = None, token: str | None = None) -> str:
    """A one-context kubeconfig (JSON is YAML) for a client certificate or a bearer token."""
    credentials: dict[str, str] = {}
    if token is not None:
        credentials["token"] = token
    else:
        credentials = {"client-certificate": str(cert), "client-key": str(key)}
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "e2e",
        "clusters": [{"name": "e2e", "cluster": {"server": server,
                                                 "certificate-authority": str(ca_file)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
    }
    return json.dumps(config, indent=2) + "\n"


# --- processes ---------------------------------------------------------------------------


def _die_with_parent() -> None:
    """preexec: SIGTERM this child when the process that started it dies (PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


@dataclass
class ControlPlane:
    """The running control plane. `start()` brings it up, `stop()` takes it down."""

    run_dir: Path
    bin_dir: Path = DEFAULT_BIN
    keep: bool = False  # E2E_KEEP: leave the processes running after the tests
    processes: dict[str, Process] = field(default_factory=dict)
    apiserver_port: int = 0
    etcd_port: int = 0
    # The Services' ClusterIP range. On loopback (e.g. 127.0.100.0/24) a ClusterIP routes to
    # this machine, so the API server reaches a webhook registered by Service reference
    # (the Helm install) at a process listening on that ClusterIP: no kube-proxy needed.
    service_cidr: str = "10.0.0.0/24"
    # API rate limits of the controller-manager and the scheduler (bench/bench_scale.py
    # raises them: at 30,000 pods the defaults here would take most of the run)
    client_qps: int = 200
    client_burst: int = 400

    @property
    def pki(self) -> Path:
        return self.run_dir / "pki"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def audit_log(self) -> Path:
        return self.run_dir / "logs" / "audit.log"

    def kubeconfig(self, identity: str = "admin") -> Path:
        return self.run_dir / f"{identity}.kubeconfig"

    def binary(self, name: str) -> str:
        path = self.bin_dir / name
        if not os.access(path, os.X_OK):
            raise FileNotFoundError(f"{path}: not built; run tests/e2e/build.sh (make e2e)")
        return str(path)

    # -- lifecycle --

    def start(self) -> None:
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        make_pki(self.pki)
        self.apiserver_port = free_port()
        for identity, (user, _groups) in IDENTITIES.items():
            self.kubeconfig(identity).write_text(kubeconfig_text(
                self.server, self.pki / "ca.crt", user, cert=self.pki / f"client-{identity}.crt",
                key=self.pki / f"client-{identity}.key"))
        self._start_etcd()
        self._start_apiserver()
        self._start_controller_manager()
        self._start_scheduler()
        (self.run_dir / "env").write_text(
            f"export KUBECONFIG={self.kubeconfig()}\nexport PATH={self.bin_dir}:$PATH\n")

    def spawn(self, name: str, argv: Sequence[str], env: dict[str, str] | None = None) -> Process:
        """Start a process in its own group, logging to RUN_DIR/logs/NAME.log."""
        log = self.run_dir / "logs" / f"{name}.log"
        with open(log, "ab") as out:
            popen = subprocess.Popen(  # cwd: the repository, for `python -m tests.e2e...`
                list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env={**os.environ, **(env or {})}, cwd=REPO,
                preexec_fn=None if self.keep else _die_with_parent)
        process = Process(name, popen, log)
        self.processes[name] = process
        with open(self.run_dir / "pids", "a") as pids:
            pids.write(f"{popen.pid} {name}\n")
        return process

    def stop_process(self, name: str, timeout: float = 5.0) -> None:
        process = self.processes.pop(name, None)
        if process is None or not process.alive():
            return
        _stop_group(process.popen.pid, timeout)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.popen.wait(timeout)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop everything: SIGTERM to every group at once, SIGKILL to what is left after
        `timeout` (the data is thrown away; nothing needs a graceful shutdown)."""
        groups = [p.popen.pid for p in self.processes.values() if p.alive()]
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for pgid in groups:
            _stop_group(pgid, max(deadline - time.monotonic(), 0.0))
        for process in self.processes.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.popen.wait(timeout)
        self.processes.clear()
        (self.run_dir / "pids").unlink(missing_ok=True)  # nothing left for `down`

    def check_alive(self) -> None:
        """Raise with the log tail of any component that died."""
        for process in self.processes.values():
            if not process.alive():
                raise RuntimeError(f"{process.name} exited with {process.popen.returncode}; "
                                   f"last lines of {process.log}:\n{process.tail()}")

    # -- components --

    def _start_etcd(self) -> None:
        self.etcd_port, peer = free_port(), free_port()
        client, peer_url = f"http://127.0.0.1:{self.etcd_port}", f"http://127.0.0.1:{peer}"
        self.spawn("etcd", [
            self.binary("etcd"), "--name", "e2e", "--data-dir", str(self.run_dir / "etcd"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", f"e2e={peer_url}", "--unsafe-no-fsync", "--log-level", "warn",
            "--quota-backend-bytes", str(4 * 1024**3)])

        def healthy() -> bool:
            self.check_alive()
            with urllib.request.urlopen(f"{client}/health", timeout=2) as answer:
                return json.loads(answer.read()).get("health") == "true"

        wait_for("etcd /health", healthy, timeout=60)

    def _start_apiserver(self) -> None:
        pki = self.pki
        (self.run_dir / "audit-policy.yaml").write_text(AUDIT_POLICY)
        self.spawn("kube-apiserver", [
            self.binary("kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
            "--bind-address=127.0.0.1", f"--secure-port={self.apiserver_port}",
            "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
            f"--cert-dir={self.run_dir / 'apiserver'}",
            f"--tls-cert-file={pki / 'apiserver.crt'}",
            f"--tls-private-key-file={pki / 'apiserver.key'}",
            f"--client-ca-file={pki / 'ca.crt'}",
            "--authorization-mode=Node,RBAC",
            f"--service-cluster-ip-range={self.service_cidr}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            # Adds node.kubernetes.io/not-ready to every new Node; no node-lifecycle
            # controller runs here to take it off again.
            "--disable-admission-plugins=TaintNodesByCondition",
            # The aggregation layer (tests/e2e/fake_metrics.py serves metrics.k8s.io)
            f"--requestheader-client-ca-file={pki / 'front-proxy-ca.crt'}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={pki / 'front-proxy-client.crt'}",
            f"--proxy-client-key-file={pki / 'front-proxy-client.key'}",
            f"--audit-policy-file={self.run_dir / 'audit-policy.yaml'}",
            f"--audit-log-path={self.audit_log}", "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--profiling=false", "--v=1"])
        wait_for("kube-apiserver /readyz", lambda: self._apiserver_get("/readyz") == "ok",
                 timeout=120)

    def _apiserver_get(self, path: str) -> str:
        self.check_alive()
        context = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        context.load_cert_chain(self.pki / "client-admin.crt", self.pki / "client-admin.key")
        try:
            with urllib.request.urlopen(self.server + path, context=context,
                                        timeout=5) as answer:
                return answer.read().decode()
        except urllib.error.HTTPError as err:
            return f"HTTP {err.code}"

    def _start_controller_manager(self) -> None:
        kubeconfig = str(self.kubeconfig("controller-manager"))
        self.spawn("kube-controller-manager", [
            self.binary("kube-controller-manager"),
            f"--kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false", "--use-service-account-credentials=true",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={self.pki / 'sa.key'}",
            f"--root-ca-file={self.pki / 'ca.crt'}",
            "--bind-address=127.0.0.1", f"--secure-port={free_port()}",
            f"--kube-api-qps={self.client_qps}", f"--kube-api-burst={self.client_burst}",
            "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
            "--concurrent-statefulset-syncs=10",
            # the HPA's default is 15 s; the e2e tier waits for two of its syncs
            "--horizontal-pod-autoscaler-sync-period=5s", "--v=1"])

    def _start_scheduler(self) -> None:
        kubeconfig = str(self.kubeconfig("scheduler"))
        config = self.run_dir / "scheduler.yaml"
        config.write_text(json.dumps({
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"kubeconfig": kubeconfig, "qps": self.client_qps,
                                 "burst": self.client_burst},
            "leaderElection": {"leaderElect": False},
        }))
        self.spawn("kube-scheduler", [
            self.binary("kube-scheduler"), f"--config={config}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={free_port()}", "--v=1"])


def _stop_group(pgid: int, timeout: float) -> None:
    """SIGTERM the process group, SIGKILL it if still there after `timeout`."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def down(run_dir: Path) -> int:
    """Stop every process group recorded in RUN_DIR/pids (the ones this run started)."""
    pids = run_dir / "pids"
    if not pids.exists():
        return 0
    stopped = 0
    for line in reversed(pids.read_text().splitlines()):
        pid, _, name = line.partition(" ")
        try:
            # Only our own groups: the recorded pid still leads its group and its command
            # line names this run's directory (a pid reused by another process does not).
            if os.getpgid(int(pid)) != int(pid):
                continue
            if str(run_dir).encode() not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
        except (ProcessLookupError, FileNotFoundError):
            continue
        _stop_group(int(pid), 10.0)
        stopped += 1
        print(f"stopped {name} (process group {pid})")
    pids.unlink()
    return stopped


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "down":
        down(Path(sys.argv[2]))
    else:
        sys.exit("usage: python -m tests.e2e.controlplane down RUN_DIR")
