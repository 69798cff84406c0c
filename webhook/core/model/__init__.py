"""What every kind's prediction is made of, below every kind: the model the judge reads.

Kubernetes keeps what its controllers share (the ranking of pods to delete) in
pkg/controller/controller_utils.go, above the per-controller packages; here it lies below
them, so a kind's package and the judge (scale/) meet on these types and never on each
other's.

- ranked_pod.py       a pod ranked for one prediction: its facts, its rank, its sort key
- tie_group.py        pods tied with the cut: how many go, not which; a victim's certainty
- deciding_rule.py    the comparator rule that put a victim before a survivor, in words
- burst_replicas.py   how many pods one ReplicaSet sync deletes at most
- blocked.py          a pod that goes only once its controller stops waiting, and on what
- units.py            the unit of a replica when it is a group of pods, and its fates
- prediction.py       what a prediction says: victims, survivors, pods that wait
- fix_facts.py        what a violation's fix is worded from, and how its options fit a warning
"""
