"""Every command as a new user meets it: --version, its own name in usage, `serve`'s
startup errors as one line, a complete `serve --help`, and no temporary directory left."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
import requests

from tests.support.install import PY, REPO, assert_one_line_error, run
from tests.support.serving import free_port, make_certs

STATE = REPO / "examples" / "cluster-state.yaml"
COMMANDS = (["plan"], ["serve"], ["reconcile"], ["rebalance"])


# --- serve ------------------------------------------------------------------------------


def serve(tmp_path: Path, *args: str,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    tls = make_certs(tmp_path / "tls")
    return run(PY, "-m", "webhook", "serve", "--cert", tls["cert"], "--key", tls["key"],
               "--host", "127.0.0.1", *args, env=env)


def test_serve_with_a_malformed_state_file_names_it(tmp_path):
    bad = tmp_path / "state.yaml"
    bad.write_text("kind: List\nitems:\n  - kind: Pod\n    metadata: {name: [\n")
    result = serve(tmp_path, "--state", str(bad), "--port", str(free_port()))
    assert_one_line_error(result, f"state file {bad}", "line")
    assert "Traceback" not in result.stdout + result.stderr


def test_serve_on_a_port_in_use_says_so(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = serve(tmp_path, "--state", str(STATE), "--port", str(port))
    assert_one_line_error(result, f"--port {port}", "127.0.0.1", "in use")


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




def test_plan_on_a_state_file_never_loads_the_kubernetes_client():
    # The client takes half a second to import: CI runs `plan --state` hundreds of times,
    # and a person running it on a saved state has no cluster to talk to.
    script = ("import sys\nfrom webhook.cli.main import main\n"
              f"code = main(['plan', '--state', {str(STATE)!r}, '--workload',"
              " 'deploy/ml/embedder', '--replicas', '2', '-o', 'json'])\n"
              "print(code, sorted(m for m in sys.modules if m.split('.')[0] in "
              "('kubernetes', 'cryptography')))")
    result = run(PY, "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "0 []"
