"""Judging a scale: the victims per workload kind, the policy's verdict, the answer.

- predict.py        the victims of a scale: the kind's predictor, from the registry
- answer.py         the answer to a scale request, in the webhooks' order: what
                    `/validate-scale`, `/mutate-scale` and `plan` ask
- requester.py      who asks: exempt users, clamped requesters, the notes they get
- policy_verdict.py whether the policy's rules allow a prediction's worst case
- safe_replicas.py  predict and judge in one call: the smallest safe count and the fix
- scope.py          whether the policy applies to a scale, then judged: what
                    `/validate-scale` and `plan` share
- clamp.py          an autoscaler's scale-down lowered to the safe count
- owner_sizing.py   workloads sized by a non-Deployment owner (never blocked)
- state_coverage.py whether a cluster state holds the pods and nodes a verdict needs
"""
