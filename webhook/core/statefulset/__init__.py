"""The StatefulSet controller's scale-down (pkg/controller/statefulset).

- stateful_set_control.py   which condemned pods go, and where an OrderedReady scale-down waits
- prediction.py             a StatefulSet's scale-down predicted (the kind's predictor)
- fix.py                    its fix: which highest ordinals to move, or what to wait for
"""
