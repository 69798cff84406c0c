"""The Argo Rollouts controller's scale of a Rollout (github.com/argoproj/argo-rollouts).

- argo_rollout_counts.py   its replica arithmetic for the Rollout's ReplicaSets
- argo_rollout_sync.py     its syncs after a change of `spec.replicas`
- canary_steps.py          the canary steps that follow a step completing with the new count
- argo_rollout.py          the victims of a Rollout's scale
- prediction.py            the same as a ScalePrediction (the kind's predictor)
"""
