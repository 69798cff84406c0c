# poolguard — the Helm chart (charts/poolguard) and the helm binary its tests use.
# Included by the main Makefile. helm is built from the Go module proxy through the wrapper
# module tests/deploy/gomod/helm (its go.mod pins the version) and cached outside the repo,
# like the e2e control plane: ~/.cache/poolguard-e2e/helm-<version>/helm. Never committed.

HELM_GOMOD := tests/deploy/gomod/helm
HELM_VERSION := $(shell sed -n 's#^require helm.sh/helm/v3 ##p' $(HELM_GOMOD)/go.mod)
HELM_CACHE ?= $(HOME)/.cache/poolguard-e2e
HELM := $(HELM_CACHE)/helm-$(HELM_VERSION)/helm
GO ?= go
# The Kubernetes version helm assumes offline (`helm template`, `helm lint`): the client-go
# minor its go.mod requires, as helm's own Makefile stamps it.
HELM_K8S_MINOR = $(shell sed -n 's#^\s*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' $(HELM_GOMOD)/go.mod)

.PHONY: helm chart-lint chart-schema test-tools

# GOGC=off: the compiler without garbage collection, as tests/e2e/build.sh explains.
# Without optimisation or inlining (-N -l) but for the standard library, which the e2e
# control plane's build (beside `make test` in CI) compiles alike: a fifth less compiler CPU,
# as tests/e2e/build_kruise.sh measured, for a helm that renders a few charts in the tests.
# The version is in the path, so an existing binary is the right one (a fresh clone, as in
# CI, must not rebuild it because its go.mod looks newer).
$(HELM): | $(HELM_GOMOD)/go.mod
	@command -v $(GO) >/dev/null || { echo "error: Go is not installed; helm $(HELM_VERSION)" \
		"is built from the Go module proxy (install Go 1.26+)" >&2; exit 2; }
	@mkdir -p $(dir $(HELM))
	@echo "helm: building helm $(HELM_VERSION) from the Go module proxy into $(dir $(HELM))" \
		"(once; about 10 minutes on 2 cores with an empty Go cache)"
	cd $(HELM_GOMOD) && CGO_ENABLED=0 GOGC=$${GOGC:-off} nice -n 10 $(GO) build -trimpath \
		-gcflags "all=-N -l" -gcflags "std=" -ldflags "-s -w \
		-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR) \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR)" \
		-o $(HELM).tmp helm.sh/helm/v3/cmd/helm
	mv $(HELM).tmp $(HELM)
	@echo "helm: built $(HELM)"

helm: $(HELM) ## build helm from the Go module proxy into ~/.cache/poolguard-e2e (once)

# `make test` gets promtool (Debian's, else built) and builds helm first when Go is there;
# without them their tests skip, loudly.
test-tools:
	@test -x $(PROMTOOL) || $(MAKE) --no-print-directory promtool-debian || \
	if command -v $(GO) >/dev/null; then echo "promtool: building it from Go instead"; \
		$(MAKE) --no-print-directory $(PROMTOOL); \
	else echo "WARNING: neither Debian's promtool nor Go: the alert-rule tests will SKIP" >&2; fi
	@if command -v $(GO) >/dev/null; then $(MAKE) --no-print-directory $(HELM); \
	else echo "WARNING: Go is not installed: helm cannot be built, the chart tests will" \
		"SKIP" >&2; fi

chart-lint: $(HELM) ## helm lint charts/poolguard
	$(HELM) lint --strict charts/poolguard

# values.schema.json's `policy` is generated from the policy model (webhook/core/policy/policy.py);
# tests/core/test_policy_schema.py fails until it is regenerated after a model change.
chart-schema: $(STAMP) ## regenerate the policy part of the chart's values.schema.json
	$(PY) -m webhook policy schema --values-schema charts/poolguard/values.schema.json

# promtool checks the alert rules (PromQL syntax, and `promtool test rules` unit tests).
# Where apt is there (Debian, Ubuntu), it is taken from the distribution's prometheus
# package: only the promtool binary is extracted (no server, no service, no dependencies),
# in seconds, and kept only when it checks and tests our rule files. Elsewhere it is
# built the same way as helm from tests/deploy/gomod/promtool. remove_all_sd leaves out the service
# discovery plugins: promtool's rule commands do not use them, and one of them (nomad)
# pins a version the module proxy does not serve.
PROMTOOL_GOMOD := tests/deploy/gomod/promtool
PROMTOOL_VERSION := $(shell sed -n 's#^require github.com/prometheus/prometheus ##p' $(PROMTOOL_GOMOD)/go.mod)
PROMTOOL := $(HELM_CACHE)/promtool-$(PROMTOOL_VERSION)/promtool

PROMTOOL_DEBIAN := $(HELM_CACHE)/promtool-debian/promtool
RULE_FILES_CHECK = $(1) check rules charts/poolguard/files/prometheus-rules.yaml >/dev/null \
	&& $(1) test rules tests/deploy/prometheus-rules-test.yaml >/dev/null

.PHONY: promtool promtool-debian

$(PROMTOOL): | $(PROMTOOL_GOMOD)/go.mod
	@command -v $(GO) >/dev/null || { echo "error: Go is not installed; promtool is built" \
		"from the Go module proxy (install Go 1.26+)" >&2; exit 2; }
	@mkdir -p $(dir $(PROMTOOL))
	@echo "promtool: building promtool $(PROMTOOL_VERSION) from the Go module proxy into" \
		"$(dir $(PROMTOOL)) (once; about 10 minutes on 2 cores with an empty Go cache)"
	cd $(PROMTOOL_GOMOD) && CGO_ENABLED=0 GOGC=$${GOGC:-off} nice -n 10 $(GO) build -tags remove_all_sd -trimpath \
		-ldflags "-s -w" -o $(PROMTOOL).tmp github.com/prometheus/prometheus/cmd/promtool
	mv $(PROMTOOL).tmp $(PROMTOOL)
	@echo "promtool: built $(PROMTOOL)"

$(PROMTOOL_DEBIAN):
	@command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || { echo "promtool:" \
		"apt-get and dpkg-deb are not available" >&2; exit 1; }
	@echo "promtool: taking promtool from Debian's prometheus package (a 20 MB download)"
	@mkdir -p $(dir $@)
	@# apt-get download writes as the _apt user when it can: let it into the directory.
	set -o pipefail; work=$$(mktemp -d) && chmod 777 $$work && trap 'rm -rf $$work' EXIT && \
		{ (cd $$work && apt-get download -qq prometheus) || { apt-get update -qq && \
		(cd $$work && apt-get download -qq prometheus); }; } && \
		dpkg-deb --fsys-tarfile $$work/prometheus_*.deb | tar -xO ./usr/bin/promtool > $@.tmp
	chmod 755 $@.tmp
	@$(call RULE_FILES_CHECK,$@.tmp) || { echo "promtool: $$($@.tmp --version 2>&1 | head -1)" \
		"cannot check or test our rule files" >&2; rm -f $@.tmp; exit 1; }
	mv $@.tmp $@
	@echo "promtool: $$($@ --version 2>&1 | head -1) in $@"

promtool-debian: $(PROMTOOL_DEBIAN)

# Debian's when it is there or can be had, else the Go build.
promtool: ## promtool for the alert-rule tests: Debian's when apt has it, else built from Go (once)
	@test -x $(PROMTOOL) || $(MAKE) --no-print-directory promtool-debian || \
		$(MAKE) --no-print-directory $(PROMTOOL)
