"""The read-only view of the cluster the core predicts from.

- cluster.py   the ClusterView Protocol, its label index, the in-memory Snapshot and the
               resource table
"""
