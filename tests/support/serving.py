"""Run `python -m webhook serve` as a user would, with certificates from the certs tool."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import requests

from certs.pki import generate_ca, generate_serving_cert

ROOT = Path(__file__).resolve().parents[2]


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


@contextmanager
def running_server(directory: Path, *args: str, workers: int = 2, ready_timeout: float = 30):
    """Start `serve` on a free port; yields (base_url, ca_file, process)."""
    tls = make_certs(directory)
    port = free_port()
    # As `make run` and the manifests start it: `serve` sets up its own metrics directory
    # (a test-only PROMETHEUS_MULTIPROC_DIR once hid an empty /metrics).
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    command = [sys.executable, "-m", "webhook", "serve", "--cert", str(tls["cert"]),
               "--key", str(tls["key"]), "--host", "127.0.0.1", "--port", str(port),
               "--workers", str(workers), *args]
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
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()
