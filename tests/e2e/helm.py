"""poolguard installed by its Helm chart into the e2e control plane, with the two parts of a
cluster this control plane lacks: something that runs Jobs, and kubelets that run pods.

- `helm install` / `helm upgrade` run for real, hooks included. While helm waits for a
  hook Job, `run_helm` runs that Job's container on this machine as the Job's own
  ServiceAccount (a TokenRequest token) and then writes the Job's status as the Job
  controller would (Complete, or Failed); helm then goes on, and deletes the hook objects
  per their delete policy.
- `LocalPod` runs a container of a rendered pod template on this machine: the image's
  entrypoint (the Dockerfile's) or the container's command, the args as rendered, the
  volumes it mounts written to a directory (ConfigMap, Secret and projected sources read
  from the API, as the kubelet does) with the mount paths in the args mapped there, env
  from fieldRefs, and `--kubeconfig` with the ServiceAccount's token in place of the
  in-cluster config.
- The API server calls the webhooks through the chart's Service: the control plane's
  Service CIDR is on loopback (SERVICE_CIDR), so a ClusterIP is an address of this machine,
  and `serve` listens on ClusterIP:port (what kube-proxy would forward to the pod).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.controlplane import Process, kubeconfig_text, wait_for
from tests.e2e.harness import REPO, Environment, Result

CHART = REPO / "charts" / "poolguard"
HELM_GOMOD = REPO / "tests" / "deploy" / "gomod" / "helm" / "go.mod"
HELM_VERSION = re.search(r"^require helm\.sh/helm/v3 (\S+)$", HELM_GOMOD.read_text(),
                         re.M).group(1)
# Where mk/chart.mk builds it (`make helm`; tests/e2e/run.sh runs that first).
HELM = Path.home() / ".cache" / "poolguard-e2e" / f"helm-{HELM_VERSION}" / "helm"
RELEASE = "poolguard"


def image_entrypoint() -> list[str]:
    """The poolguard image's ENTRYPOINT, read from the Dockerfile."""
    match = re.search(r"^ENTRYPOINT\s+(\[.*\])\s*$", (REPO / "Dockerfile").read_text(), re.M)
    assert match, "Dockerfile has no exec-form ENTRYPOINT"
    return json.loads(match.group(1))


def local_argv(argv: Sequence[str]) -> list[str]:
    """A container's argv with the image's `python` replaced by this interpreter."""
    return [sys.executable if i == 0 and a == "python" else a for i, a in enumerate(argv)]


# --- jobs ----------------------------------------------------------------------------------


@dataclass
class JobRun:
    """One Job run on this machine: its name, argv (as rendered) and how it ended."""

    name: str
    argv: list[str]
    code: int
    output: str


@dataclass
class HelmRun:
    result: Result
    jobs: list[JobRun] = field(default_factory=list)


def service_account_kubeconfig(env: Environment, namespace: str, account: str,
                               path: Path) -> Path:
    """A kubeconfig with a fresh TokenRequest token of the ServiceAccount."""
    token = env.kubectl("-n", namespace, "create", "token", account, "--duration=2h",
                        check=True).stdout.strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(kubeconfig_text(env.plane.server, env.plane.pki / "ca.crt",
                                    f"system:serviceaccount:{namespace}:{account}",
                                    token=token))
    return path


def run_pod_to_completion(env: Environment, namespace: str, pod_spec: Mapping[str, Any],
                          name: str) -> JobRun:
    """Run the (single) container of a Job's pod template here, as its ServiceAccount."""
    (container,) = pod_spec["containers"]
    assert not container.get("volumeMounts"), "Job pods with volumes are not emulated"
    kubeconfig = service_account_kubeconfig(
        env, namespace, pod_spec["serviceAccountName"],
        env.run_dir / "helm" / "jobs" / f"{name}.kubeconfig")
    argv = [*(container.get("command") or image_entrypoint()), *container.get("args", [])]
    done = env.run([*local_argv(argv), "--kubeconfig", kubeconfig], timeout=120)
    output = done.stdout + done.stderr
    with open(env.run_dir / "logs" / "helm-jobs.log", "a", encoding="utf-8") as log:
        log.write(f"--- {name}: {' '.join(argv)} (exit {done.code})\n{output}")
    return JobRun(name, argv, done.code, output)


def _job_status(run: JobRun) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def condition(kind: str, reason: str) -> dict[str, Any]:
        return {"type": kind, "status": "True", "reason": reason, "lastTransitionTime": now,
                "lastProbeTime": now}

    if run.code == 0:  # the order the Job controller writes them in since 1.31
        return {"startTime": now, "completionTime": now, "succeeded": 1, "active": 0,
                "conditions": [condition("SuccessCriteriaMet", "CompletionsReached"),
                               condition("Complete", "CompletionsReached")]}
    return {"startTime": now, "failed": 1, "active": 0,
            "conditions": [condition("FailureTarget", "BackoffLimitExceeded"),
                           condition("Failed", "BackoffLimitExceeded")]}


def run_helm(env: Environment, *args: str, namespace: str, timeout: float = 180) -> HelmRun:
    """`helm ARGS` as the admin, running the hook Jobs it creates in `namespace` meanwhile."""
    argv = [str(HELM), *args, "--namespace", namespace, "--kubeconfig",
            str(env.plane.kubeconfig()), "--timeout", f"{int(timeout)}s"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, cwd=REPO)
    run = HelmRun(Result(argv, -1, "", ""))
    seen: set[str] = set()
    deadline = time.monotonic() + timeout + 10
    try:
        while process.poll() is None and time.monotonic() < deadline:
            jobs = env.api_get(f"/apis/batch/v1/namespaces/{namespace}/jobs")["items"]
            for job in jobs:
                meta = job["metadata"]
                if meta["uid"] in seen or (job.get("status") or {}).get("conditions"):
                    continue
                seen.add(meta["uid"])
                job_run = run_pod_to_completion(env, namespace, job["spec"]["template"]["spec"],
                                                meta["name"])
                run.jobs.append(job_run)
                response = env.api.call_api(*env.api.param_serialize(
                    "PATCH", f"/apis/batch/v1/namespaces/{namespace}/jobs/{meta['name']}/status",
                    body={"status": _job_status(job_run)},
                    header_params={"Content-Type": "application/merge-patch+json",
                                   "Accept": "application/json"},
                    auth_settings=["BearerToken"]))
                response.read()
                if response.status >= 300:  # helm would wait for this Job until its timeout
                    job_run.output += f"\n(writing the Job status failed: {response.data!r})"
                    process.kill()
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            process.kill()
        stdout, stderr = process.communicate()
    run.result = Result(argv, process.returncode, stdout, stderr)
    return run


# --- pods ----------------------------------------------------------------------------------


@dataclass
class LocalPod:
    """A Deployment's pod run on this machine (see the module docstring)."""

    env: Environment
    deployment: dict[str, Any]  # as read from the API server (what helm applied)
    network_args: list[str]     # --host/--port: where kube-proxy would send the traffic
    process: Process | None = None

    @property
    def name(self) -> str:
        return self.deployment["metadata"]["name"]

    @property
    def namespace(self) -> str:
        return self.deployment["metadata"]["namespace"]

    @property
    def pod_spec(self) -> dict[str, Any]:
        return self.deployment["spec"]["template"]["spec"]

    @property
    def container(self) -> dict[str, Any]:
        return self.pod_spec["containers"][0]

    @property
    def root(self) -> Path:
        """This pod's file system: mount paths are made under it."""
        return self.env.run_dir / "helm" / "pods" / self.name

    def local_path(self, path: str) -> str:
        for mount in sorted(self.container.get("volumeMounts", []),
                            key=lambda m: -len(m["mountPath"])):
            prefix = mount["mountPath"].rstrip("/")
            if path == prefix or path.startswith(prefix + "/"):
                return str(self.root) + path
        return path

    def sync_volumes(self) -> None:
        """Write what each mounted volume holds now (the kubelet's periodic sync)."""
        volumes = {v["name"]: v for v in self.pod_spec.get("volumes", [])}
        for mount in self.container.get("volumeMounts", []):
            target = Path(str(self.root) + mount["mountPath"])
            target.mkdir(parents=True, exist_ok=True)
            for relative, data in self._volume_files(volumes[mount["name"]]).items():
                path = target / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                temporary = path.with_name(f".{path.name}.tmp")
                temporary.write_bytes(data)
                os.replace(temporary, path)  # atomic, as the kubelet's symlink swap

    def _volume_files(self, volume: Mapping[str, Any]) -> dict[str, bytes]:
        if "emptyDir" in volume:
            return {}
        if "projected" in volume:
            files: dict[str, bytes] = {}
            for source in volume["projected"]["sources"]:
                files.update(self._volume_files(source))
            return files
        if "configMap" in volume:
            spec = volume["configMap"]
            data = {k: v.encode() for k, v in self._read("configmaps", spec["name"]).items()}
        elif "secret" in volume:
            spec = volume["secret"]
            data = {k: base64.b64decode(v) for k, v in self._read(
                "secrets", spec.get("secretName") or spec["name"]).items()}
        else:
            raise AssertionError(f"volume {volume.get('name')}: not emulated ({volume})")
        items = spec.get("items") or [{"key": k, "path": k} for k in data]
        return {item["path"]: data[item["key"]] for item in items}

    def _read(self, resource: str, name: str) -> dict[str, str]:
        obj = self.env.api_get(f"/api/v1/namespaces/{self.namespace}/{resource}/{name}")
        return obj.get("data") or {}

    def pod_name(self) -> str:
        """The name of a pod of this Deployment (the fake kubelet runs them as pause
        containers), for the downward API: the reconciler's Lease holder is named after it."""
        selector = ",".join(f"{k}={v}" for k, v in
                            self.deployment["spec"]["selector"]["matchLabels"].items())
        pods = wait_for(f"a pod of Deployment {self.name}",
                        lambda: self.env.pods(self.namespace, selector), timeout=60)
        return sorted(p["metadata"]["name"] for p in pods)[0]

    def start(self) -> Process:
        self.sync_volumes()
        pod_name = self.pod_name()
        env: dict[str, str] = {}
        fields = {"metadata.name": pod_name, "metadata.namespace": self.namespace}
        for variable in self.container.get("env", []):
            if "value" in variable:
                env[variable["name"]] = variable["value"]
            else:
                env[variable["name"]] = fields[variable["valueFrom"]["fieldRef"]["fieldPath"]]
        kubeconfig = service_account_kubeconfig(
            self.env, self.namespace, self.pod_spec["serviceAccountName"],
            self.root.with_suffix(".kubeconfig"))
        argv = [*(self.container.get("command") or image_entrypoint()),
                *self.container.get("args", [])]
        # Mount paths are mapped in the container's argv only: this interpreter may itself live
        # under a mounted path (a checkout in /tmp, where the chart mounts an emptyDir).
        argv = local_argv([self.local_path(a) for a in argv])
        self.process = self.env.plane.spawn(
            f"helm-{self.name}", [*argv, "--kubeconfig", str(kubeconfig), *self.network_args],
            env=env)
        return self.process

    def stop(self) -> None:
        if self.process is not None:
            self.env.plane.stop_process(self.process.name)
            self.process = None

    def check_alive(self) -> None:
        if self.process is not None and not self.process.alive():
            raise RuntimeError(f"{self.process.name} exited:\n{self.process.tail()}")


def served_certificate(host: str, port: int, server_name: str, ca_pem: bytes) -> bytes:
    """The DER certificate a TLS server presents for `server_name`, verified against the CA
    (what the API server checks when it calls a webhook through a Service)."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with socket.create_connection((host, port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=server_name) as tls:
        return tls.getpeercert(binary_form=True)


def https_status(host: str, port: int, path: str, server_name: str, ca_pem: bytes) -> int:
    """GET `path` over verified TLS with SNI `server_name`; the HTTP status code."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with socket.create_connection((host, port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname=server_name) as tls:
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {server_name}\r\nConnection: close\r\n\r\n"
                    .encode())
        status_line = tls.recv(64).decode(errors="replace")
    return int(status_line.split()[1])
