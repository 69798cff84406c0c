"""OpenKruise's CloneSet (`apps.kruise.io/v1alpha1`): which pods its controller deletes.

Ported from github.com/openkruise/kruise v1.8.0, pkg/controller/cloneset. The modules, in
the order they build on each other:

- cloneset_pod.py        a pod as the CloneSet controller reads it: revision, lifecycle
                         state, specified delete, availability (`IsPodAvailable`)
- cloneset_spec.py       the numbers a CloneSet's spec and status give the scale sync
- pod_sorter.py          utils/pod_sorter.go: `ActivePodsWithRanks` and `NewSameNodeRanker`
- expectation_diffs.py   sync/cloneset_sync_utils.go: `calculateDiffsWithExpectation`
- scale_sync.py          sync/cloneset_scale.go: `Scale` and `choosePodsToDelete`, sync by sync
- prediction.py          the victims of a CloneSet scale-down, as a `ScalePrediction`
- fix.py                 a denial's fix: the specified deletion to undo, or the costs
"""
