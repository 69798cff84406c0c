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

.PHONY: helm chart-lint test-tools

# The version is in the path, so an existing binary is the right one (a fresh clone, as in
# CI, must not rebuild it because its go.mod looks newer).
$(HELM): | $(HELM_GOMOD)/go.mod
	@command -v $(GO) >/dev/null || { echo "error: Go is not installed; helm $(HELM_VERSION)" \
		"is built from the Go module proxy (install Go 1.26+)" >&2; exit 2; }
	@mkdir -p $(dir $(HELM))
	cd $(HELM_GOMOD) && CGO_ENABLED=0 nice -n 10 $(GO) build -trimpath -ldflags "-s -w \
		-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION) \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
		-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$(HELM_K8S_MINOR) \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
		-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$(HELM_K8S_MINOR)" \
		-o $(HELM).tmp helm.sh/helm/v3/cmd/helm
	mv $(HELM).tmp $(HELM)

helm: $(HELM) ## build helm from the Go module proxy into ~/.cache/poolguard-e2e (once)

# `make test` builds helm and promtool first when Go is there; without Go their tests skip,
# loudly.
test-tools:
	@if command -v $(GO) >/dev/null; then $(MAKE) --no-print-directory $(HELM) $(PROMTOOL); \
	else echo "WARNING: Go is not installed: helm and promtool cannot be built, the chart" \
		"and alert-rule tests will SKIP" >&2; fi

chart-lint: $(HELM) ## helm lint charts/poolguard
	$(HELM) lint --strict charts/poolguard

# promtool checks the alert rules (PromQL syntax, and `promtool test rules` unit tests),
# built the same way from tests/deploy/gomod/promtool. remove_all_sd leaves out the service
# discovery plugins: promtool's rule commands do not use them, and one of them (nomad)
# pins a version the module proxy does not serve.
PROMTOOL_GOMOD := tests/deploy/gomod/promtool
PROMTOOL_VERSION := $(shell sed -n 's#^require github.com/prometheus/prometheus ##p' $(PROMTOOL_GOMOD)/go.mod)
PROMTOOL := $(HELM_CACHE)/promtool-$(PROMTOOL_VERSION)/promtool

.PHONY: promtool

$(PROMTOOL): | $(PROMTOOL_GOMOD)/go.mod
	@command -v $(GO) >/dev/null || { echo "error: Go is not installed; promtool is built" \
		"from the Go module proxy (install Go 1.26+)" >&2; exit 2; }
	@mkdir -p $(dir $(PROMTOOL))
	cd $(PROMTOOL_GOMOD) && CGO_ENABLED=0 nice -n 10 $(GO) build -tags remove_all_sd -trimpath \
		-ldflags "-s -w" -o $(PROMTOOL).tmp github.com/prometheus/prometheus/cmd/promtool
	mv $(PROMTOOL).tmp $(PROMTOOL)

promtool: $(PROMTOOL) ## build promtool from the Go module proxy into ~/.cache/poolguard-e2e (once)
