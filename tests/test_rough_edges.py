"""Rough edges a new user hit (issue 11, item 5), each checked the way the user met it."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml
from serving import free_port, make_certs

from certs import pki

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
STATE = REPO / "examples" / "cluster-state.yaml"
COMMANDS = (["plan"], ["serve"], ["reconcile"])


def run(*args: str | os.PathLike, env: dict[str, str] | None = None,
        timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=timeout, check=False)


def assert_one_error_line(result: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# --- serve ------------------------------------------------------------------------------


def serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None,
          timeout: float = 60) -> subprocess.CompletedProcess[str]:
    tls = make_certs(tmp_path / "tls")
    return run(PY, "-m", "webhook", "serve", "--cert", tls["cert"], "--key", tls["key"],
               "--host", "127.0.0.1", *args, env=env, timeout=timeout)


def test_serve_with_a_malformed_state_file_names_it(tmp_path):
    bad = tmp_path / "state.yaml"
    bad.write_text("kind: List\nitems:\n  - kind: Pod\n    metadata: {name: [\n")
    result = serve(tmp_path, "--state", str(bad), "--port", str(free_port()))
    assert_one_error_line(result, f"state file {bad}", "line")
    assert "Traceback" not in result.stdout + result.stderr


def test_serve_on_a_port_in_use_says_so(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve(tmp_path, "--state", str(STATE), "--port", str(port), timeout=30)
    assert_one_error_line(result, f"--port {port}", "127.0.0.1", "in use")


def test_serve_leaves_no_temporary_directory_behind(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tls = make_certs(tmp_path / "tls")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env["TMPDIR"] = str(tmp)
    process = subprocess.Popen(
        [PY, "-m", "webhook", "serve", "--cert", str(tls["cert"]), "--key", str(tls["key"]),
         "--host", "127.0.0.1", "--port", str(port), "--state", str(STATE), "--workers", "1"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(f"https://localhost:{port}/metrics", verify=str(tls["ca"]),
                             timeout=1)
                break
            except requests.RequestException:
                assert time.monotonic() < deadline and process.poll() is None
                time.sleep(0.1)
        assert list(tmp.iterdir())  # the metrics directory exists while serving
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    assert list(tmp.iterdir()) == []


def test_serve_help_documents_every_flag():
    result = run(PY, "-m", "webhook", "serve", "--help")
    assert result.returncode == 0
    options = result.stdout.split("options:", 1)[1]
    # One entry per option: its flag line and the indented description lines under it.
    entries = re.findall(r"^  (-.*(?:\n {4,}.*)*)", options, re.M)
    assert len(entries) >= 15
    for entry in entries:
        flags, *description = re.split(r" {2,}|\n", entry.strip(), maxsplit=1)
        assert description and description[0].strip(), f"{flags} has no help text"


# --- every command ----------------------------------------------------------------------


@pytest.mark.parametrize("command", [[], *COMMANDS])
def test_version_on_every_command(command):
    result = run(PY, "-m", "webhook", *command, "--version")
    assert result.returncode == 0
    assert re.fullmatch(r"python -m webhook( \w+)? 0\.1\.0\n", result.stdout), result.stdout


def test_the_console_script_names_itself_in_usage():
    script = Path(PY).parent / "poolguard"
    if not script.exists():
        pytest.skip("the poolguard console script is not installed in this environment")
    result = run(script, "plan", "--state", str(STATE))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "(see poolguard plan --help)" in result.stderr
    usage = run(script, "plan", "--help")
    assert usage.stdout.startswith("usage: poolguard plan ")
    assert run(script, "--version").stdout == "poolguard 0.1.0\n"


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


def test_make_deploy_without_a_context_applies_nothing(tmp_path):
    kubectl = fake_kubectl(tmp_path, context=False)
    result = run("make", "deploy", f"KUBECTL={kubectl}", f"CERT_DIR={tmp_path / 'certs'}",
                 f"MANIFEST={tmp_path / 'build' / 'poolguard.yaml'}")
    assert result.returncode != 0
    assert "error: kubectl has no current context" in result.stderr
    assert "nothing was applied" in result.stderr
    calls = (tmp_path / "kubectl.log").read_text().splitlines()
    assert calls == ["config current-context"]  # no kustomize, no apply
    assert not (tmp_path / "certs").exists()


def test_failed_make_manifests_leaves_no_partial_file(tmp_path):
    kubectl = fake_kubectl(tmp_path, context=True, kustomize_fails=True)
    manifest = tmp_path / "build" / "poolguard.yaml"
    result = run("make", "manifests", f"KUBECTL={kubectl}", f"CERT_DIR={tmp_path / 'certs'}",
                 f"MANIFEST={manifest}", timeout=120)
    assert result.returncode != 0
    assert list(manifest.parent.iterdir()) == []


# --- docs -------------------------------------------------------------------------------


def _yaml_block_after(path: Path, heading: str) -> list[dict]:
    text = path.read_text()
    section = text[text.index(heading):]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    return [doc for doc in yaml.safe_load_all(block) if doc]


def test_reconciler_doc_rbac_is_the_shipped_rbac():
    documented = _yaml_block_after(REPO / "docs" / "reconciler.md", "## RBAC")
    shipped = {(d["kind"], d["metadata"]["name"]): d for d in
               yaml.safe_load_all((REPO / "manifests" / "base" / "rbac.yaml").read_text()) if d}
    assert len(documented) == 2
    for role in documented:
        match = shipped[(role["kind"], role["metadata"]["name"])]
        assert role["rules"] == match["rules"], role["metadata"]["name"]


def test_ca_rotation_recipe_keeps_the_local_names(tmp_path):
    text = (REPO / "docs" / "install.md").read_text()
    recipe = text[text.index("### Rotating the CA"):]
    command = re.search(r"python -m certs create (.*?)(?<!\\)\n", recipe, re.S).group(1)
    args = [a for a in command.replace("\\\n", " ").split("#")[0].split()]
    args[args.index("--out-dir") + 1] = str(tmp_path / "new")
    result = run(PY, "-m", "certs", "create", *args)
    assert result.returncode == 0, result.stderr
    cert = (tmp_path / "new" / "tls.crt").read_bytes()
    assert "localhost" in pki.san_dns_names(cert)
    assert pki.san_ip_addresses(cert) == ["127.0.0.1"]


