"""Kubernetes objects as the core reads them: fields, label selectors, ownership, a pod's
facts, the deletion-cost annotation.

- kube.py        small readers for object dicts (metadata, spec, status, times, Go integers)
- selectors.py   label selectors with Kubernetes semantics
- intstr.py      an IntOrString (`maxSurge`, `maxUnavailable`) scaled against a total
- shape.py       type checks for the fields poolguard reads (a clear error, not a crash)
- ownership.py   controller references and claims (one predicate)
- podfacts.py    a pod's facts read once, and its integer sort key
- deletion_cost.py  the pod-deletion-cost annotation parsed and written exactly as
                 Kubernetes does
"""
