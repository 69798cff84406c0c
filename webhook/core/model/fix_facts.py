"""What a violation's fix is worded from: the prediction, the safe count, the pods at stake.

A fix is a list of options, each one thing a person or a controller can do now (scale to
a count, set a cost on named pods, undo what specifies a pod for deletion, cordon a node
and delete a named pod so that its controller recreates it elsewhere, saying what that
costs), or the plain statement that only waiting helps, and why. Each workload kind words its
own options (its registry record's `fix`) from these facts; `assessment` adds the options
every kind shares (the safe count). The webhook gives each option as one warning, so each
fits the API server's 256 characters with its `poolguard fix: ` prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .blocked import Wait
from .prediction import ScalePrediction
from .ranked_pod import RankedPod

# 256 (the API server's cut of a warning) less "poolguard fix: ".
FIX_LENGTH = 240


@dataclass(frozen=True)
class FixFacts:
    """The facts of one judged scale-down that its fix names."""

    prediction: ScalePrediction
    safe_replicas: int | None  # the smallest count at or above the target breaking no rule
    lost: Sequence[RankedPod]  # protected-pool pods the worst case deletes
    kept_outside: Sequence[RankedPod]  # pods outside protected pools that survive
    pool_cost: Callable[[RankedPod], int]  # the cost the policy gives the pod's pool

    @property
    def workload(self) -> str:
        """`Kind namespace/name`, as messages name a workload."""
        p = self.prediction
        return f"{p.kind} {p.namespace}/{p.name}"

    @property
    def namespace(self) -> str:
        return self.prediction.namespace


def fitted(words: Callable[[str, int], str], names: Sequence[str],
           limit: int = FIX_LENGTH) -> str:
    """`words(shown, left_out)` with as many of `names` (space-separated) as fit `limit`.

    Names stay whole: a command with half a pod name would be worse than one with fewer
    pods, and `left_out` lets the words say how many more there are. `words` must give a
    text at least as long as `shown` (every fix quotes its names, or lists them).
    """
    for count in range(_most_that_fit(names, limit), 0, -1):
        text = words(" ".join(names[:count]), len(names) - count)
        if len(text) <= limit:
            return text
    return words(names[0] if names else "", max(len(names) - 1, 0))


def _most_that_fit(names: Sequence[str], limit: int) -> int:
    """How many of `names`, space-separated, fit `limit` on their own.

    No more of them can fit inside the words, so `fitted` starts there: trying every count
    down from all of them joined the names again each time, quadratic in thousands of pods.
    """
    length = -1  # no space before the first name
    for count, name in enumerate(names):
        length += len(name) + 1
        if length > limit:
            return count
    return len(names)


def more(left_out: int) -> str:
    """` (and N more: plan lists them)`, or nothing when none is left out."""
    return f" (and {left_out} more: plan lists them)" if left_out else ""


def listed(names: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def wait_option(wait: Wait) -> str:
    """The option of a scale-down that stalls: nothing but waiting moves it on."""
    return f"wait, then retry: the controller deletes nothing more while {wait.reason}"



def fitted_cordon(words: Callable[[str, int, str], str], names: Sequence[str],
                  pods: Sequence[RankedPod], limit: int = FIX_LENGTH,
                  least_nodes: int = 0) -> str:
    """`fitted` for an option that cordons the nodes of `pods` before deleting `names`:
    `words(shown, left_out, cordon)` with as many nodes (at most two, at least
    `least_nodes` when the pods have that many: else the text returned is over `limit`)
    and names as fit."""
    nodes = sorted({pod.node_name for pod in pods if pod.node_name})
    text = ""
    for count in range(min(len(nodes), 2), min(least_nodes, len(nodes)) - 1, -1):
        command = _cordon(nodes, count)
        text = fitted(lambda shown, left, command=command: words(shown, left, command),
                      names, limit)
        if len(text) <= limit:
            return text
    return text


def _cordon(nodes: Sequence[str], shown: int) -> str:
    """`kubectl cordon` of the first `shown` of `nodes`, the rest counted.

    A pod deleted to be recreated elsewhere most likely lands back on the node it left,
    which has just freed its room, unless that node is cordoned first."""
    if not nodes or not shown:
        return f"cordon {'its node' if len(nodes) <= 1 else 'their nodes'}"
    rest = len(nodes) - shown
    return (f"kubectl cordon {' '.join(nodes[:shown])}"
            + (f" (and {rest} more node{'s' if rest > 1 else ''})" if rest > 0 else ""))
