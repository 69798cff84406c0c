"""The plan page's cluster section: the rebalance plan that `rebalance --dry-run` prints.

The same planner result and the same sentences as the text form (`rebalance_text`): what
would move where and which nodes it frees, or why nothing moves. The section is drawn
when it concerns the reader: the policy sets its `rebalance` section (enabled, or a
`priorityClassPools` map), or the plan would move a pod. A policy that leaves rebalance
at its default on a cluster with nothing to move gets no section, so a page about one
scale-down is not cluttered with a feature nobody turned to.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ..core.consolidation.rebalance.overflow_pods import Stayer
from ..core.consolidation.rebalance.rebalance_plan import RebalancePlan, plan_rebalance
from ..core.policy.policy import Policy
from ..core.view.cluster import ClusterView
from .rebalance_text import disabled_note, move_reason, search_note, summary

TOP_REASONS = 5  # the page lists the commonest reasons; the command lists every pod
_PODS_PER_REASON = 3
_ENABLED = ("The policy has rebalance.enabled: true: the reconciler that holds the Lease "
            "carries out such a plan (docs/rebalance.md).")


def rebalance_html(view: ClusterView, policy: Policy) -> str:
    """The section for the cluster `view` holds, or "" when it does not concern the
    reader."""
    plan = plan_rebalance(view, policy)
    section = policy.rebalance
    if not (section.enabled or section.priority_class_pools or plan.moves):
        return ""
    return render_rebalance_html(plan, policy)


def render_rebalance_html(plan: RebalancePlan, policy: Policy) -> str:
    """The rebalance plan as a section of the page."""
    notes = [disabled_note(policy) or _ENABLED, summary(plan), search_note(plan)]
    parts = ['<section id="rebalance"><h2>Rebalance for the cluster: overflow pods home, '
             "whole nodes back to training (dry run: nothing is evicted)</h2>",
             *(f"<p>{escape(note)}</p>" for note in notes if note),
             _moves(plan), _freed(plan), _stays(plan), "</section>"]
    return "\n".join(part for part in parts if part)


def _moves(plan: RebalancePlan) -> str:
    if not plan.moves:
        return ""
    rows = "".join(
        f'<tr data-move="{escape(m.mover.namespace)}/{escape(m.mover.name)}">'
        f"<td>{escape(m.mover.namespace)}/{escape(m.mover.name)}</td>"
        f"<td>{escape(m.mover.workload)}</td>"
        f"<td>{escape(m.mover.node)} ({escape(m.mover.pool)})</td>"
        f"<td>{escape(m.mover.to_pool)}</td><td>{m.mover.gpus}</td>"
        f"<td>{escape(move_reason(m))}</td></tr>" for m in plan.moves)
    return ('<h3>Moves</h3><table id="rebalance-moves"><tr><th>pod</th><th>workload</th>'
            "<th>from node (pool)</th><th>to pool</th><th>GPUs</th><th>why</th></tr>"
            f"{rows}</table>")


def _freed(plan: RebalancePlan) -> str:
    if not plan.freed:
        return ""
    rows = "".join(f'<tr data-freed-node="{escape(n.node)}"><td>{escape(n.node)}</td>'
                   f"<td>{escape(n.pool or '')}</td><td>{n.gpus}</td></tr>"
                   for n in plan.freed)
    return ('<h3>Frees, for training</h3><table id="rebalance-frees"><tr><th>node</th>'
            f"<th>pool</th><th>GPUs</th></tr>{rows}</table>")


def _stays(plan: RebalancePlan) -> str:
    """The commonest reasons GPU pods of unprotected pools stay, with a few of their pods."""
    if not plan.skipped:
        return ""
    groups = _by_reason(plan.skipped)
    title = ("Why nothing moves" if not plan.moves
             else "Why the other GPU pods of unprotected pools stay")
    rows = "".join(f"<tr><td>{_pods(stayers)}</td><td>{escape(reason)}</td></tr>"
                   for reason, stayers in groups[:TOP_REASONS])
    html = (f"<h3>{title} (the commonest reasons first)</h3>"
            '<table id="rebalance-stays"><tr><th>pods</th><th>why they stay</th></tr>'
            f"{rows}</table>")
    rest = groups[TOP_REASONS:]
    if rest:
        count = sum(len(stayers) for _, stayers in rest)
        html += (f"<p>{len(rest)} more reasons, for {count} more "
                 f"pod{'s' if count != 1 else ''}: <code>python -m webhook rebalance "
                 "--dry-run</code> lists every pod and why.</p>")
    return html


def _by_reason(stayers: Sequence[Stayer]) -> list[tuple[str, list[Stayer]]]:
    """The stayers grouped by their reason, the largest group first (then first seen)."""
    groups: dict[str, list[Stayer]] = {}
    for stayer in stayers:
        groups.setdefault(stayer.reason, []).append(stayer)
    return sorted(groups.items(), key=lambda group: -len(group[1]))


def _pods(stayers: Sequence[Stayer]) -> str:
    """`ml/a on node-1, ml/b on node-2 and 3 more`, the pods' data attributes kept."""
    shown = ", ".join(f'<span data-stays="{escape(s.namespace)}/{escape(s.name)}">'
                      f"{escape(s.namespace)}/{escape(s.name)} on {escape(s.node)}</span>"
                      for s in stayers[:_PODS_PER_REASON])
    more = len(stayers) - _PODS_PER_REASON
    return shown + (f" and {more} more" if more > 0 else "")
