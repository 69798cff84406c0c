"""How many pods one sync of a ReplicaSet deletes at most.

pkg/controller/replicaset: `BurstReplicas`. A larger scale-down is deleted over several
syncs, each re-ranking what is left; every kind's predictor and the judge take it as a
parameter, so it lives below them all.
"""

BURST_REPLICAS = 500  # pkg/controller/replicaset: BurstReplicas, deletions per sync
