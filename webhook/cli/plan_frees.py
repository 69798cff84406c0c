"""What a planned scale-down frees, in the plan document and its text and HTML renderings.

The document fields (`freedNodes: [{node, pool, gpus}]`, `freedGpus: {total, byPool}`,
`bestFreedNodes`) come from `core.consolidation.freed_nodes`, read from the view's pods on each
node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from ..core.consolidation.freed_nodes import what_victims_free
from ..core.policy.policy import Policy
from ..core.view.cluster import ClusterView


def frees_fields(view: ClusterView, policy: Policy, victims: Sequence[Any],
                 workload_pods: Sequence[Any]) -> dict[str, Any]:
    """The plan document's `freedNodes`, `freedGpus` and `bestFreedNodes`."""
    nodes = [pod.node_name for pod in workload_pods if pod.node_name]
    return what_victims_free(view, policy, victims, nodes).as_json()


def frees_lines(document: Mapping[str, Any]) -> list[str]:
    """`Frees N nodes (G GPUs: pool G, ...): node, ...; the best K deletions could free: B.`,
    or nothing when no choice of that many pods frees a node."""
    freed, best = document.get("freedNodes"), document.get("bestFreedNodes")
    if freed is None or (not freed and not best):
        return []
    count = len(document["victims"])
    return ["", f"Frees {_nodes_and_gpus(document)}; the best {count} deletions of this "
                f"workload could free: {best} node{'s' if best != 1 else ''}."]


def frees_html(document: Mapping[str, Any]) -> str:
    """The same sentence as a paragraph of the page, or ""."""
    lines = frees_lines(document)
    return f'<p class="frees">{escape(lines[1])}</p>' if lines else ""


def _nodes_and_gpus(document: Mapping[str, Any]) -> str:
    freed = document["freedNodes"]
    if not freed:
        return "no node"
    gpus = document["freedGpus"]
    by_pool = ", ".join(f"{pool} {count}" for pool, count in sorted(gpus["byPool"].items()))
    names = ", ".join(entry["node"] for entry in freed)
    noun = "node" if len(freed) == 1 else "nodes"
    return f"{len(freed)} {noun} ({gpus['total']} GPUs" + (f": {by_pool}" if by_pool else "") \
        + f"): {names}"
