"""The Deployment controller: its proportional split and the ReplicaSet syncs after it.

Kubernetes: pkg/controller/deployment (sync.go, util/deployment_util.go).

- deployment_util.py   port of deployment_util.go
- sync_orders.py       several ReplicaSets of one Deployment shrinking at once, every sync order
- deployment_sync.py   the Deployment controller's split and the syncs after it
- prediction.py        a Deployment's scale-down predicted (the kind's predictor)
"""
