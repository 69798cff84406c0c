"""`make e2e` builds the Argo Rollouts and CloneSet controllers beside its first tests
(tests/e2e/run.sh); each module waits for its own build only, and a failed build is named
with the end of its log (tests/e2e/harness.py `controller_binary`)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.e2e.harness import CONTROLLER_BUILDS_PID, controller_binary


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "builds").mkdir()
    (tmp_path / "logs").mkdir()
    return tmp_path


@pytest.fixture
def builds_running(run_dir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The background builds still running (a process that outlives the test's calls)."""
    process = subprocess.Popen(["sleep", "60"])
    (run_dir / CONTROLLER_BUILDS_PID).write_text(str(process.pid))
    try:
        yield process
    finally:
        process.kill()
        process.wait()


def _binary(run_dir: Path) -> Path:
    binary = run_dir / "bin" / "rollouts-controller"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    return binary


def test_a_module_waits_for_its_own_build_not_the_one_after_it(run_dir, builds_running):
    binary = _binary(run_dir)
    (run_dir / "builds" / "rollouts.status").write_text("0\n")  # kruise still building
    env = SimpleNamespace(run_dir=run_dir)
    assert controller_binary(env, "rollouts", binary) == binary
    assert builds_running.poll() is None  # returned while the CloneSet build goes on


def test_a_failed_build_is_named_with_the_end_of_its_log(run_dir, builds_running):
    binary = _binary(run_dir)  # an older binary: the failed build must not run it
    (run_dir / "builds" / "rollouts.status").write_text("1\n")
    (run_dir / "logs" / "rollouts-build.log").write_text(
        "e2e: building the Argo Rollouts controller\ngo: module lookup disabled\n")
    with pytest.raises(FileNotFoundError) as failed:
        controller_binary(SimpleNamespace(run_dir=run_dir), "rollouts", binary)
    message = str(failed.value)
    assert "tests/e2e/build_rollouts.sh" in message
    assert message.endswith("go: module lookup disabled")


def test_builds_stopped_before_this_one_ended_are_a_failure(run_dir):
    binary = _binary(run_dir)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (run_dir / CONTROLLER_BUILDS_PID).write_text(str(gone.pid))
    with pytest.raises(FileNotFoundError, match="not built"):
        controller_binary(SimpleNamespace(run_dir=run_dir), "rollouts", binary)


def test_without_background_builds_a_built_binary_is_used(run_dir):
    binary = _binary(run_dir)
    env = SimpleNamespace(run_dir=run_dir)
    assert controller_binary(env, "rollouts", binary) == binary
    with pytest.raises(FileNotFoundError, match="not built"):
        controller_binary(env, "kruise", run_dir / "bin" / "cloneset-controller")
