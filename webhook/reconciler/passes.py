"""One-shot passes (`reconcile --once`, `reconcile --cleanup`) and the Summary they print.

Each pass lists the cluster fresh, holds the Lease for its duration (none in a dry run)
and visits the pods in namespace/name order, so the dry-run lines read like a report.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..cluster.listing import read_snapshot
from ..core.objects.kube import Obj, name_of, namespace_of
from ..core.policy.policy import Policy
from ..core.policy.pool_coverage import pool_coverage
from ..core.view.resource import NAMESPACES, NODES, PODS
from .brake import BUILT_IN, brake_reason, count_pass
from .decide import CLEANED, FAILED, KEPT, PATCHED, SKIPPED, UNCHANGED_POD, UNTOUCHED
from .lease import holding_lease, make_elector
from .metrics import Metrics
from .options import Options
from .writer import Reconciler

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("poolguard.reconciler")


@dataclass
class Summary:
    """Counts of a pass, by outcome and, for skipped pods, by reason."""

    outcomes: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)

    def add(self, outcome: str, reason: str = "") -> None:
        """Count one pod."""
        self.outcomes[outcome] += 1
        if outcome == SKIPPED:
            self.skipped[reason] += 1

    @property
    def pods(self) -> int:
        return sum(self.outcomes.values())

    def line(self, dry_run: bool = False) -> str:
        """One line for people, e.g. `1000 pods: patched 3, unchanged 990, ...`."""
        patched = "would patch" if dry_run else PATCHED
        parts = [f"{patched} {self.outcomes[PATCHED]}", f"unchanged {self.outcomes[UNCHANGED_POD]}",
                 f"kept {self.outcomes[KEPT]}", f"skipped {self.outcomes[SKIPPED]}"]
        if self.skipped:
            reasons = ", ".join(f"{r} {n}" for r, n in sorted(self.skipped.items()))
            parts[-1] += f" ({reasons})"
        parts.append(f"failed {self.outcomes[FAILED]}")
        return f"{self.pods} pods: " + ", ".join(parts)

    def cleanup_line(self, dry_run: bool = False) -> str:
        """The cleanup pass's line, e.g. `6 pods: cleaned 2, untouched 4, failed 0`."""
        cleaned = "would clean" if dry_run else CLEANED
        return (f"{self.pods} pods: {cleaned} {self.outcomes[CLEANED]}, untouched "
                f"{self.outcomes[UNTOUCHED]}, failed {self.outcomes[FAILED]}")


def run_once(api: client.ApiClient, policy: Policy, options: Options, *,
             out: Callable[[str], None] = print, metrics: Metrics | None = None,
             stop: threading.Event | None = None, generation: str = BUILT_IN,
             held: Callable[[str], None] = lambda reason: None) -> Summary:
    """One pass over every pod (listed fresh); takes the Lease unless dry-run.

    Rewrites of managed costs are held (brake.py) when the pass would rewrite more than
    the bound of them and `generation` is not accepted: `held(reason)` is told.
    """
    stop = stop or threading.Event()
    elector = None if options.dry_run else make_elector(api, options)
    summary = Summary()
    with holding_lease(elector, stop) as may_write:
        view = read_snapshot(api, (NAMESPACES, NODES, PODS))
        reconciler = Reconciler(api, view, policy, options, may_write=may_write,
                                metrics=metrics, out=out, stop=stop)
        pods = _sorted_pods(view.all_pods())
        count = count_pass(policy, ((pod, reconciler.evaluate(pod)) for pod in pods))
        reason = brake_reason(count, options.max_rewrite_share, generation,
                              options.accept_rewrites)
        if reason is not None:
            reconciler.hold_rewrites = True
            held(reason)
        for finding in pool_coverage(policy, view.nodes()).disarming:
            # never silently: costs written under a policy that protects no node
            log.warning("the policy protects no node: %s", finding.message)
        for pod in pods:
            summary.add(*reconciler.reconcile(pod))
    return summary


def run_cleanup(api: client.ApiClient, options: Options, *,
                out: Callable[[str], None] = print, stop: threading.Event | None = None
                ) -> Summary:
    """Remove poolguard's annotations from every pod; takes the Lease unless dry-run."""
    stop = stop or threading.Event()
    elector = None if options.dry_run else make_elector(api, options)
    summary = Summary()
    with holding_lease(elector, stop) as may_write:
        view = read_snapshot(api, (PODS,))
        reconciler = Reconciler(api, view, None, options, may_write=may_write, out=out,
                                stop=stop)
        for pod in _sorted_pods(view.all_pods()):
            summary.add(reconciler.cleanup(pod))
    return summary


def _sorted_pods(pods: list[Obj]) -> list[Obj]:
    return sorted(pods, key=lambda pod: (namespace_of(pod), name_of(pod)))
