"""Moving settled overflow pods home, so that whole nodes of unprotected pools go back to
training (`rebalance`): the plan, which `rebalance --dry-run` prints and the reconciler's
rebalancer carries out (webhook/reconciler/rebalancer.py).

- home_pool.py          a pod's home: its preferred node affinity on the pool label, or
                        the policy's pool for its priorityClassName
- settled.py            a pod's workload up its controller chain, and whether it is at
                        rest (no rollout, scale or unready pod in flight)
- resource_requests.py  requests and allocatable in the scheduler's units
- scheduling_fit.py     the scheduler's filters that read only pod and node: taints and
                        tolerations, nodeSelector, required node affinity
- overflow_pods.py      which GPU pods of an unprotected pool may move, and why others stay
- room.py               the protected pools' free room, and placing a set of pods in it
- node_choice.py        which whole nodes to empty: as many as the room allows
- rebalance_plan.py     the plan: moves, freed nodes and skipped pods
"""
