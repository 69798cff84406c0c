"""The kind registry: every table, lookup and route derives from its records.

Parametrised over the registry, so a kind added there is held to each check at once.
"""

from __future__ import annotations

import pytest

from tests.support import factories as f
from tests.support import reviews
from webhook.admission.handlers import Context, Outcome, review_scale, review_scale_clamp
from webhook.admission.review import parse_review
from webhook.cli.kubectl_plugin import KINDS as PLUGIN_KINDS
from webhook.cluster.listing import SNAPSHOT_RESOURCES
from webhook.cluster.live import ALL_RESOURCES
from webhook.core.kinds.registry import (
    KIND_NAMES,
    KIND_SHORT_NAMES,
    KINDS,
    RESOURCES,
    canonical_kind,
    kind_of_object,
    workload_kind,
)
from webhook.core.policy.policy import default_policy
from webhook.core.view.resource import WORKLOAD_RESOURCES
from webhook.core.view.snapshot import Snapshot

BY_NAME = pytest.mark.parametrize("kind", KINDS, ids=lambda kind: kind.kind)
HPA = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"


@BY_NAME
def test_every_spelling_names_the_kind(kind):
    for alias in (*kind.aliases, kind.kind, kind.kind.upper()):
        assert canonical_kind(alias) == kind.kind, alias
        assert PLUGIN_KINDS[alias.lower()] == kind.short_names[0]
    assert kind.kind.lower() in KIND_NAMES and kind.short_names[0] in KIND_SHORT_NAMES


def test_the_view_knows_the_workload_resources_the_registry_does():
    # The view tells workload objects apart by its own table, below the kinds' packages.
    assert tuple(kind.resource for kind in KINDS) == WORKLOAD_RESOURCES


def test_no_spelling_names_two_kinds():
    spellings = [alias for kind in KINDS for alias in kind.aliases]
    assert len(spellings) == len(set(spellings))


@BY_NAME
def test_the_cache_and_state_files_read_it(kind):
    assert kind.resource in ALL_RESOURCES and kind.resource in SNAPSHOT_RESOURCES
    assert kind.resource in RESOURCES


@BY_NAME
def test_its_objects_are_known_by_kind_and_group(kind):
    obj = {"kind": kind.kind, "apiVersion": kind.resource.api_version}
    assert kind_of_object(obj) is kind
    other = {"kind": kind.kind, "apiVersion": "example.com/v1"}
    # A custom resource is the registry's only in its own group.
    assert (kind_of_object(other) is kind) == (not kind.custom)
    assert workload_kind(kind.group, kind.plural) == kind.kind
    assert workload_kind("example.com", kind.plural) is None


@BY_NAME
@pytest.mark.parametrize("handler", [review_scale, review_scale_clamp])
def test_its_scale_requests_are_routed_to_the_scale_check(kind, handler):
    """A scale of a workload the cache has not seen is not ignored: the check answers it
    (unchecked), where another group's resource of the same name is ignored."""
    version = kind.resource.api_version.rpartition("/")[2]
    ctx = Context(policy=default_policy(), view=Snapshot([f.node("inf-1", "inference")]),
                  now_ns=lambda: 0)
    user = {"username": HPA}
    ours = parse_review(reviews.scale(kind.plural, "web", 3, 1, group=kind.group,
                                      version=version, user=user))
    theirs = parse_review(reviews.scale(kind.plural, "web", 3, 1, group="example.com",
                                        version="v1", user=user))
    assert handler(ours, ctx).outcome != Outcome.IGNORED
    assert handler(theirs, ctx).outcome == Outcome.IGNORED


@BY_NAME
def test_the_live_cache_keeps_what_the_kinds_predictor_reads_of_a_pod(kind):
    """Live and state-file predictions agree only if the compact pod keeps every field
    the predictor reads beyond `PodFacts`."""
    from webhook.cluster.compact import compact_pod

    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "ns", "finalizers": ["example.com/hold"]},
           "spec": {"nodeName": "n"},
           "status": {"phase": "Running", "conditions": [
               {"type": condition, "status": "False"} for condition in kind.pod_conditions]}}
    copy = compact_pod(pod)
    for path in kind.pod_fields:
        source, kept = pod, copy
        for key in path.split("."):
            source, kept = source.get(key, {}), kept.get(key, {})
        assert kept == source, path
    assert [c["type"] for c in copy["status"].get("conditions", [])] == list(kind.pod_conditions)


def test_a_compact_pod_keeps_the_fields_and_conditions_it_is_asked_for():
    from webhook.cluster.compact import compact_pod

    pod = {"metadata": {"name": "p", "finalizers": ["a"], "generateName": "x"},
           "status": {"conditions": [{"type": "Ready", "status": "True"},
                                     {"type": "InPlaceUpdateReady", "status": "False"}]}}
    copy = compact_pod(pod, ("metadata.finalizers", "spec.missing"),
                       frozenset({"InPlaceUpdateReady"}))
    assert copy["metadata"]["finalizers"] == ["a"] and "generateName" not in copy["metadata"]
    assert copy["status"]["conditions"] == [{"type": "InPlaceUpdateReady", "status": "False"}]
    assert "missing" not in copy["spec"]
    assert "finalizers" not in compact_pod(pod, (), frozenset())["metadata"]
