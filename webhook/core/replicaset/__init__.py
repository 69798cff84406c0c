"""The ReplicaSet controller: the ranking it deletes by and its scale-down, sync by sync.

Kubernetes: pkg/controller/replicaset and the ranking in pkg/controller/controller_utils.go.

- active_pods_with_ranks.py   the comparator: the specification (its ranked pods and tie
                              groups are the model's: model/)
- sort_keys.py                the same order as integer keys (pinned to the comparator)
- chain_bound.py              what any chain of syncs can delete
- replicaset_sync.py          a ReplicaSet's scale-down, sync by sync
- prediction.py               a ReplicaSet's scale-down predicted (the kind's predictor)
- fix.py                      the fix of a ReplicaSet-based kind: which costs to lower, or a wait
"""
