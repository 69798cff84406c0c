"""The read-only view of the cluster the core predicts from.

- resource.py      a resource type poolguard reads: pods, nodes, namespaces, the workloads'
- cluster.py       the ClusterView protocol: what the core, the reconciler and plan read
- label_index.py   one namespace's pods by label: a scale check's owner index
- snapshot.py      a ClusterView over a fixed set of objects (state files, tests)
- pods_by_node.py  pods by node, and what each node holds remembered until a pod there changes
"""
