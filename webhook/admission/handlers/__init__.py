"""The admission handlers: the webhook's decisions, without HTTP.

Each `review_*` handler takes the parsed `request` of an AdmissionReview (review.py) and a
`Context`, and returns a `Decision`: the `response` and why it was given (its `Outcome`).
`ENDPOINTS` (routes.py) maps each webhook path to its handler; app.py serves that table,
so a new endpoint is a handler plus one line there. Objects stay plain dicts throughout,
so no field the API server sent is ever dropped.

- context.py     the Context a handler reads, its Decision and the Outcome it reports
- reading.py     the request's resource and objects, checked for shape
- filters.py     wrappers that pass what an endpoint does not judge (resource, operation,
                 subresource, requester)
- scale_request.py  a scale request decoded once: the core's ScaleRequest
- pods.py        pod creates and bindings: the deletion cost set at create or scheduling
- scale.py       scale requests: judged (`/validate-scale`) or clamped (`/mutate-scale`)
- workloads.py   workload templates: an invalid deletion cost refused
- routes.py      ENDPOINTS: webhook path -> handler
"""

from .context import Context, Decision, Handler, Outcome
from .pods import review_binding, review_pod_create
from .routes import ENDPOINTS
from .scale import review_scale, review_scale_clamp
from .workloads import review_workload

__all__ = ["ENDPOINTS", "Context", "Decision", "Handler", "Outcome", "review_binding",
           "review_pod_create", "review_scale", "review_scale_clamp", "review_workload"]
