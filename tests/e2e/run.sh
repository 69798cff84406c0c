#!/usr/bin/env bash
# `make e2e`: build the control plane once (cached), run the e2e tier against it, and end
# with one line: `e2e: P/N scenarios pass; differential: K states, M mismatches; ...` (one
# count per differential run, tests/e2e/summary.py).
# Environment: PY (python with poolguard installed), E2E_KEEP=1 to leave the cluster up,
# E2E_STATES (default 200), E2E_ROLLOUT_STATES (default 50), E2E_CLONESET_STATES (default 50),
# E2E_SEED (first seed, default 1),
# PYTEST_ARGS (extra args).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PY:-.venv/bin/python}
tests/e2e/build.sh --control-plane
tests/e2e/build_rollouts.sh --manifests  # its CRDs are installed before poolguard starts
# tests/e2e/test_helm.py installs the chart with the helm mk/chart.mk builds (once, cached).
PATH=$PATH:/usr/local/go/bin make --no-print-directory -s helm
export POOLGUARD_E2E=1
export E2E_RUN_DIR=${E2E_RUN_DIR:-$HOME/.cache/poolguard-e2e/runs/$(date -u +%Y%m%d-%H%M%S)-$$}
mkdir -p "$E2E_RUN_DIR/logs"
# The Argo Rollouts and CloneSet controllers build (with an empty Go cache about 9 minutes
# in all; seconds when built) at the lowest CPU priority beside the first tests, which
# need neither and mostly wait on controllers; their modules come next and wait for their
# own build (tests/e2e/harness.py controller_binary: builds/NAME.status, logs/NAME-build.log),
# and the differentials, bound by CPU, run after the builds, with the machine to themselves
# (on these 2 vCPUs a niced build beside them still made them 45-50% slower).
mkdir -p "$E2E_RUN_DIR/builds"
PATH=$PATH:/usr/local/go/bin setsid nice -n 19 bash -c '
    for build in rollouts kruise; do
        tests/e2e/build_$build.sh >"$E2E_RUN_DIR/logs/$build-build.log" 2>&1
        echo $? >"$E2E_RUN_DIR/builds/$build.status"
    done' &
controller_builds=$!
echo "$controller_builds" >"$E2E_RUN_DIR/builds/pid"
cleanup() {
    kill -- -"$controller_builds" 2>/dev/null || true
    # Whatever happens to pytest, nothing this run started survives it.
    if [ "${E2E_KEEP:-0}" = 0 ]; then
        "$PY" -m tests.e2e.controlplane down "$E2E_RUN_DIR" >/dev/null 2>&1 || true
    fi
}
trap cleanup EXIT
echo "e2e: run directory $E2E_RUN_DIR (component logs in logs/)"
status=0
# shellcheck disable=SC2086
"$PY" -m pytest -p no:cacheprovider -o addopts= -q -rfE --durations=20 ${PYTEST_ARGS:-} \
    tests/e2e/test_scenarios.py tests/e2e/test_policy_guard.py \
    tests/e2e/test_consolidation.py tests/e2e/test_controllers.py \
    tests/e2e/test_hpa.py tests/e2e/test_leaderworkerset.py tests/e2e/test_fake_kubelet.py \
    tests/e2e/test_rebalance.py \
    tests/e2e/test_argo_rollouts.py tests/e2e/test_cloneset.py \
    tests/e2e/test_differential.py tests/e2e/test_differential_lws.py \
    tests/e2e/test_differential_rollouts.py tests/e2e/test_differential_cloneset.py \
    tests/e2e/test_admission_policy.py tests/e2e/test_helm.py \
    || status=$?
"$PY" -m tests.e2e.summary "$E2E_RUN_DIR" || status=$?
exit "$status"
