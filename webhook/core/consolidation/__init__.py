"""Freeing whole nodes: each pod's rank by node inside its pool's band (policy/pool_bands.py),
and overflow pods moved home.

- node_occupancy.py   what holds a node (GPU pods, or pods on nodes offering no GPU) and
                      which nodes a set of deletions frees
- node_rank.py        a pod's place inside its band: how cheaply its node empties
- pod_cost.py         the cost a governed pod should carry: its pool's, or its node rank
- freed_nodes.py      what a predicted scale-down frees, and the best it could
- rebalance/          the other way to free nodes: overflow pods moved home, whole nodes
                      at a time (the plan; the reconciler carries it out)
"""
