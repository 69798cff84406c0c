"""A stand-in for metrics-server: the `metrics.k8s.io/v1beta1` API over HTTPS, for the HPA
controller of the e2e control plane, reached through the aggregation layer (an APIService).

    python -m tests.e2e.fake_metrics --host CLUSTER_IP --port PORT --cert tls.crt
        --key tls.key --client-ca front-proxy-ca.crt --kubeconfig admin.kubeconfig
        --requests requests.jsonl [--cpu 10m]

Every pod the API server lists for a request (namespace and labelSelector passed through)
reports the same CPU usage in each container, measured now over a one-second window (so
the HPA counts the samples of pods that became Ready a second ago). Only the API server's
front proxy is served: TLS client certificates must chain to `--client-ca`, which makes the
X-Remote-User header trustworthy; each request's path and user is appended to
`--requests` as a JSON line, so a test can tell who asked.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes import client, config

GROUP_VERSION = "metrics.k8s.io/v1beta1"
PODS = re.compile(r"^/apis/metrics\.k8s\.io/v1beta1/namespaces/([^/]+)/pods(?:/([^/]+))?$")
RESOURCES = {
    "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": GROUP_VERSION,
    "resources": [
        {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics",
         "verbs": ["get", "list"]},
        {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics",
         "verbs": ["get", "list"]},
    ],
}


def rfc3339(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_metrics(pod: Any, cpu: str) -> dict[str, Any]:
    """What metrics-server reports for one pod: usage per container."""
    meta = pod.metadata
    return {"metadata": {"name": meta.name, "namespace": meta.namespace,
                         "labels": dict(meta.labels or {}),
                         "creationTimestamp": rfc3339(dt.datetime.now(dt.UTC))},
            "timestamp": rfc3339(dt.datetime.now(dt.UTC)), "window": "1s",
            "containers": [{"name": c.name, "usage": {"cpu": cpu, "memory": "16Mi"}}
                           for c in pod.spec.containers]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the API server reuses its connections
    core: client.CoreV1Api
    cpu: str
    requests_file: Path
    lock = threading.Lock()

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        self._record(url.path)
        if url.path == f"/apis/{GROUP_VERSION}":
            self._send(200, RESOURCES)
            return
        match = PODS.match(url.path)
        if match is None:  # /apis included: the aggregator falls back to the line above
            self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                             "reason": "NotFound", "code": 404})
            return
        namespace, name = match.groups()
        if name is not None:
            pod = self.core.read_namespaced_pod(name, namespace)
            self._send(200, {"kind": "PodMetrics", "apiVersion": GROUP_VERSION,
                             **pod_metrics(pod, self.cpu)})
            return
        selector = parse_qs(url.query).get("labelSelector", [""])[0]
        pods = self.core.list_namespaced_pod(namespace, label_selector=selector).items
        self._send(200, {"kind": "PodMetricsList", "apiVersion": GROUP_VERSION,
                         "metadata": {},
                         "items": [pod_metrics(p, self.cpu) for p in pods
                                   if p.status and p.status.phase == "Running"]})

    def _record(self, path: str) -> None:
        line = json.dumps({"path": path, "user": self.headers.get("X-Remote-User", "")})
        with self.lock, open(self.requests_file, "a", encoding="utf-8") as out:
            out.write(line + "\n")

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def main(argv: list[str] | None = None) -> None:
    """Serve until killed."""
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.fake_metrics")
    for flag in ("--host", "--cert", "--key", "--client-ca", "--kubeconfig", "--requests"):
        parser.add_argument(flag, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cpu", default="10m", help="each container's CPU usage")
    args = parser.parse_args(argv)
    Handler.core = client.CoreV1Api(config.new_client_from_config(config_file=args.kubeconfig))
    Handler.cpu, Handler.requests_file = args.cpu, Path(args.requests)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    context.load_verify_locations(args.client_ca)
    context.verify_mode = ssl.CERT_REQUIRED
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"fake metrics.k8s.io on https://{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
