"""The API client `make bench-scale` and the e2e tier drive the cluster with keeps one
connection per concurrent caller (tests/e2e/harness.py `api_client`)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kubernetes import client

from tests.e2e.harness import POOL_SIZE, Environment
from tests.support.kubeapi.server import FakeKubeAPI


class _Plane:
    """Just what Environment reads of a control plane: its kubeconfig."""

    def __init__(self, kubeconfig: Path) -> None:
        self._kubeconfig = kubeconfig

    def kubeconfig(self) -> Path:
        return self._kubeconfig


def test_concurrent_calls_keep_their_connections(tmp_path: Path,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    """POOL_SIZE callers at once: every connection goes back to the pool (urllib3 warns
    "Connection pool is full, discarding connection" for each one it must drop)."""
    with FakeKubeAPI() as api:
        env = Environment(_Plane(api.write_kubeconfig(tmp_path / "kubeconfig")))
        api.slow(0.3, path_contains="/namespaces")  # every caller holds its connection
        core = client.CoreV1Api(env.api)
        caplog.set_level(logging.WARNING, logger="urllib3.connectionpool")
        with ThreadPoolExecutor(POOL_SIZE) as pool:
            answers = list(pool.map(lambda _: core.list_namespace(), range(POOL_SIZE)))
        assert len(answers) == POOL_SIZE
        assert [r.getMessage() for r in caplog.records if "pool is full" in r.getMessage()] == []
