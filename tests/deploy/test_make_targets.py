"""The main Makefile and mk/*.mk as a new user meets them: `make help` lists every target
aligned, `make run` stays on localhost, `make undeploy` checks the context first, and the
long tool builds say what they build and for how long."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
from pathlib import Path

import pytest

from tests.support.install import REPO, run

MAKEFILES = [REPO / "Makefile", *sorted((REPO / "mk").glob("*.mk"))]


def test_help_lists_every_described_target_with_aligned_descriptions() -> None:
    result = run("make", "--no-print-directory", "help")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    described = [m.group(1) for path in MAKEFILES for m in
                 re.finditer(r"^([a-z0-9-]+):.*## ", path.read_text(), re.M)]
    listed = [line.split()[1] for line in lines]
    assert sorted(listed) == sorted(described)
    assert "bench-server" in listed and max(map(len, listed)) > 10
    # every description starts in the same column, after the longest target name
    starts = {len(line) - len(line.split(None, 2)[2]) for line in lines}
    assert len(starts) == 1, lines


def test_run_listens_on_localhost_unless_told_otherwise() -> None:
    def host_of(*args: str) -> str:
        result = run("make", "-s", "-n", "run", *args)
        assert result.returncode == 0, result.stderr
        words = shlex.split(result.stdout.replace("\\\n", " "))
        return words[words.index("--host") + 1]

    assert host_of() == "127.0.0.1"
    assert host_of("HOST=0.0.0.0") == "0.0.0.0"


def test_chromium_is_installed_without_recommends(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": f"{tmp_path}:/usr/bin:/bin"}  # no chromium on this PATH
    result = run("make", "-n", "chromium", env=env)
    install = next(line for line in result.stdout.splitlines() if "apt-get install" in line
                   or "install -y" in line)
    assert "--no-install-recommends" in install


def test_the_go_builds_say_what_and_how_long(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    version = re.search(r"^require github\.com/prometheus/prometheus (\S+)$",
                        (REPO / "tests/deploy/gomod/promtool/go.mod").read_text(), re.M)
    assert version is not None
    for goal in ("helm", f"{cache}/promtool-{version.group(1)}/promtool"):
        planned = run("make", "-n", f"HELM_CACHE={cache}", "GO=true", goal)
        assert planned.returncode == 0, planned.stderr
        said = [line for line in planned.stdout.replace("\\\n", " ").splitlines()
                if line.startswith("echo")]
        assert any("building" in line and str(cache) in line and "minutes" in line
                   for line in said), planned.stdout


@pytest.mark.skipif(shutil.which("apt-get") is None, reason="no apt-get: promtool is built "
                    "from Go here (the alert-rule tests use it)")
def test_promtool_comes_from_debian_in_seconds_and_checks_our_rules(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    result = run("make", "--no-print-directory", "promtool-debian", f"HELM_CACHE={cache}")
    assert result.returncode == 0, result.stdout + result.stderr
    promtool = cache / "promtool-debian" / "promtool"
    checked = run(promtool, "check", "rules", REPO / "charts/poolguard/files/prometheus-rules.yaml")
    assert checked.returncode == 0 and "SUCCESS" in checked.stdout, checked.stdout
    tested = run(promtool, "test", "rules", REPO / "tests/deploy/prometheus-rules-test.yaml")
    assert tested.returncode == 0 and "SUCCESS" in tested.stdout, tested.stdout + tested.stderr
    assert "promtool: promtool, version" in result.stdout


def fake_go(tmp_path: Path) -> Path:
    """A `go` that answers `version`, makes empty binaries for `build -o OUT ...` and gives a
    module directory holding the files build.sh, build_kruise.sh and build_rollouts.sh copy for
    `mod download -json MODULE`."""
    bin_dir = tmp_path / "fakebin"
    bin_dir.mkdir()
    go = bin_dir / "go"
    go.write_text("""#!/bin/bash
if [ "$1" = version ]; then echo "go version go1.26.7 linux/amd64"; exit 0; fi
if [ "$1" = mod ]; then
  dir=$(dirname "$0")/module
  mkdir -p "$dir/config/crd/bases" "$dir/config/rbac" "$dir/config/webhook"
  touch "$dir/config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml" \\
    "$dir/config/rbac/role.yaml" "$dir/config/webhook/manifests.yaml"
  mkdir -p "$dir/manifests/crds" "$dir/manifests/role"
  touch "$dir/manifests/crds/rollout-crd.yaml" "$dir/manifests/role/argo-rollouts-clusterrole.yaml"
  touch "$dir/config/crd/bases/apps.kruise.io_clonesets.yaml"
  printf '{\\n\\t"Dir": "%s",\\n}\\n' "$dir"; exit 0
fi
shift
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out=$2; shift 2 ;;
    -trimpath) shift ;;
    -ldflags|-gcflags) shift 2 ;;
    *) pkgs+=("$1"); shift ;;
  esac
done
for p in "${pkgs[@]}"; do
  if [[ $out == */ ]]; then target=$out$(basename "$p"); else target=$out; fi
  mkdir -p "$(dirname "$target")"
  printf '#!/bin/sh\\n' > "$target"; chmod +x "$target"
done
""")
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def test_the_control_plane_build_says_what_it_builds(tmp_path: Path) -> None:
    env = {**os.environ, "E2E_CACHE": str(tmp_path / "cache"),
           "PATH": f"{fake_go(tmp_path)}:{os.environ['PATH']}"}
    result = run(REPO / "tests" / "e2e" / "build.sh", env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "about" in lines[0] and "minutes" in lines[1], lines
    assert any("[1/3] kube-apiserver, kube-controller-manager, kube-scheduler, kubectl" in line
               for line in lines)
    assert any("[2/3] etcd" in line for line in lines)
    assert any("[3/3] the LeaderWorkerSet controller" in line for line in lines)
    # then the CloneSet controller, with its own stamp
    assert any("building the CloneSet controller (github.com/openkruise/kruise@v1.8.0)" in line
               for line in lines)
    kruise = tmp_path / "cache" / "kruise"
    assert (kruise / "bin" / "cloneset-controller").exists()
    assert (kruise / "crd" / "apps.kruise.io_clonesets.yaml").exists()
    # then the Argo Rollouts controller, with its own toolchain and stamp
    assert any("building the Argo Rollouts controller (github.com/argoproj/argo-rollouts@"
               "v1.10.2, go1.27.3)" in line for line in lines)
    built = tmp_path / "cache" / "argo-rollouts"
    assert (built / "rollouts-controller").exists()
    assert (built / "crds" / "rollout-crd.yaml").exists()
    assert (built / "role" / "argo-rollouts-clusterrole.yaml").exists()
    again = run(REPO / "tests" / "e2e" / "build.sh", env=env)
    assert again.stdout.splitlines() == [
        f"e2e: control plane binaries up to date in {tmp_path / 'cache' / 'bin'}",
        f"e2e: CloneSet controller up to date in {kruise / 'bin'}",
        f"e2e: Argo Rollouts controller up to date in {built}"]
    # a control plane rebuild leaves the controller's stamp (and binary) alone
    (tmp_path / "cache" / "bin" / ".stamp").unlink()
    third = run(REPO / "tests" / "e2e" / "build.sh", env=env)
    assert third.stdout.splitlines()[-1] == f"e2e: Argo Rollouts controller up to date in {built}"


def test_make_e2e_builds_the_control_plane_first_and_the_rollout_crds_alone(
        tmp_path: Path) -> None:
    """What `make e2e` runs before its tests: the control plane alone, then the Argo Rollouts
    CRDs and ClusterRole without the controller (both controllers build beside the tests)."""
    env = {**os.environ, "E2E_CACHE": str(tmp_path / "cache"),
           "PATH": f"{fake_go(tmp_path)}:{os.environ['PATH']}"}
    result = run(REPO / "tests" / "e2e" / "build.sh", "--control-plane", env=env)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "cache" / "bin" / "kube-apiserver").exists()
    assert "CloneSet" not in result.stdout and "Rollouts" not in result.stdout, result.stdout
    assert not (tmp_path / "cache" / "kruise").exists()
    manifests = run(REPO / "tests" / "e2e" / "build_rollouts.sh", "--manifests", env=env)
    built = tmp_path / "cache" / "argo-rollouts"
    assert manifests.returncode == 0, manifests.stderr
    assert manifests.stdout.splitlines() == [f"e2e: Argo Rollouts CRDs and ClusterRole in {built}"]
    assert (built / "crds" / "rollout-crd.yaml").exists()
    assert not (built / "rollouts-controller").exists()
    full = run(REPO / "tests" / "e2e" / "build_rollouts.sh", env=env)
    assert "building the Argo Rollouts controller" in full.stdout, full.stdout
    assert (built / "rollouts-controller").exists()
    again = run(REPO / "tests" / "e2e" / "build_rollouts.sh", env=env)
    assert again.stdout.splitlines() == [f"e2e: Argo Rollouts controller up to date in {built}"]


def ci_copy(tmp_path: Path, make_test_fails: bool = False) -> tuple[Path, dict[str, str]]:
    """.ci/run in a scratch tree whose `make` and control plane build only log their calls."""
    root = tmp_path / "repo"
    (root / ".ci").mkdir(parents=True)
    (root / "tests" / "e2e").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "run", root / ".ci" / "run")
    build = root / "tests" / "e2e" / "build.sh"
    build.write_text("#!/bin/bash\necho 'e2e: control plane binaries up to date'\n")
    fakes = tmp_path / "fakebin"
    fakes.mkdir()
    make = fakes / "make"
    fail = 'if [ "$1" = test ]; then exit 7; fi\n' if make_test_fails else ""
    make.write_text(f'#!/bin/bash\necho "make $* E2E_STATES=$E2E_STATES" >> {tmp_path}/calls\n'
                    f"{fail}exit 0\n")
    for script in (build, make):
        script.chmod(0o755)
    env = {**os.environ, "PATH": f"{fakes}:{os.environ['PATH']}"}
    env.pop("E2E_STATES", None)
    return root / ".ci" / "run", env


PHASES = re.compile(r"^ci: phases: make test \dm\d\ds; control plane build \(wait after make "
                    r"test\) \dm\d\ds; make e2e \(E2E_STATES=60\) \dm\d\ds; total \dm\d\ds$")


def test_ci_runs_fewer_differential_states_and_prints_the_phase_times(tmp_path: Path) -> None:
    script, env = ci_copy(tmp_path)
    result = run(script, env=env)
    assert result.returncode == 0, result.stderr
    assert PHASES.match(result.stdout.splitlines()[-1]), result.stdout
    assert (tmp_path / "calls").read_text().splitlines() == [
        "make test E2E_STATES=60", "make e2e E2E_STATES=60"]


def test_ci_prints_the_phase_times_when_a_phase_fails(tmp_path: Path) -> None:
    script, env = ci_copy(tmp_path, make_test_fails=True)
    result = run(script, env=env)
    assert result.returncode == 7
    assert re.match(r"^ci: phases: make test \dm\d\ds; total \dm\d\ds$",
                    result.stdout.splitlines()[-1]), result.stdout
