"""Run `python -m webhook serve` as a user would, with certificates from the certs tool."""

from __future__ import annotations

import base64
import http.client
import json
import os
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import jsonpatch
import requests

from certs.pki import generate_ca, generate_serving_cert
from webhook.cluster.state import EXAMPLE_STATE

ROOT = Path(__file__).resolve().parents[2]


def stop_group(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process group `process` leads; SIGKILL it if it outlives `timeout`."""
    if process.poll() is not None:  # a test may have stopped it already
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_certs(directory: Path) -> dict[str, Path]:
    """A CA and a serving certificate for localhost, made by poolguard's own certs code."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = generate_ca()
    key, cert = generate_serving_cert(ca_key, ca_cert, ["localhost"], ["127.0.0.1"])
    paths = {"ca": directory / "ca.crt", "cert": directory / "tls.crt",
             "key": directory / "tls.key"}
    (directory / "ca.key").write_bytes(ca_key)  # lets a test sign a rotated certificate
    paths["ca"].write_bytes(ca_cert)
    paths["cert"].write_bytes(cert)
    paths["key"].write_bytes(key)
    return paths


def rotate(directory: Path) -> None:
    """Write a new pair signed by the same CA the way the certs tool does: atomic renames."""
    ca_key = (directory / "ca.key").read_bytes() if (directory / "ca.key").exists() else None
    assert ca_key, "the test CA key is needed to sign a rotated certificate"
    key, cert = generate_serving_cert(ca_key, (directory / "ca.crt").read_bytes(),
                                      ["localhost"], ["127.0.0.1"])
    for name, data in (("tls.key", key), ("tls.crt", cert)):
        temporary = directory / f".{name}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, directory / name)


def verifying_session(ca: Path) -> requests.Session:
    """A requests session that trusts only `ca` (REQUESTS_CA_BUNDLE would override verify)."""
    session = requests.Session()
    session.verify = str(ca)
    session.trust_env = False
    return session


def admission_response(server: tuple[str, requests.Session], path: str,
                       body: dict) -> dict:
    """POST an AdmissionReview to `path` of a running server (url, session) and return its
    `response`, after checking the envelope the API server requires: 200, JSON, an
    admission.k8s.io/v1 AdmissionReview, the request's uid echoed."""
    url, session = server
    answer = session.post(url + path, json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["Content-Type"] == "application/json"
    document = answer.json()
    assert (document["apiVersion"], document["kind"]) == ("admission.k8s.io/v1",
                                                          "AdmissionReview")
    assert document["response"]["uid"] == body["request"]["uid"]
    return document["response"]


def patched(response: dict, obj: dict) -> dict:
    """`obj` with the response's JSON Patch applied, as the API server applies it."""
    assert response["patchType"] == "JSONPatch"
    return jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))


@contextmanager
def running_server(directory: Path, *args: str, workers: int | None = None,
                   ready_timeout: float = 30):
    """Start `serve` on a free port; yields (base_url, ca_file, process).

    `workers` None keeps serve's own default, as a user gets it.
    """
    tls = make_certs(directory)
    port = free_port()
    # As `make run` and the manifests start it: `serve` sets up its own metrics directory
    # (a PROMETHEUS_MULTIPROC_DIR set for the tests could hide an empty /metrics).
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    command = [sys.executable, "-m", "webhook", "serve", "--cert", str(tls["cert"]),
               "--key", str(tls["key"]), "--host", "127.0.0.1", "--port", str(port),
               *(["--workers", str(workers)] if workers else []), *args]
    log = (directory / "server.log").open("w")
    process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    url = f"https://localhost:{port}"
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if process.poll() is not None:
                raise RuntimeError("server exited: " + (directory / "server.log").read_text())
            try:
                requests.get(url + "/healthz", verify=tls["ca"], timeout=1)
                break
            except requests.RequestException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url, tls["ca"], process
    finally:
        stop_group(process, timeout=15)
        log.close()


@contextmanager
def serve_example(directory: Path) -> Iterator[tuple[str, requests.Session]]:
    """`serve` on the bundled example state; yields (base_url, a session trusting its CA)."""
    with running_server(directory, "--state", str(EXAMPLE_STATE)) as (url, ca, _process):
        yield url, verifying_session(ca)


# --- the server exactly as `make run` starts it ------------------------------------------

ANSWER_WITHIN = 1.0  # the slowest answer the serving tests accept on an idle machine


def cpu_slowness(rounds: int = 5, busy: float = 0.04) -> float:
    """How many times slower than on an idle core a CPU-bound process runs here now: the
    wall time a busy loop takes per second of CPU it gets (1.0 with a core to itself),
    the median of `rounds` loops of `busy` CPU seconds. Call it while this process runs
    nothing else: its other threads' CPU would count as its own."""
    ratios = []
    for _ in range(rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        while time.process_time() - cpu < busy:
            pass  # burn CPU: the loop itself is what is timed
        ratios.append((time.perf_counter() - wall) / (time.process_time() - cpu))
    ratios.sort()
    return ratios[len(ratios) // 2]


def answer_bound(nominal: float, slowness: float, ceiling: float) -> float:
    """The slowest answer to accept: `nominal` (an idle machine's bound) stretched by the
    machine's `slowness`, never past `ceiling` (where the bound would stop telling the
    behaviour checked from a slow machine)."""
    return min(nominal * max(slowness, 1.0), ceiling)


def make_run_command(port: int, cert_dir: Path) -> list[str]:
    """The command `make run` executes, read from the Makefile with `make -n`."""
    output = subprocess.run(["make", "-s", "-n", "run", f"PORT={port}",
                             f"CERT_DIR={cert_dir}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    output = output.replace("\\\n", " ")  # recipe lines continued with a backslash
    line = next(line for line in output.splitlines() if "-m webhook serve" in line)
    command = shlex.split(line)
    command[0] = sys.executable  # the interpreter running the tests, i.e. the venv's
    return command


@dataclass
class Server:
    url: str
    host: str
    port: int
    ca: Path
    log: Path
    process: subprocess.Popen

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca))
        context.check_hostname = False
        return context


@contextmanager
def served_like_make_run(directory: Path) -> Iterator[Server]:
    tls = make_certs(directory)
    port = free_port()
    log = directory / "server.log"
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    with log.open("w") as out:
        process = subprocess.Popen(make_run_command(port, directory), cwd=ROOT, env=env,
                                   stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    server = Server(f"https://127.0.0.1:{port}", "127.0.0.1", port, tls["ca"], log, process)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, log.read_text()
            try:
                status, _, _ = request(server, "GET", "/healthz", timeout=1)
                if status == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield server
    finally:
        stop_group(process)


def request(server: Server, method: str, path: str, body: bytes | None = None,
            timeout: float = ANSWER_WITHIN,
            connection: http.client.HTTPSConnection | None = None,
            ) -> tuple[int, dict[str, str], bytes]:
    conn = connection or http.client.HTTPSConnection(
        server.host, server.port, timeout=timeout, context=server.client_context())
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        if connection is None:
            conn.close()


def worker_pids(master_pid: int) -> list[int]:
    """The gunicorn workers of `serve` (its child processes): /readyz names no process."""
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    return [int(child) for child in children]
