"""One kind of workload: everything poolguard knows about it, in one record.

The registry (registry.py) holds one of these per kind; the admission routing, the
cache's resources, the state files, `plan`'s names and rendering and the tests derive
from it. Its controller's port lives in one package of the core (replicaset/,
deployment/, ...), whose predictor the record names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..view.resource import Resource

if TYPE_CHECKING:
    from ..model.fix_facts import FixFacts
    from ..model.prediction import ScalePrediction
    from ..view.cluster import ClusterView

# (view, workload, to_replicas, now_ns, burst) -> the victims of that scale
Predictor = Callable[["ClusterView", Mapping[str, Any], int, "int | None", int],
                     "ScalePrediction"]
# The kind's own options of a violation's fix, each one thing to do now (or to wait for),
# worded with the pods, groups and numbers of the prediction (see model/fix_facts.py).
FixWording = Callable[["FixFacts"], list[str]]
# (view, workload) -> the pod template a workload without its own takes from another object
TemplateRef = Callable[["ClusterView", Mapping[str, Any]], Mapping[str, Any]]


@dataclass(frozen=True)
class WorkloadKind:
    """A workload kind whose scale-downs poolguard predicts and judges."""

    resource: Resource
    short_names: tuple[str, ...]  # kubectl's short names; the first is plan's own
    predict: Predictor
    # How this kind's controller can be steered away from the protected pods, in words.
    fix: FixWording
    unit: str = "pod"  # what one replica is: a pod, or a group of pods
    # What plan calls a unit's head pod and its other pods, e.g. ("leader", "workers").
    unit_parts: tuple[str, str] = ("", "")
    deletion_cost: bool = True  # whether the pod-deletion-cost annotation steers it
    # The pod template, as keys under `spec` (a LeaderWorkerSet's is its workers').
    template: tuple[str, ...] = ("template",)
    # Where a workload without a pod template of its own takes it from, read through the
    # view (an Argo Rollout's `workloadRef`); None when the template is always its own.
    template_ref: TemplateRef | None = None
    # The API server validates its pod template's annotations (apps/v1 kinds): the
    # template webhook checks a deletion cost there as the API server would.
    template_validated: bool = False
    # The service accounts of the controllers that write its replicas or its children's.
    controller_users: tuple[str, ...] = ()
    # Why any victim goes, when one reason fits them all (ordinals); else each its own.
    victim_reason: str | None = None
    # The kinds of the children whose replicas its controller writes (a Deployment's
    # ReplicaSets, a LeaderWorkerSet's StatefulSets): such a child with an owner is sized
    # by it, so the webhook never blocks the owner's writes and `plan --all-workloads`
    # plans the owner instead.
    sizes: tuple[str, ...] = ()
    # Its writes to its children are modelled here (the Deployment's proportional split),
    # not left to the owner rule: its controller is exempt by user name instead.
    sizing_modelled: bool = False
    # What its predictor reads of a pod beyond `PodFacts`, so that the live cache's
    # compact pods keep it: dotted paths (`metadata.finalizers`), and the types of the
    # `status.conditions` it reads.
    pod_fields: tuple[str, ...] = ()
    pod_conditions: tuple[str, ...] = ()
    # Its victims are named with their ReplicaSet (the Deployment controller's kinds).
    names_replicasets: bool = False
    # Why a victim goes when no pod of the set its controller deletes among survives (no
    # survivor to compare it with), in words; and why a pod tied with no victim may go
    # (the sets are synced in another order): the words of kinds ranked as a ReplicaSet
    # ranks, empty for kinds whose predictor gives such pods their reasons itself.
    every_pod_goes: str = ""
    sync_order_decides: str = ""

    @property
    def kind(self) -> str:
        """The kind, e.g. `Deployment`."""
        return self.resource.kind

    @property
    def plural(self) -> str:
        """The resource, e.g. `deployments`."""
        return self.resource.name

    @property
    def group(self) -> str:
        """The API group, e.g. `apps`."""
        return self.resource.group

    @property
    def custom(self) -> bool:
        """A custom resource: its CRD may be missing, and its group is checked by name."""
        return self.resource.optional

    @property
    def chart_switch(self) -> str:
        """Its `scaleCheck.kinds` switch in the Helm chart (custom resources), e.g.
        `leaderWorkerSets`."""
        return f"{self.kind[0].lower()}{self.kind[1:]}s"

    @property
    def units_key(self) -> str | None:
        """The plan document's key for its units (`groups`); None when a replica is one
        pod (the document's `pods` lists those)."""
        return None if self.unit == "pod" else f"{self.unit}s"

    @property
    def children_key(self) -> str | None:
        """The plan document's key for its children's sizes (`replicaSets`); None when
        its controller sizes no child objects."""
        if not self.sizes:
            return None
        child = self.sizes[0]
        return f"{child[0].lower()}{child[1:]}s"

    @property
    def aliases(self) -> tuple[str, ...]:
        """Every spelling kubectl accepts for it, lower case: the singular, the plural,
        the short names, and both names qualified with the API group."""
        singular = self.kind.lower()
        names = (singular, self.plural, *self.short_names)
        return (*names, f"{singular}.{self.group}", f"{self.plural}.{self.group}")

    def template_of(self, workload: Mapping[str, Any],
                    view: ClusterView | None = None) -> Mapping[str, Any]:
        """The workload's pod template (empty when it has none); without one of its own,
        the one its `template_ref` names, when a `view` is there to read it."""
        found: Any = workload.get("spec")
        for key in self.template:
            found = found.get(key) if isinstance(found, Mapping) else None
        if not found and view is not None and self.template_ref is not None:
            found = self.template_ref(view, workload)
        return found if isinstance(found, Mapping) else {}
