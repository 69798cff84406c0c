# poolguard — `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8443
HOST ?= 127.0.0.1
CERT_DIR ?= .certs
NAMESPACE ?= poolguard
SERVICE ?= poolguard-webhook

.DEFAULT_GOAL := help
include mk/install.mk
include mk/chart.mk
.PHONY: help install test lint generate e2e e2e-down bench run bench-core bench-server bench-reconciler bench-cache soak hey

help: ## list the targets
	@grep -hE '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' \
		'{name[NR] = $$1; text[NR] = $$2; if (length($$1) > width) width = length($$1)} \
		END {format = "  make %-" width "s  %s\n"; for (i = 1; i <= NR; i++) \
		printf format, name[i], text[i]}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install poolguard with its test tools

test: $(STAMP) test-tools ## run lint and the whole test suite (gets helm and promtool first)
	$(PY) -m ruff check webhook certs tests bench
	$(PY) -m pytest --durations=25

lint: $(STAMP) ## ruff on the code
	$(PY) -m ruff check webhook certs tests bench

# The deploy files' parts that follow from the workload-kind registry (webhook/core/kinds/
# registry.py): each kind's webhook rules, its RBAC and the chart's scaleCheck.kinds switch,
# between `begin`/`end` markers in manifests/ and charts/poolguard/ (webhook/deploy_gen/).
# tests/deploy/test_generated.py fails until they are regenerated after a registry change.
generate: $(STAMP) ## regenerate the kinds' webhook rules, RBAC and chart switches from the registry
	$(PY) -m webhook.deploy_gen

BENCH_RESULTS ?= .bench-results.jsonl
bench: $(STAMP) ## all benchmarks, then every figure in one table with its bound or ratio
	rm -f $(BENCH_RESULTS)
	BENCH_RESULTS=$(abspath $(BENCH_RESULTS)) $(MAKE) --no-print-directory bench-core bench-cache bench-server bench-reconciler bench-rollout bench-scalecheck bench-statefile
	$(PY) -m bench.table $(BENCH_RESULTS)

bench-core: $(STAMP) ## core: predict + judge 1k-100k pods, today's core against the old one
	$(PY) -m bench.bench_core

bench-cache: $(STAMP) ## live cache: memory and GC pause per 10,000 realistic pods, old vs new
	$(PY) -m bench.bench_cache

bench-server: $(STAMP) hey ## the HTTPS server: admission latency and throughput under load (hey)
	$(PY) -m bench.bench_server

soak: $(STAMP) hey ## mixed load stepped up to saturation, then a killed worker and cert rotations
	$(PY) -m bench.soak

.PHONY: bench-rollout bench-scalecheck bench-statefile
bench-rollout: $(STAMP) ## a Deployment scaled down mid-rollout: the sync-order model, 200-4,000 pods
	$(PY) -m bench.bench_rollout

bench-scalecheck: $(STAMP) ## scale checks of a 10,000-pod Deployment through HTTPS, state file and live
	$(PY) -m bench.bench_scalecheck

bench-statefile: $(STAMP) ## plan --state of a 10,000-pod state from YAML and from JSON: the ratio
	$(PY) -m bench.bench_statefile

# The plan page is checked in headless Chromium; without root or apt its test is skipped.
.PHONY: chromium
test: chromium
chromium:
	@command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends chromium) \
		|| echo "chromium could not be installed: the plan page test will be skipped"

# docs/plan-page.png: the plan page of the bundled example in headless Chromium. The sha256
# of the page it shows is kept beside it, so a test notices when plan draws something else.
PLAN_PAGE_ARGS := --state examples/cluster-state.yaml --now 2026-11-22T12:00:00Z \
	--workload deploy/ml/embedder --replicas 2
.PHONY: plan-page
plan-page: $(STAMP) chromium ## regenerate docs/plan-page.png from the bundled example (headless Chromium)
	@mkdir -p build
	$(PY) -m webhook plan $(PLAN_PAGE_ARGS) --output html build/plan-page.html
	profile=$$(mktemp -d) && DBUS_SESSION_BUS_ADDRESS=disabled: chromium --headless --no-sandbox \
		--disable-gpu --disable-background-networking --no-first-run --hide-scrollbars \
		--user-data-dir=$$profile --window-size=1200,1000 --screenshot=$(CURDIR)/docs/plan-page.png \
		file://$(CURDIR)/build/plan-page.html 2>build/plan-page-chromium.log; status=$$?; \
		rm -rf $$profile; [ $$status = 0 ] || cat build/plan-page-chromium.log >&2; exit $$status
	sha256sum build/plan-page.html | cut -d' ' -f1 > docs/plan-page.html.sha256

hey:
	@command -v hey >/dev/null || (apt-get update -qq && apt-get install -y -qq hey)

# localhost only: the example state is not for the network (HOST=0.0.0.0 to open it).
run: $(STAMP) $(CERT_DIR)/tls.crt ## serve the webhook on https://localhost:8443 (PORT=..., HOST=...) from the bundled example
	$(PY) -m webhook serve --state examples/cluster-state.yaml --policy examples/policy.yaml \
		--cert $(CERT_DIR)/tls.crt --key $(CERT_DIR)/tls.key --host $(HOST) --port $(PORT) \
		--access-log

bench-reconciler: $(STAMP) ## reconciler: API writes and pass times over 1,000 pods (fake API server)
	$(PY) -m bench.bench_reconciler

e2e: $(STAMP) ## end-to-end tests on a local control plane built from k8s.io/kubernetes (docs/development.md)
	PY=$(PY) tests/e2e/run.sh

e2e-down: ## stop a cluster left running by E2E_KEEP=1 (E2E_RUN_DIR=...)
	$(PY) -m tests.e2e.controlplane down $(E2E_RUN_DIR)

# Not part of `make bench`: it builds a 30,000-pod cluster and takes 25-40 minutes (docs/performance.md).
BENCH_SCALE_RESULTS ?= .bench-scale.jsonl
.PHONY: bench-scale
bench-scale: $(STAMP) ## poolguard on the e2e control plane, 30,000 pods on 1,000 fake nodes (long)
	tests/e2e/build.sh
	rm -f $(BENCH_SCALE_RESULTS)
	status=0; BENCH_RESULTS=$(abspath $(BENCH_SCALE_RESULTS)) $(PY) -m bench.bench_scale || status=$$?; \
		if [ -s $(BENCH_SCALE_RESULTS) ]; then $(PY) -m bench.table $(BENCH_SCALE_RESULTS); fi; \
		exit $$status
