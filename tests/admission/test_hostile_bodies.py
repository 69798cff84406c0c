"""Hostile AdmissionReview bodies: errors in the caller's terms, bounded cost.

Every field of every good review, replaced by a value of each wrong JSON type, gets either
an answer or a 400 that names the field: never the catch-all, never an exception class
name, never an echo longer than a short prefix. A burst of maximum-size hostile bodies
against `serve` (as `make run` starts it) keeps the server's memory under the limit the
shipped manifest sets, while good reviews keep being answered.
"""

from __future__ import annotations

import copy
import http.client
import json
import multiprocessing
import re
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import factories as f
from tests.support import reviews
from tests.support.reviews import field_paths, replaced
from tests.support.serving import (
    Server,
    answer_bound,
    cpu_slowness,
    request,
    served_like_make_run,
)
from webhook.admission.app import create_app
from webhook.admission.runtime import PolicyHolder, Runtime
from webhook.cluster.state import EXAMPLE_STATE, load_state

# A good review while 16 hostile 3 MiB bodies are parsed on the same 2 shared cores, on an
# idle machine: a starved worker would take seconds (past the pod webhooks' 3 s
# timeoutSeconds and fail open). On a busy machine the bound stretches by how much slower
# a CPU-bound process runs there: the parses a good review may wait behind stretch alike,
# so a starved worker stays as far past the bound. Past 4x the machine is too busy for
# the bound to mean anything: it stretches no further.
HOSTILE_ANSWER_WITHIN = 2.0
HOSTILE_CEILING = 4 * HOSTILE_ANSWER_WITHIN

ROOT = Path(__file__).resolve().parents[2]
ENDPOINTS = {"/mutate-pods", "/mutate-bindings", "/validate-scale", "/validate-workloads"}
WRONG_TYPES = [["a", "list"], 7, "a-string", {"an": "object"}, True]
CLASS_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|Traceback|\bat 0x")
MAX_ERROR_BYTES = 1024


def good_reviews() -> dict[str, list[dict[str, Any]]]:
    deployment = f.deployment("llm-serve", replicas=6)
    fewer = copy.deepcopy(deployment)
    fewer["spec"]["replicas"] = 2
    pinned = f.pod("pinned", node_name=None)
    pinned["spec"]["nodeSelector"] = {"node.usage": "inference"}
    return {
        "/mutate-pods": [reviews.pod_create(f.pod("p", node_name="gpu-hyb-1")),
                         reviews.pod_create(pinned)],
        "/mutate-bindings": [reviews.binding("gpu-probe-2abcd", "gpu-inf-1")],
        "/validate-scale": [reviews.scale("deployments", "llm-serve", 6, 3),
                            reviews.workload_update(deployment, fewer)],
        "/validate-workloads": [reviews.workload_update(deployment, fewer),
                                reviews.workload_create(deployment)],
    }


@pytest.fixture(scope="module")
def client():
    app = create_app(Runtime(PolicyHolder(None), load_state(EXAMPLE_STATE)))
    return app.test_client()


def check_error(answer: Any, where: str) -> str:
    assert answer.status_code == 400, (where, answer.status_code, answer.data[:300])
    assert len(answer.data) <= MAX_ERROR_BYTES, (where, len(answer.data))
    message = answer.get_json()["error"]
    assert not CLASS_NAME.search(message), (where, message)
    return message


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
def test_every_field_of_the_wrong_type_is_named_or_ignored(client, endpoint: str) -> None:
    for review in good_reviews()[endpoint]:
        for path in list(field_paths(review))[1:]:  # every field, not the root
            for wrong in WRONG_TYPES:
                if isinstance(wrong, type(_get(review, path))) and not isinstance(wrong, bool):
                    continue
                body = replaced(review, path, wrong)
                answer = client.post(endpoint, data=json.dumps(body),
                                     content_type="application/json")
                where = ".".join(map(str, path))
                if answer.status_code == 200:
                    assert answer.get_json()["response"]["uid"] == body["request"]["uid"]
                    continue
                message = check_error(answer, f"{endpoint} {where}={wrong!r}")
                # The message names a field of the review, not "something had a bad shape".
                assert re.search(r"\b(request|kind|apiVersion|body)\b", message), message
                assert "unexpected shape" not in message, (where, message)


def _get(document: Any, path: tuple) -> Any:
    for step in path:
        document = document[step]
    return document


def test_template_metadata_as_a_list_is_named(client) -> None:
    deployment = f.deployment("llm-serve", replicas=6)
    broken = copy.deepcopy(deployment)
    broken["spec"]["template"]["metadata"] = ["not", "an", "object"]
    for endpoint, body in (("/validate-workloads", reviews.workload_update(broken, deployment)),
                           ("/validate-workloads", reviews.workload_update(deployment, broken)),
                           ("/validate-scale", reviews.workload_update(broken, deployment))):
        message = check_error(client.post(endpoint, json=body), endpoint)
        assert "spec.template.metadata" in message and "must be an object" in message


def test_offending_values_are_echoed_as_a_short_prefix_only(client) -> None:
    huge = "x" * 2_400_000
    bodies = [
        {"apiVersion": "admission.k8s.io/v1", "kind": huge, "request": {"uid": "u"}},
        {"apiVersion": huge, "kind": "AdmissionReview", "request": {"uid": "u"}},
        reviews.pod_create(f.pod("p", annotations={
            "controller.kubernetes.io/pod-deletion-cost": "1" * 2_400_000})),
    ]
    for body in bodies:
        answer = client.post("/mutate-pods", json=body)
        assert len(answer.data) <= MAX_ERROR_BYTES, answer.data[:200]
    answer = client.post("/mutate-pods", data=b'{"kind": "AdmissionReview", ' + b" " * 10000,
                         content_type="application/json")
    message = check_error(answer, "truncated JSON")
    assert message.startswith("body is not valid JSON")
    assert "line" not in message and "char" not in message  # no parser internals


def memory_limit_bytes() -> int:
    """The memory limit of the webhook container in the shipped manifest."""
    documents = yaml.safe_load_all((ROOT / "manifests/base/webhook.yaml").read_text())
    deployment = next(d for d in documents if d and d["kind"] == "Deployment")
    limit = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "memory"]
    units = {"Mi": 2**20, "Gi": 2**30}
    return int(limit[:-2]) * units[limit[-2:]]


def tree_rss(pid: int) -> int:
    """Resident memory of `pid` and its descendants (gunicorn master and workers)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        total += int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024
        pending += [int(child) for child in children]
    return total


def hostile_bodies() -> dict[str, bytes]:
    """Maximum-size bodies whose parse is as costly per byte as JSON allows."""
    size = 3 * 1024 * 1024
    return {
        "nested empty arrays": b"[" + b"[]," * (size // 3 - 1) + b"[]]",
        "empty objects": b"[" + b"{}," * (size // 3 - 1) + b"{}]",
        "one-key objects": b"[" + b'{"a":0},' * (size // 8 - 1) + b'{"a":0}]',
        # just under the server's bound on values, so it is parsed: 199,990 strings
        "strings at the value bound": b"[" + b'"xxxxxxxxxxxx",' * 199_989 + b'"x"]',
    }


SERVER = served_like_make_run  # the `server` fixture (conftest.py): exactly as `make run`


def send_hostile(target: tuple[str, int, Path, bytes]) -> int:
    """POST one hostile body (in a pool process); 0 when the server closed instead."""
    host, port, ca, body = target
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    conn = http.client.HTTPSConnection(host, port, timeout=60, context=context)
    try:
        conn.request("POST", "/validate-workloads", body=body,
                     headers={"Content-Type": "application/json"})
        return conn.getresponse().status
    except OSError:
        return 0  # dropped: a closed connection is an acceptable answer
    finally:
        conn.close()


def test_burst_of_max_size_hostile_bodies_stays_under_the_memory_limit(server: Server) -> None:
    limit = memory_limit_bytes()
    good = json.dumps(reviews.pod_create(f.pod("good", node_name="gpu-hyb-1"))).encode()
    slowness_before = cpu_slowness()  # before the sampler thread: its CPU would count
    peak, stop = [tree_rss(server.process.pid)], threading.Event()
    baseline = peak[0]

    def sample() -> None:
        while not stop.is_set():
            peak.append(tree_rss(server.process.pid))
            time.sleep(0.01)

    sampler = threading.Thread(target=sample)
    sampler.start()
    statuses: list[int] = []
    # The senders are other processes, so the probe below times the server, not this
    # process's GIL; the probe keeps its connection alive, as the API server does.
    probe = http.client.HTTPSConnection(server.host, server.port, timeout=HOSTILE_CEILING,
                                        context=server.client_context())
    answers: list[tuple[str, float]] = []  # (burst, seconds): judged once the machine is timed
    try:
        with multiprocessing.get_context("fork").Pool(16) as pool:
            for name, body in hostile_bodies().items():
                burst = pool.map_async(send_hostile,
                                       [(server.host, server.port, server.ca, body)] * 16)
                while not burst.ready():
                    started = time.monotonic()
                    status, _, _ = request(server, "POST", "/mutate-pods", good,
                                           connection=probe)
                    answers.append((name, time.monotonic() - started))
                    assert status == 200
                    time.sleep(0.05)
                statuses += burst.get()
    finally:
        stop.set()
        sampler.join()
        probe.close()
    slowness = max(slowness_before, cpu_slowness())
    within = answer_bound(HOSTILE_ANSWER_WITHIN, slowness, HOSTILE_CEILING)
    slow_answers = [(name, round(took, 2)) for name, took in answers if took > within]
    print(f"\nRSS of master and workers: {baseline / 2**20:.0f} MiB idle, peak "
          f"{max(peak) / 2**20:.0f} MiB under bursts of 16 x 3 MiB hostile bodies "
          f"(limit {limit / 2**20:.0f} MiB); hostile answers {sorted(set(statuses))}; "
          f"slowest good answer {max((t for _, t in answers), default=0.0):.2f}s, "
          f"bound {within:.2f}s "
          f"(machine {slowness:.1f}x slower than idle)")
    assert max(peak) < limit
    assert all(status in (0, 400, 413, 503) for status in statuses), statuses
    assert slow_answers == []
    assert "Traceback" not in server.log.read_text()
