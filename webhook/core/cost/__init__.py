"""The deletion-cost annotation: its codec, what a pod should carry, and the admission policy.

- deletion_cost.py      the annotation parsed and written exactly as Kubernetes does
- mutation.py           the cost a pod should carry and the JSON Patch that sets it
- admission_policy.py   the MutatingAdmissionPolicy that sets costs without the webhook
"""
