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
tests/e2e/build.sh
# tests/e2e/test_helm.py installs the chart with the helm mk/chart.mk builds (once, cached).
PATH=$PATH:/usr/local/go/bin make --no-print-directory -s helm
export POOLGUARD_E2E=1
export E2E_RUN_DIR=${E2E_RUN_DIR:-$HOME/.cache/poolguard-e2e/runs/$(date -u +%Y%m%d-%H%M%S)-$$}
mkdir -p "$E2E_RUN_DIR"
if [ "${E2E_KEEP:-0}" = 0 ]; then
    # Whatever happens to pytest, nothing this run started survives it.
    trap '"$PY" -m tests.e2e.controlplane down "$E2E_RUN_DIR" >/dev/null 2>&1 || true' EXIT
fi
echo "e2e: run directory $E2E_RUN_DIR (component logs in logs/)"
status=0
# shellcheck disable=SC2086
"$PY" -m pytest -p no:cacheprovider -o addopts= -q -rfE --durations=20 ${PYTEST_ARGS:-} \
    tests/e2e/test_scenarios.py tests/e2e/test_consolidation.py tests/e2e/test_controllers.py \
    tests/e2e/test_hpa.py tests/e2e/test_leaderworkerset.py tests/e2e/test_argo_rollouts.py \
    tests/e2e/test_cloneset.py tests/e2e/test_fake_kubelet.py \
    tests/e2e/test_differential.py tests/e2e/test_differential_lws.py \
    tests/e2e/test_differential_rollouts.py tests/e2e/test_differential_cloneset.py \
    tests/e2e/test_admission_policy.py tests/e2e/test_helm.py \
    || status=$?
"$PY" -m tests.e2e.summary "$E2E_RUN_DIR" || status=$?
exit "$status"
