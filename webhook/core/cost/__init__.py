"""The deletion cost a pod should carry, and the admission policy that sets it.

- mutation.py           the cost a pod should carry and the JSON Patch that sets it
- admission_policy.py   the MutatingAdmissionPolicy that sets costs without the webhook
"""
