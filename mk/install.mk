# poolguard — installing into a cluster. Included by the main Makefile, which defines
# PY, STAMP, CERT_DIR, NAMESPACE and SERVICE. See docs/install.md.

KUBECTL ?= kubectl
DOCKER ?= docker
POOLGUARD_VERSION ?= 0.1.0
IMAGE ?= poolguard:$(POOLGUARD_VERSION)
OVERLAY ?= manifests/overlays/self-signed
MANIFEST ?= build/poolguard.yaml

.PHONY: certs manifests deploy undeploy image kube-context

# Made once; `make certs` again is a no-op. Rotate with `$(PY) -m certs renew --out-dir $(CERT_DIR)`.
$(CERT_DIR)/tls.crt: | $(STAMP)
	$(PY) -m certs create --service $(SERVICE) --namespace $(NAMESPACE) --out-dir $(CERT_DIR) \
		--extra-name localhost --extra-ip 127.0.0.1

certs: $(CERT_DIR)/tls.crt ## CA + serving cert for local dev and the self-signed install (in CERT_DIR)

manifests: $(CERT_DIR)/tls.crt ## render OVERLAY (NAMESPACE, SERVICE) with the caBundle into build/poolguard.yaml
	@mkdir -p $(dir $(MANIFEST))
	@# CERT_DIR may hold a certificate for other names (an earlier NAMESPACE/SERVICE): renew
	@# re-issues it for these names (same CA), and does nothing when it already fits.
	$(PY) -m certs renew --out-dir $(CERT_DIR) --service $(SERVICE) --namespace $(NAMESPACE) \
		--extra-name localhost --extra-ip 127.0.0.1
	set -o pipefail; $(KUBECTL) kustomize $(call overlay_for,$(NAMESPACE),$(SERVICE)) \
		| $(PY) -m certs inject --ca-file $(CERT_DIR)/ca.crt > $(MANIFEST).tmp \
		|| { rm -f $(MANIFEST).tmp; exit 1; }
	mv $(MANIFEST).tmp $(MANIFEST)
	@echo "wrote $(MANIFEST) (namespace $(NAMESPACE), Service $(SERVICE)); the Secret is" \
		"$(CERT_DIR)/secret.yaml (make deploy applies both)"

# The overlay to render: OVERLAY itself for the default names, else an overlay written next
# to MANIFEST from mk/renamed-overlay.yaml that moves OVERLAY to namespace $(1) and renames
# the webhook Service to $(2), references included.
RENAMED_OVERLAY = $(dir $(MANIFEST))kustomize-$(1)-$(2)
overlay_for = $(if $(filter poolguard/poolguard-webhook,$(1)/$(2)),$(OVERLAY),$(shell \
	mkdir -p $(RENAMED_OVERLAY) && sed -e "s|@OVERLAY@|$$(realpath --relative-to=$(RENAMED_OVERLAY) \
	$(OVERLAY))|" -e "s|@NAMESPACE@|$(1)|" -e "s|@SERVICE@|$(2)|" $(dir $(lastword \
	$(filter %/install.mk,$(MAKEFILE_LIST))))renamed-overlay.yaml \
	> $(RENAMED_OVERLAY)/kustomization.yaml && echo $(RENAMED_OVERLAY)))

deploy: kube-context manifests ## kubectl apply build/poolguard.yaml and the TLS Secret to the current context
	@echo "deploying to context $$($(KUBECTL) config current-context)"
	$(KUBECTL) apply --server-side --field-manager=poolguard -f $(MANIFEST)
	$(KUBECTL) apply --server-side --field-manager=poolguard -f $(CERT_DIR)/secret.yaml
	$(KUBECTL) -n $(NAMESPACE) rollout status deployment/poolguard-webhook --timeout=120s

# Before anything is rendered or applied: kubectl without a current context would apply
# nowhere useful, or fail half-way through.
kube-context:
	@$(KUBECTL) config current-context >/dev/null 2>&1 || { echo "error: kubectl has no" \
		"current context ('$(KUBECTL) config current-context' failed); pick one with" \
		"'$(KUBECTL) config use-context NAME' or set KUBECONFIG, then run make again;" \
		"nothing was applied or removed" >&2; exit 2; }

undeploy: kube-context ## remove poolguard from the current context (webhook configurations first)
	@echo "note: the deletion costs poolguard set stay on the pods (harmless: they only order"
	@echo "      scale-downs). To strip them, first remove the webhook configurations, scale the"
	@echo "      reconciler to 0 and run: $(PY) -m webhook reconcile --cleanup"
	@echo "      (not run here; docs/install.md, Uninstalling)"
	$(KUBECTL) delete --ignore-not-found mutatingwebhookconfiguration/poolguard \
		validatingwebhookconfiguration/poolguard
	set -o pipefail; $(KUBECTL) kustomize $(call overlay_for,$(NAMESPACE),$(SERVICE)) \
		| $(KUBECTL) delete --ignore-not-found -f -

image: ## build the container image poolguard:0.1.0 (IMAGE=...; needs a Docker engine)
	@command -v $(DOCKER) >/dev/null 2>&1 || { echo "error: '$(DOCKER)' is not installed;" \
		"build the image where a Docker engine runs (docker build -t $(IMAGE) .)" >&2; exit 2; }
	@$(DOCKER) info >/dev/null 2>&1 || { echo "error: no Docker engine is reachable" \
		"('$(DOCKER) info' failed); start one, or build elsewhere with: docker build -t $(IMAGE) ." >&2; exit 2; }
	$(DOCKER) build --build-arg VERSION=$(POOLGUARD_VERSION) -t $(IMAGE) .
