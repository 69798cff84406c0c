"""manifests/overlays/local-dev: everything the base ships except the workloads, with the
webhooks called at https://127.0.0.1:8443 (what `make e2e` installs, on its own port)."""

from __future__ import annotations

import pytest

from tests.support.install import needs_kubectl, rendered, webhooks

WORKLOADS = {("Deployment", "poolguard-webhook"), ("Deployment", "poolguard-reconciler"),
             ("Service", "poolguard-webhook"), ("Service", "poolguard-webhook-metrics"),
             ("Service", "poolguard-reconciler-metrics"),
             ("PodDisruptionBudget", "poolguard-webhook")}
CONFIGURATIONS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def _names(objects: list[dict]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}


@needs_kubectl
def test_local_dev_ships_the_base_without_the_workloads() -> None:
    base, local = rendered("self-signed"), rendered("local-dev")
    assert _names(local) == _names(base) - WORKLOADS
    # RBAC, ServiceAccounts, the policy and the namespace are the base's, unchanged
    for obj in local:
        if obj["kind"] not in CONFIGURATIONS:
            [same] = [o for o in base if (o["kind"], o["metadata"]["name"])
                      == (obj["kind"], obj["metadata"]["name"])]
            assert obj == same


@needs_kubectl
@pytest.mark.parametrize("kind", CONFIGURATIONS)
def test_local_dev_webhooks_call_localhost_on_the_base_paths(kind: str) -> None:
    base = webhooks(rendered("self-signed"), kind)
    local = webhooks(rendered("local-dev"), kind)
    assert set(local) == set(base)
    for name, hook in local.items():
        path = base[name]["clientConfig"]["service"]["path"]
        assert hook["clientConfig"] == {"url": f"https://127.0.0.1:8443{path}",
                                        "caBundle": ""}, name
        # everything else as shipped: rules, selectors, matchConditions, policies
        strip = {k: v for k, v in hook.items() if k != "clientConfig"}
        assert strip == {k: v for k, v in base[name].items() if k != "clientConfig"}
