"""The Eviction API of the fake API server (policy/v1, `POST .../pods/NAME/eviction`),
as pkg/registry/core/pod/storage/eviction.go answers it."""

from __future__ import annotations

import copy

from webhook.core.objects.selectors import selector_matches

from .errors import ApiError
from .resources import Obj, resource_type
from .store import Store


def evict(store: Store, namespace: str, name: str) -> Obj:
    """Evict a pod: its one PodDisruptionBudget decides (429 with a DisruptionBudget cause
    when it allows no disruption; 500 when several match), and an allowed eviction spends
    one of its `status.disruptionsAllowed` and deletes the pod."""
    pod = store.find(resource_type("Pod"), namespace, name)
    labels = pod["metadata"].get("labels") or {}
    budgets = [pdb for (ns, _), pdb in sorted(store.objects["poddisruptionbudgets"].items())
               if ns == namespace and (pdb.get("spec") or {}).get("selector")
               and selector_matches(pdb["spec"]["selector"], labels)]
    if len(budgets) > 1:
        raise ApiError(500, "InternalError", "This pod has more than one "
                       "PodDisruptionBudget, which the eviction subresource does not "
                       "support.")
    if budgets:
        budget = copy.deepcopy(budgets[0])
        status = budget.setdefault("status", {})
        if int(status.get("disruptionsAllowed") or 0) < 1:
            raise ApiError(429, "TooManyRequests", "Cannot evict pod as it would violate "
                           "the pod's disruption budget.", causes=[{
                               "reason": "DisruptionBudget",
                               "message": f"The disruption budget "
                               f"{budget['metadata']['name']} needs more healthy pods"}])
        status["disruptionsAllowed"] = int(status["disruptionsAllowed"]) - 1
        store.commit(resource_type("PodDisruptionBudget"), "MODIFIED", budget)
    store.delete(resource_type("Pod"), namespace, name)
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "code": 201}
