"""poolguard's pure core: no I/O, no Flask, no Kubernetes client.

Everything here works on plain dicts shaped like Kubernetes objects and returns
plain data, so the admission server, the reconciler and `plan` share one truth.
One concern per module, listed in the order they build on each other:

- kube.py, selectors.py, shape.py, errors.py   reading objects and label selectors
- policy.py, policy_text.py     the node-pool policy and its text form
- deletion_cost.py, mutation.py the deletion-cost annotation and what a pod should carry
- ownership.py                  controller references and claims (one predicate)
- owner_sizing.py               workloads sized by a non-Deployment owner (never blocked)
- podfacts.py                   a pod's facts read once, and its integer sort key
- cluster.py                    the view of the cluster a prediction reads
- active_pods_with_ranks.py     the ReplicaSet comparator: the specification
- sort_keys.py                  the same order as integer keys (pinned to the comparator)
- chain_bound.py                what any chain of syncs can delete
- replicaset_sync.py            a ReplicaSet's scale-down, sync by sync
- deployment_util.py            port of deployment_util.go
- rollout.py                    several ReplicaSets shrinking at once, every sync order
- deployment_sync.py            the Deployment controller's split and the syncs after it
- stateful_set_control.py       which condemned StatefulSet pods go, and where it waits
- prediction.py                 the victims of a scale, per workload kind
- verdict.py, assessment.py, decision.py   judging a prediction against the policy
- clamp.py                      an autoscaler's scale-down lowered to the safe count
- admission_policy.py           the MutatingAdmissionPolicy that sets costs without the webhook
- text.py                       long messages split into short lines
"""
