"""The LeaderWorkerSet controller's scale-down (sigs.k8s.io/lws): whole groups go.

- leader_worker_set.py   which groups go, now and once the controller stops waiting
- prediction.py          a LeaderWorkerSet's scale-down predicted (the kind's predictor)
- fix.py                 its fix: which groups' leaders to delete, or what to wait for
- leader_statefulset.py  its leader StatefulSet scaled by itself: leaders take their workers
"""
