"""Faults the server must survive: rotated certificates, bad policy files, killed workers."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests
import yaml

from tests.support import factories as f
from tests.support import reviews
from tests.support.serving import (
    free_port,
    request,
    rotate,
    running_server,
    served_like_make_run,
    worker_pids,
)
from webhook.cluster.state import EXAMPLE_STATE

ROOT = Path(__file__).resolve().parents[2]


class Load:
    """Keep-alive clients that reconnect every `per_connection` requests, counting failures."""

    def __init__(self, url: str, ca: Path, clients: int = 4, per_connection: int = 20) -> None:
        self.url, self.ca, self.per_connection = url, ca, per_connection
        self.ok = self.failed = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(clients)]

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _run(self) -> None:
        body = reviews.pod_create(f.pod("load", node_name="gpu-hyb-1"))
        while not self._stop.is_set():
            with requests.Session() as session:
                session.verify, session.trust_env = str(self.ca), False
                for _ in range(self.per_connection):
                    try:
                        answer = session.post(self.url + "/mutate-pods", json=body, timeout=10)
                        good = answer.status_code == 200 and answer.json()["response"]["allowed"]
                        problem = None if good else f"HTTP {answer.status_code}"
                    except requests.RequestException as err:
                        problem = f"{type(err).__name__}: {err}"
                    with self._lock:
                        if problem:
                            self.failed += 1
                            self.failures.append(problem)
                        else:
                            self.ok += 1


def served_certificate(url: str) -> bytes:
    host, port = "127.0.0.1", int(url.rsplit(":", 1)[1])
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with socket.create_connection((host, port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        return tls.getpeercert(binary_form=True)


def test_certificate_rotation_under_load_fails_no_request(tmp_path):
    with running_server(tmp_path, "--state", str(EXAMPLE_STATE)) as (url, ca, _):
        before = served_certificate(url)
        with Load(url, ca) as load:
            for _ in range(3):
                time.sleep(1.0)
                rotate(tmp_path)
            time.sleep(3.0)  # the server checks the files every 2 s
        after = served_certificate(url)
    assert load.failed == 0, load.failures[:5]
    assert load.ok > 100
    assert after != before  # new connections get the rotated certificate


def test_invalid_policy_replacement_keeps_the_last_good_policy(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text((ROOT / "examples" / "policy.yaml").read_text())
    with running_server(tmp_path, "--state", str(EXAMPLE_STATE), "--policy", str(policy),
                        workers=1) as (url, ca, _):
        session = requests.Session()
        session.verify, session.trust_env = str(ca), False
        policy.write_text("pools:\n  - name: inference\n    deletionCost: lots\n")
        time.sleep(5.5)  # the policy file is checked at most every 5 s
        ready = session.get(url + "/readyz", timeout=5).json()  # a probe alone notices
        assert ready["policy"] == "stale"
        assert "pools[0].deletionCost" in ready["policyError"]
        body = reviews.scale("deployments", "llm-serve", 6, 3)
        answer = session.post(url + "/validate-scale", json=body, timeout=10).json()
        assert answer["response"]["allowed"] is False  # still enforcing the last good policy
        metrics = session.get(url + "/metrics", timeout=5).text
        assert "poolguard_policy_reload_errors_total 1.0" in metrics
        # a corrected file is picked up again
        document = yaml.safe_load((ROOT / "examples" / "policy.yaml").read_text())
        document["scaleDown"]["enforcement"] = "warn"
        policy.write_text(yaml.safe_dump(document))
        time.sleep(5.5)
        answer = session.post(url + "/validate-scale", json=body, timeout=10).json()
        assert answer["response"]["allowed"] is True and answer["response"]["warnings"]
        assert session.get(url + "/readyz", timeout=5).json()["policy"] == "ok"
    assert "policy reload rejected" in (tmp_path / "server.log").read_text()


def test_killed_worker_is_replaced_and_requests_keep_being_answered(tmp_path):
    with running_server(tmp_path, "--state", str(EXAMPLE_STATE)) as (url, ca, process):
        [pid] = worker_pids(process.pid)  # serve's default: one worker
        with Load(url, ca) as load:
            time.sleep(1.0)
            os.kill(pid, signal.SIGKILL)
            time.sleep(3.0)
            served_before_end = load.ok
            time.sleep(1.0)
        assert load.ok > served_before_end  # answered after the kill
        assert pid not in worker_pids(process.pid) and len(worker_pids(process.pid)) == 1
        assert process.poll() is None
    # connections that were inside the killed worker fail; the API server's failurePolicy
    # covers those few; everything after the replacement is answered
    assert load.failed <= 8, load.failures


def test_workers_exit_without_a_traceback(tmp_path):
    """A worker that ends (restarted on SIGTERM, or at shutdown) as `make run` starts it
    logs its exit and nothing else: no `_removeHandlerRef` traceback from the
    interpreter's teardown under gevent."""
    with served_like_make_run(tmp_path) as server:
        [pid] = worker_pids(server.process.pid)
        os.kill(pid, signal.SIGTERM)  # gunicorn starts a new worker
        deadline = time.monotonic() + 20
        while worker_pids(server.process.pid) in ([], [pid]):
            assert time.monotonic() < deadline, server.log.read_text()
            time.sleep(0.1)
        deadline = time.monotonic() + 20
        while request(server, "GET", "/healthz", timeout=5)[0] != 200:
            assert time.monotonic() < deadline, server.log.read_text()
            time.sleep(0.1)
        os.killpg(server.process.pid, signal.SIGTERM)
        assert server.process.wait(timeout=30) == 0
    log = server.log.read_text()
    assert log.count("Worker exiting") == 2, log
    assert "Traceback" not in log and "Exception ignored" not in log, log


def run_serve(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "webhook", "serve", *args],
                          # a guard against a hang, not a speed check: a loaded CI
                          # machine may take long to start Python
                          capture_output=True, text=True, timeout=180, cwd=ROOT)


def test_serve_refuses_to_start_without_certificate_and_key(tmp_path):
    result = run_serve("--state", str(EXAMPLE_STATE))
    assert result.returncode == 2 and "--cert" in result.stderr
    result = run_serve("--cert", str(tmp_path / "none.crt"), "--key", str(tmp_path / "none.key"),
                       "--state", str(EXAMPLE_STATE))
    assert result.returncode == 2
    assert result.stderr.strip() == f"error: --cert {tmp_path / 'none.crt'}: no such file"
    (tmp_path / "bad.crt").write_text("not a certificate")
    (tmp_path / "bad.key").write_text("not a key")
    result = run_serve("--cert", str(tmp_path / "bad.crt"), "--key", str(tmp_path / "bad.key"),
                       "--state", str(EXAMPLE_STATE), "--port", str(free_port()))
    assert result.returncode == 2 and "cannot load --cert" in result.stderr


def test_bad_policy_stops_startup_naming_the_field(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text("pools:\n  - name: a\n    deletionCost: 1\nscaleDown:\n  mode: x\n")
    (tmp_path / "c").touch()
    result = run_serve("--cert", str(tmp_path / "c"), "--key", str(tmp_path / "c"),
                       "--policy", str(policy), "--state", str(EXAMPLE_STATE))
    assert result.returncode == 2
    assert "scaleDown.mode: unknown field" in result.stderr


def test_no_plain_http_listener(tmp_path):
    with running_server(tmp_path, "--state", str(EXAMPLE_STATE), workers=1) as (url, _, _):
        plain = url.replace("https://", "http://")
        try:
            answer = requests.get(plain + "/healthz", timeout=5)
        except requests.RequestException:
            return  # the TLS listener drops plain HTTP
        assert answer.status_code == 400 and "ok" not in answer.text
