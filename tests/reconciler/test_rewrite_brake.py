"""The brake on mass rewrites, and policy changes refused against the nodes: the
reconciler never rewrites most of the costs it manages on a policy mistake."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from tests.support import factories as f
from tests.support.kubeapi.helpers import wait_until
from tests.support.kubeapi.server import FakeKubeAPI
from tests.support.policies import FLAT_POLICY_FILE
from tests.support.reconcilers import FAST, client_for, fake_api
from tests.support.reconcilers import running as run_service
from webhook.cli.main import main
from webhook.cluster.state import PolicyHolder
from webhook.core.cost.mutation import SET, CostDecision
from webhook.core.objects.deletion_cost import DELETION_COST_ANNOTATION as COST
from webhook.core.objects.deletion_cost import MANAGED_COST_ANNOTATION as MARKER
from webhook.core.objects.deletion_cost import POOL_ANNOTATION as POOL
from webhook.core.policy.policy import Policy, default_policy, parse_policy
from webhook.core.policy.pool_bands import SLOTS
from webhook.reconciler.brake import rewrites
from webhook.reconciler.decide import PATCH, PodNeed
from webhook.reconciler.options import Options
from webhook.reconciler.service import Service

FLAT = Path(FLAT_POLICY_FILE).read_text()
MISSPELT = FLAT.replace("name: inference", "name: inferense")
NO_SUCH_LABEL = FLAT.replace("poolLabel: node.usage", "poolLabel: node.pool")
LEASE_FLAGS = ["--lease-duration", "1", "--renew-deadline", "0.5", "--retry-period", "0.05"]
CONFIGMAP = "poolguard/poolguard-policy"
SHIPPED_POLICY = Path(__file__).resolve().parents[2] / "manifests" / "base" / "policy.yaml"


def managed(name: str, node: str, cost: str, pool: str) -> dict:
    return f.pod(name, node_name=node, annotations={COST: cost, MARKER: cost, POOL: pool})


@pytest.fixture
def api() -> Iterator[FakeKubeAPI]:
    """Four inference pods and one hybrid pod, their costs set by poolguard."""
    with fake_api(f.node("inf-1", "inference"), f.node("inf-2", "inference"),
                  f.node("hyb-1", "hybrid"),
                  *(managed(f"llm-{i}", f"inf-{1 + i % 2}", "1000", "inference")
                    for i in range(4)),
                  managed("hyb", "hyb-1", "-100", "hybrid")) as server:
        yield server


def costs(api: FakeKubeAPI) -> dict[str, str]:
    return {pod["metadata"]["name"]: pod["metadata"]["annotations"][COST]
            for pod in api.objects("Pod")}


def generation(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def test_once_under_a_misspelt_pool_holds_every_rewrite(api, tmp_path, capsys):
    policy = tmp_path / "policy.yaml"
    policy.write_text(MISSPELT)
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    before = costs(api)
    base = ["reconcile", "--kubeconfig", kubeconfig, *LEASE_FLAGS, "--once", "--policy",
            str(policy)]
    code = main(base)
    out, err = capsys.readouterr()
    assert code == 1
    assert costs(api) == before  # not one inference pod re-costed to the default
    assert api.write_count("PATCH", "/pods/") == 0
    assert out.startswith("reconcile: 5 pods: patched 0, unchanged 1, kept 0, skipped 4 "
                          "(rewrites-held 4)")
    assert err.splitlines()[0] == (
        "error: rewrites held: 4 of the 5 deletion costs it manages would be rewritten (4 to "
        "defaultDeletionCost 0), over the 20% bound (1): holding them for policy generation "
        f"{generation(policy)}; fix the policy, or confirm with --accept-rewrites "
        f"{generation(policy)} (the chart's reconciler.acceptRewrites)")
    # confirmed by naming the generation: done, and said
    assert main([*base, "--accept-rewrites", generation(policy)]) == 0
    assert costs(api) == {**before, **{f"llm-{i}": "0" for i in range(4)}}


def test_rewrites_within_the_bound_are_not_held(api, tmp_path, capsys):
    policy = tmp_path / "policy.yaml"
    policy.write_text(MISSPELT)
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
    code = main(["reconcile", "--kubeconfig", kubeconfig, *LEASE_FLAGS, "--once", "--policy",
                 str(policy), "--max-rewrite-percent", "80"])
    assert code == 0, capsys.readouterr().err
    assert costs(api)["llm-0"] == "0"


@contextmanager
def service_under(api: FakeKubeAPI, tmp_path: Path, policy_text: str,
                  ) -> Iterator[tuple[Path, PolicyHolder, Service]]:
    """The reconciler service on a mounted policy file of `policy_text`, its Events posted
    on the policy's ConfigMap: (the file, its holder, the service)."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(policy_text)
    holder = PolicyHolder(str(policy))
    options = Options(**{**FAST.__dict__, "policy_configmap": CONFIGMAP})
    with run_service(client_for(str(api.write_kubeconfig(tmp_path / "kubeconfig")), "a"),
                     holder.policy, options, policy_file=holder) as service:
        yield policy, holder, service


def test_the_service_refuses_a_policy_change_that_empties_the_protected_pool(api, tmp_path):
    before = costs(api)
    with service_under(api, tmp_path, FLAT) as (policy, holder, service):
        wait_until(lambda: service.metrics.registry.get_sample_value(
            "poolguard_reconciler_resyncs_total"), message="first resync")
        policy.write_text(NO_SUCH_LABEL)
        wait_until(lambda: holder.refused, timeout=10, message="the change refused")
        assert "no node carries the pool label node.pool" in holder.refused
        events = wait_until(lambda: api.objects("Event"), message="the Event")
        assert service.metrics.registry.get_sample_value(
            "poolguard_reconciler_policy_refused_total") == 1.0
    assert [(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"])
            for e in events] == [("ConfigMap", "poolguard-policy", "PolicyRefused")]
    assert costs(api) == before
    assert api.write_count("PATCH", "/pods/") == 0


def test_the_service_started_under_a_mistaken_policy_holds_and_says_why(api, tmp_path):
    before = costs(api)
    with service_under(api, tmp_path, MISSPELT) as (policy, _, service):
        assert wait_until(lambda: service.metrics.registry.get_sample_value(
            "poolguard_reconciler_rewrites_held"), message="held") == 4.0
        events = wait_until(lambda: api.objects("Event"), message="the Event")
        held = service.metrics.registry.get_sample_value(
            "poolguard_reconciler_pods_skipped_total", {"reason": "rewrites-held"})
        assert held == 4.0  # the pass's four
        # a pod event does not slip a held write through: it is held too
        api.modify("Pod", "ml", "llm-0",
                   lambda pod: pod["metadata"].setdefault("labels", {}).update(x="1"))
        wait_until(lambda: service.metrics.registry.get_sample_value(
            "poolguard_reconciler_pods_skipped_total", {"reason": "rewrites-held"}) == 5.0,
            message="the pod event's write held")
        policy.write_text(FLAT)  # fixed: nothing to re-pool, the hold is released
        wait_until(lambda: service.metrics.registry.get_sample_value(
            "poolguard_reconciler_rewrites_held") == 0.0, timeout=10, message="released")
    assert [(e["involvedObject"]["name"], e["reason"]) for e in events] == [
        ("poolguard-policy", "RewritesHeld")]
    assert "4 of the 5 deletion costs it manages would be rewritten" in events[0]["message"]
    assert costs(api) == before


def hybrid_need(policy: Policy, slot: int) -> tuple[dict, PodNeed]:
    """A hybrid pod whose rank (node_rank) the reconciler would set to `slot` of the band,
    the pod carrying a cost poolguard wrote under the shipped policy's band, in slot 3."""
    shipped = default_policy().pool_by_name("hybrid")
    pool = policy.pool_by_name("hybrid")
    assert shipped is not None and pool is not None
    spacing = shipped.band.width // SLOTS
    before = str(shipped.band.low + 3 * spacing + TIE)
    pod = managed("hyb", "hyb-1", before, "hybrid")
    return pod, PodNeed(PATCH, decision=CostDecision(
        SET, "hybrid", pool.band.low + slot * spacing + TIE))


TIE = 12345  # the node's place inside each slot: a hash of its name


def test_a_rank_moving_inside_the_band_is_not_a_rewrite():
    policy = default_policy()
    assert not rewrites(policy, *hybrid_need(policy, slot=5))


def test_a_band_moved_by_the_pools_cost_is_a_rewrite():
    """The old cost still lies inside the moved band; the node's place in its slot
    does not."""
    document = yaml.safe_load(Path(SHIPPED_POLICY).read_text())
    document["pools"][1]["deletionCost"] = -200
    policy = parse_policy(document)
    pod, need = hybrid_need(policy, slot=3)
    band = policy.pool_by_name("hybrid").band
    assert band.low <= int(pod["metadata"]["annotations"][MARKER]) <= band.high
    assert rewrites(policy, pod, need)
