"""The routing table: each webhook path and the handler that answers it."""

from __future__ import annotations

from .context import Handler
from .pods import review_binding, review_pod_create
from .scale import review_scale, review_scale_clamp
from .workloads import review_workload

# The webhook paths (as the webhook configurations in charts/ and manifests/ name them).
ENDPOINTS: dict[str, Handler] = {
    "/mutate-pods": review_pod_create,
    "/mutate-bindings": review_binding,
    "/mutate-scale": review_scale_clamp,
    "/validate-scale": review_scale,
    "/validate-workloads": review_workload,
}
