"""mk/install.mk fails safe: nothing applied without a context, no partial manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.install import REPO, run

# --- make -------------------------------------------------------------------------------


def fake_kubectl(tmp_path: Path, *, context: bool, kustomize_fails: bool = False) -> Path:
    """A kubectl stand-in that logs each call; `config current-context` as kubectl answers."""
    log = tmp_path / "kubectl.log"
    script = tmp_path / "kubectl"
    script.write_text(f"""#!/bin/bash
echo "$*" >> {log}
if [ "$1 $2" = "config current-context" ]; then
  {'echo test-context' if context else 'echo "error: current-context is not set" >&2; exit 1'}
  exit 0
fi
if [ "$1" = kustomize ]; then
  echo "apiVersion: v1"
  {'exit 1' if kustomize_fails else 'cat ' + str(REPO / 'manifests/base/namespace.yaml')}
fi
exit 0
""")
    script.chmod(0o755)
    return script


@pytest.mark.parametrize(("target", "says"), [
    ("deploy", "nothing was applied"),
    ("undeploy", "nothing was applied or removed"),
])
def test_make_without_a_context_touches_nothing(tmp_path, target, says):
    kubectl = fake_kubectl(tmp_path, context=False)
    result = run("make", target, f"KUBECTL={kubectl}", f"CERT_DIR={tmp_path / 'certs'}",
                 f"MANIFEST={tmp_path / 'build' / 'poolguard.yaml'}")
    assert result.returncode != 0
    assert "error: kubectl has no current context" in result.stderr
    assert says in result.stderr
    calls = (tmp_path / "kubectl.log").read_text().splitlines()
    assert calls == ["config current-context"]  # no kustomize, no apply, no delete
    assert not (tmp_path / "certs").exists()


def test_failed_make_manifests_leaves_no_partial_file(tmp_path):
    kubectl = fake_kubectl(tmp_path, context=True, kustomize_fails=True)
    manifest = tmp_path / "build" / "poolguard.yaml"
    result = run("make", "manifests", f"KUBECTL={kubectl}", f"CERT_DIR={tmp_path / 'certs'}",
                 f"MANIFEST={manifest}")
    assert result.returncode != 0
    assert list(manifest.parent.iterdir()) == []


