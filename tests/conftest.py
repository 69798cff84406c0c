"""Fixtures shared by the certs and deploy tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.install import NAMESPACE, SERVICE, certs_cli

# The e2e tier (tests/e2e) needs a local control plane: it runs under `make e2e` only.
if not os.environ.get("POOLGUARD_E2E"):
    collect_ignore = ["e2e"]


@pytest.fixture
def created(tmp_path: Path) -> Path:
    """An --out-dir made by `python -m certs create` with extra names."""
    out = tmp_path / "certs"
    result = certs_cli("create", "--service", SERVICE, "--namespace", NAMESPACE, "--out-dir",
                       out, "--extra-name", "localhost", "--extra-name", "webhook.example.test",
                       "--extra-ip", "127.0.0.1")
    assert result.returncode == 0, result.stderr
    return out
