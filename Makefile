# poolguard — `make help` lists the targets.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8443
CERT_DIR ?= .certs
NAMESPACE ?= poolguard
SERVICE ?= poolguard-webhook

.DEFAULT_GOAL := help
.PHONY: help install test lint bench run

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP) ## create .venv and install poolguard with its test tools

test: $(STAMP) ## run lint and the whole test suite
	$(PY) -m ruff check webhook certs tests bench
	$(PY) -m pytest

lint: $(STAMP) ## ruff on the code
	$(PY) -m ruff check webhook certs tests bench

bench: $(STAMP) ## benchmarks: core prediction at 100/1,000/10,000 pods
	$(PY) bench/bench_core.py

.PHONY: bench-reconciler
bench-reconciler: $(STAMP) ## reconciler: API writes and pass times over 1,000 pods (fake API server)
	$(PY) bench/bench_reconciler.py
