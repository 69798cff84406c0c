"""Kubernetes API access through the official `kubernetes` client, as plain JSON dicts.

The client's `ApiClient` supplies configuration, authentication, TLS and connection
pooling; requests go through `ApiClient.param_serialize` / `call_api`, and responses
are read raw (`preload_content=False` underneath) and decoded with `json.loads`.
We do not use the generated model classes: they drop fields they do not know, and
their request bodies (V1Lease, CoreV1Event) are validated models rather than the
JSON we want to send.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import urllib3

from .. import __version__
from ..errors import ApiError, InputError, one_line

if TYPE_CHECKING:
    from kubernetes import client

DEFAULT_KUBECONFIG = "~/.kube/config"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
# (connect, read) seconds for ordinary requests; watches set their own read timeout.
REQUEST_TIMEOUT = (5.0, 30.0)
LIST_TIMEOUT = (5.0, 300.0)  # every pod of a large cluster in one answer
POOL_SIZE = 32  # six watches plus writers must not exhaust urllib3's pool


class KubeConfigError(InputError):
    """No usable kubeconfig or in-cluster configuration."""


class NoKubeConfigError(KubeConfigError):
    """Neither a kubeconfig file nor a Pod's service account: the command has no cluster."""

    def __init__(self, context: str | None = None) -> None:
        flag = f"--context {context}: " if context else ""
        super().__init__(
            f"{flag}no kubeconfig found ($KUBECONFIG is unset, {DEFAULT_KUBECONFIG} does not "
            "exist, and this is not a Pod with an in-cluster service account): pass "
            "--kubeconfig FILE")


def api_client_from(kubeconfig: str | None = None, context: str | None = None) -> client.ApiClient:
    """An ApiClient configured like kubectl resolves it.

    `kubeconfig` (a path, or several joined with ':'), else $KUBECONFIG, else
    ~/.kube/config if it exists, else the in-cluster service account (in a Pod, where
    KUBERNETES_SERVICE_HOST is set). None of them: NoKubeConfigError.
    """
    # Imported on first use: the client package takes half a second to import, which
    # every `plan --state` (no cluster at all) and every command's --help would pay.
    from kubernetes import client, config

    configuration = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or _default_kubeconfig()
    try:
        if path:
            _check_paths(path)
            config.load_kube_config(config_file=path, context=context,
                                    client_configuration=configuration, persist_config=False)
        elif context or not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise NoKubeConfigError(context)
        else:
            config.load_incluster_config(client_configuration=configuration)
    except config.ConfigException as err:
        where = f"kubeconfig {path}" if path else "in-cluster configuration"
        raise KubeConfigError(f"{where}: {one_line(str(err))}") from None
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0,
                                                POOL_SIZE)
    api = client.ApiClient(configuration)
    api.user_agent = f"poolguard/{__version__}"
    return api


def _default_kubeconfig() -> str | None:
    path = Path(DEFAULT_KUBECONFIG).expanduser()
    return str(path) if path.exists() else None


def _check_paths(paths: str) -> None:
    existing = [p for p in paths.split(os.pathsep) if p and Path(p).expanduser().exists()]
    if not existing:
        raise KubeConfigError(f"kubeconfig {paths}: no such file")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """--kubeconfig and --context, shared by the commands that talk to a cluster."""
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config if it "
                        "exists, else the in-cluster service account)")
    parser.add_argument("--context", metavar="NAME",
                        help="kubeconfig context to use (default: its current-context)")


def server_of(api: client.ApiClient) -> str:
    """The API server address the client talks to."""
    return str(api.configuration.host)


def request_json(api: client.ApiClient, method: str, path: str, *,
                 query: Mapping[str, Any] | None = None, body: Any = None,
                 content_type: str | None = None,
                 timeout: tuple[float, float] = REQUEST_TIMEOUT,
                 retry: bool = True) -> dict[str, Any]:
    """One API request; the decoded JSON answer, or ApiError for a non-2xx status.

    Connection failures raise urllib3's exceptions (urllib3.exceptions.HTTPError).
    urllib3 retries a failed connection, and a GET that timed out, up to three times;
    `retry=False` makes one attempt, so the call is over within `timeout`.
    """
    response = _send(api, method, path, query, body, content_type, timeout, retry)
    try:
        data = response.data
    finally:
        response.release_conn()
    if not 200 <= response.status <= 299:
        raise ApiError.from_body(response.status, response.reason or "", data,
                                 f"{method} {path}")
    value = json.loads(data) if data else {}
    return value if isinstance(value, dict) else {"items": value}


def open_stream(api: client.ApiClient, path: str, query: Mapping[str, Any],
                timeout: tuple[float, float]) -> urllib3.BaseHTTPResponse:
    """A streaming GET (a watch); the caller reads it with iter_json_lines and closes it."""
    response = _send(api, "GET", path, query, None, None, timeout)
    if not 200 <= response.status <= 299:
        data = response.data
        response.release_conn()
        raise ApiError.from_body(response.status, response.reason or "", data, f"watch {path}")
    return response


def iter_json_lines(response: urllib3.BaseHTTPResponse) -> Iterator[dict[str, Any]]:
    """The JSON documents of a newline-delimited stream, as they arrive."""
    buffer = b""
    for chunk in response.stream(amt=None, decode_content=True):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield json.loads(line)
    if buffer.strip():
        yield json.loads(buffer)


def _send(api: client.ApiClient, method: str, path: str, query: Mapping[str, Any] | None,
          body: Any, content_type: str | None,
          timeout: tuple[float, float], retry: bool = True) -> urllib3.BaseHTTPResponse:
    from kubernetes.client.exceptions import ApiException  # loaded by api_client_from

    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type or "application/json"
    params = api.param_serialize(method=method, resource_path=path,
                                 query_params=list((query or {}).items()) or None,
                                 header_params=headers, body=body,
                                 auth_settings=["BearerToken"])
    if not retry and body is None:  # straight to urllib3, which takes a retry setting
        url, headers = params[1], params[2]
        return api.rest_client.pool_manager.request(
            method, url, headers=headers, retries=False, preload_content=False,
            timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]))
    try:
        return api.call_api(*params, _request_timeout=timeout).response
    except ApiException as err:  # raised for TLS errors and unpreparable bodies
        raise ApiError.of(err.status or 0, one_line(str(err.reason or "")), "") from None


def describe_error(err: BaseException) -> str:
    """A one-line reason for a failed request (connection errors name their cause)."""
    if isinstance(err, urllib3.exceptions.MaxRetryError) and err.reason is not None:
        err = err.reason
    if isinstance(err, urllib3.exceptions.NewConnectionError):
        return "cannot connect: " + str(err).rpartition("new connection: ")[2]
    if isinstance(err, (urllib3.exceptions.TimeoutError, TimeoutError)):
        return "timed out"
    return one_line(str(err)) or type(err).__name__
