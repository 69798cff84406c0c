"""The rebalance plan for people: what moves and why, what it frees, and why the rest stays."""

from __future__ import annotations

import textwrap

from ..core.consolidation.rebalance.node_choice import SEARCH_BUDGET
from ..core.consolidation.rebalance.rebalance_plan import Move, RebalancePlan
from ..core.policy.policy import Policy

_WIDTH = 100
_INDENT = "      "


def render_rebalance(plan: RebalancePlan, policy: Policy, source: str) -> str:
    """The plan as text: a summary line, then Moves, Frees and Stays."""
    lines = [f"Rebalance plan for {source} (dry run: nothing is evicted)."]
    off = disabled_note(policy)
    if off:
        lines.append(off)
    lines += ["", summary(plan)]
    cut = search_note(plan)
    if cut:
        lines.append(cut)
    if plan.moves:
        lines += ["", "Moves:"]
        for move in plan.moves:
            mover = move.mover
            lines.append(f"  {mover.namespace}/{mover.name}  {mover.node} ({mover.pool}) -> "
                         f"{mover.to_pool}, {mover.gpus} GPUs, {mover.workload}")
            lines += _wrapped(move_reason(move))
    if plan.freed:
        lines += ["", "Frees:"]
        lines += [f"  {node.node}  pool {node.pool}, {node.gpus} GPUs" for node in plan.freed]
    if plan.skipped:
        lines += ["", "Stays:"]
        for stayer in plan.skipped:
            lines.append(f"  {stayer.namespace}/{stayer.name}  on {stayer.node}")
            lines += _wrapped(stayer.reason)
    return "\n".join(lines)


def disabled_note(policy: Policy) -> str | None:
    """What a plan means under a policy that does not enable the moves, or None."""
    if policy.rebalance.enabled:
        return None
    return "The policy has rebalance.enabled: false; this is what it would plan if enabled."


def search_note(plan: RebalancePlan) -> str | None:
    """Why the plan may free fewer nodes than possible (a search cut short), or None."""
    if plan.exhaustive:
        return None
    return (f"The node search stopped after {SEARCH_BUDGET} sets: more nodes may be "
            "freeable than planned here, never fewer.")


def move_reason(move: Move) -> str:
    """Why a pod moves, and the node of its home pool the plan found room on."""
    return f"{move.mover.why}; room on {move.lands_on}"


def summary(plan: RebalancePlan) -> str:
    """One sentence: how many pods move and which nodes that frees, or that nothing moves."""
    if not plan.moves:
        return "Nothing moves: no node of an unprotected pool can be emptied now."
    gpus = sum(node.gpus for node in plan.freed)
    pods = "pod moves" if len(plan.moves) == 1 else "pods move"
    nodes = "node" if len(plan.freed) == 1 else "nodes"
    return (f"{len(plan.moves)} {pods} home, freeing {len(plan.freed)} {nodes} ({gpus} GPUs): "
            + ", ".join(node.node for node in plan.freed) + ".")


def _wrapped(text: str) -> list[str]:
    return textwrap.wrap(text, _WIDTH, initial_indent=_INDENT, subsequent_indent=_INDENT,
                         break_on_hyphens=False)
