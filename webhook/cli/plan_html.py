"""`plan --output html`: the plan document as one self-contained page.

No script, no external fetch (a Content-Security-Policy forbids them): nodes grouped
by pool, each pod drawn on its node (unscheduled pods apart) and coloured by its fate,
with its deletion cost and why it goes or might go; victims numbered in deletion order
within their ReplicaSet; the verdict and the fix on top, the ReplicaSet split of a
rollout, a LeaderWorkerSet's groups, and the nodes the scale-down frees. Last, for the
cluster, the rebalance plan when it concerns the reader (`plan_rebalance`).
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from ..core.kinds.registry import BY_KIND
from .plan_document import not_checked, requester_judged
from .plan_frees import frees_html

_NO_POOL = "(no pool label)"

_STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7f9}
header{padding:16px 24px;color:#fff}
header.allowed{background:#1f7a3a}header.denied{background:#b3261e}
header.violations{background:#a15c00}header.unchecked{background:#51606f}
h1{margin:0 0 4px;font-size:20px}h2{font-size:16px;margin:20px 0 8px}
main{padding:8px 24px 24px}
.verdict{font-size:18px;font-weight:600}
.fix,.why{margin:6px 0 0}.fix ul{margin:2px 0 0;padding-left:20px}
.pools{display:flex;flex-wrap:wrap;gap:16px}
.pool{background:#fff;border:1px solid #ccd2da;border-radius:8px;padding:10px 12px;min-width:220px}
.pool.protected{border:2px solid #3056d3}
.pool h3{margin:0 0 8px;font-size:15px}
.node{border:1px dashed #9aa5b1;border-radius:6px;padding:6px;margin:6px 0}
.node .name{font-size:12px;color:#51606f;margin-bottom:4px}
.pod{display:inline-flex;flex-wrap:wrap;align-items:center;gap:4px;margin:2px;padding:3px 8px;
     border-radius:12px;font-size:12px;color:#fff;max-width:440px}
.pod .cost{font-size:11px;background:rgba(0,0,0,.22);border-radius:8px;padding:0 6px}
.pod .reason{flex-basis:100%;font-size:11px;opacity:.95}
.unscheduled{background:#fff;border:1px dashed #b3261e;border-radius:8px;padding:10px 12px;
             margin-top:16px}
.unscheduled h3{margin:0 0 8px;font-size:15px}
.pod.victim{background:#c62828}.pod.possible-victim{background:#ef8f00}
.pod.blocked{background:#6a1b9a}
.pod.survives{background:#2e7d32}
.pod .order{background:#fff;color:#c62828;border-radius:50%;min-width:18px;height:18px;
            display:inline-flex;align-items:center;justify-content:center;font-weight:700}
.pod .rs{opacity:.85;font-size:11px}
table{border-collapse:collapse;background:#fff}
td,th{border:1px solid #ccd2da;padding:4px 8px;text-align:left}
.legend span{margin-right:12px}.legend .pod{max-width:none;flex-wrap:nowrap}
ul{margin:4px 0;padding-left:20px}
"""


def render_html(document: Mapping[str, Any], cluster: str = "") -> str:
    """The whole page, as a string; nothing in it loads anything from anywhere. `cluster`:
    a section about the cluster rather than the workload (the rebalance plan), drawn last."""
    workload, replicas = document["workload"], document["replicas"]
    title = (f"{workload['kind']} {workload['namespace']}/{workload['name']}: "
             f"{replicas['from']} \u2192 {replicas['to']} replicas")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        # Self-contained by construction: the browser refuses any fetch.
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'\">",
        f"<title>poolguard plan: {escape(title)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        _header(document, title),
        "<main>",
        _legend(_several_replica_sets(document), _unit_of(document)),
        _replica_sets(document),
        _units(document),
        _pools(document),
        frees_html(document),
        _unscheduled(document),
        _notes(document),
        cluster,
        "</main></body></html>",
    ]
    return "\n".join(part for part in parts if part)


def _verdict(document: Mapping[str, Any]) -> tuple[str, str]:
    """(css class, words) for the verdict banner."""
    if document.get("clampedTo") is not None:
        return "violations", f"CLAMPED to {document['clampedTo']}"
    if document.get("requesterNote"):
        return "allowed", "ALLOWED"
    if not_checked(document):
        return "unchecked", "NOT CHECKED"
    if not document["checked"]:
        return "unchecked", "ALLOWED: not checked"
    if not document["violations"]:
        return "allowed", "ALLOWED"
    if not document["allowed"]:
        return "denied", "DENIED"
    return "violations", f"ALLOWED despite violations (enforcement: {document['enforcement']})"


def _header(document: Mapping[str, Any], title: str) -> str:
    css, words = _verdict(document)
    lines = [f'<header class="{css}" id="verdict">', f"<h1>{escape(title)}</h1>",
             f'<div class="verdict">{escape(words)}</div>']
    if not document["checked"]:
        lines.append(f'<p class="why">{escape(document["notCheckedBecause"])}</p>')
    if document.get("requester") is not None:
        how = document.get("requesterNote") or requester_judged(document)
        lines.append(f'<p class="why" id="requester">As {escape(document["requester"])}: '
                     f'{escape(how)}</p>')
    fixes: dict[str, None] = {}  # each option once, in order, whichever rules share it
    for violation in document["violations"]:
        lines.append(f'<p class="why">[{escape(violation["rule"])}] '
                     f'{escape(violation["problem"])}</p>')
        fixes.update(dict.fromkeys(violation["fixes"]))
    if fixes:
        lines.append('<div class="fix" id="fix"><b>Fix, any of:</b><ul>'
                     + "".join(f"<li>{escape(fix)}</li>" for fix in fixes) + "</ul></div>")
    safe = document.get("safeReplicas")
    if safe is not None:
        lines.append(f'<p class="fix">Smallest replica count from {document["replicas"]["to"]} '
                     f"up that breaks no rule now: <b>{safe}</b></p>")
    lines.append("</header>")
    return "\n".join(lines)


def _legend(per_replica_set: bool, unit: str | None = None) -> str:
    # Each ReplicaSet deletes on its own: no order holds across them.
    order = ("numbered in deletion order within its ReplicaSet" if per_replica_set
             else "numbered in deletion order")
    # Blocked units (a LeaderWorkerSet's groups) wait on the units in the new range, not
    # on one pod.
    waits = (f"kept for now, goes once the {unit}s in the new range are ready" if unit
             else "waits on an unhealthy pod")
    return ('<p class="legend"><span class="pod victim"><span class="order">1</span>victim, '
            f'{order}</span><span class="pod possible-victim">possible victim: might be '
            f'deleted instead of a victim</span><span class="pod blocked">blocked: condemned, '
            f'{waits}</span><span class="pod survives">survives</span>'
            "</p><p>Each pod shows its deletion cost and, for a victim, a possible victim or a "
            "blocked pod, why.</p>")


def _replica_sets(document: Mapping[str, Any]) -> str:
    kind = BY_KIND[document["workload"]["kind"]]
    sizes = document.get(kind.children_key or "") or {}
    if len(sizes) < 2:
        return ""
    child = kind.sizes[0]
    rows = "".join(f"<tr><td>{escape(name)}</td><td>{s['from']}</td><td>{s['to']}</td></tr>"
                   for name, s in sizes.items())
    return (f"<h2>{child}s (the {kind.kind} controller splits the change)</h2>"
            f'<table id="{child.lower()}s"><tr><th>{child}</th><th>from</th><th>to</th></tr>'
            f"{rows}</table>")


def _unit_of(document: Mapping[str, Any]) -> str | None:
    """The unit of a replica when it is a group of pods (`group`), else None."""
    kind = BY_KIND[document["workload"]["kind"]]
    return kind.unit if kind.units_key in document else None


def _units(document: Mapping[str, Any]) -> str:
    """The units of a replica (a LeaderWorkerSet's groups), highest index first: a
    scale-down removes whole units."""
    kind = BY_KIND[document["workload"]["kind"]]
    units = document.get(kind.units_key or "")
    if not units:
        return ""
    head, rest = kind.unit_parts
    rows = "".join(
        f'<tr data-{kind.unit}="{u["index"]}" data-fate="{escape(u["fate"])}">'
        f'<td>{u["index"]}</td><td>{escape(u["fate"])}</td>'
        f'<td>{escape(u[head] or "(none)")}</td><td>{escape(", ".join(u[rest]) or "(none)")}</td>'
        f'<td>{escape(", ".join(pool or _NO_POOL for pool in u["pools"]))}'
        f'{" (protected)" if u["protected"] else ""}</td></tr>'
        for u in units)
    return (f'<h2>{kind.unit.capitalize()}s (whole {kind.unit}s go, highest {kind.unit} index '
            f'first)</h2><table id="{kind.unit}s"><tr><th>{kind.unit}</th><th>fate</th>'
            f"<th>{head}</th><th>{rest}</th><th>pools</th></tr>{rows}</table>")


def _several_replica_sets(document: Mapping[str, Any]) -> bool:
    return len({pod.get("replicaSet") for pod in document["pods"]} - {None}) > 1


def _victim_numbers(document: Mapping[str, Any]) -> dict[str, int]:
    """Each victim's place in its own ReplicaSet's deletions (each ReplicaSet deletes on
    its own, so numbers across ReplicaSets would claim an order nobody keeps)."""
    numbers: dict[str, int] = {}
    counts: dict[str | None, int] = {}
    for victim in document["victims"]:
        group = victim.get("replicaSet")
        counts[group] = counts.get(group, 0) + 1
        numbers[victim["name"]] = counts[group]
    return numbers


def _pools(document: Mapping[str, Any]) -> str:
    """Pools (protected first), their nodes, and each scheduled pod where it runs."""
    pools: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    protected: dict[str, bool] = {}
    for pod in document["pods"]:
        if pod["node"] is None:
            continue  # drawn apart: an unscheduled pod is in no pool yet
        pool = pod["pool"] or _NO_POOL
        pools.setdefault(pool, {}).setdefault(pod["node"], []).append(pod)
        protected[pool] = protected.get(pool, False) or pod["protected"]
    show_rs, unit = _several_replica_sets(document), _unit_of(document)
    numbers = _victim_numbers(document)
    html = ['<h2>Pods by pool and node</h2><div class="pools">']
    for pool in sorted(pools, key=lambda name: (not protected[name], name)):
        css = "pool protected" if protected[pool] else "pool"
        label = f"{pool} (protected)" if protected[pool] else pool
        html.append(f'<section class="{css}" data-pool="{escape(pool)}">'
                    f"<h3>{escape(label)}</h3>")
        for node in sorted(pools[pool]):
            html.append(f'<div class="node" data-node="{escape(node)}">'
                        f'<div class="name">{escape(node)}</div>')
            html.extend(_pod_chip(pod, show_rs, numbers, unit)
                        for pod in _in_order(pools[pool][node]))
            html.append("</div>")
        html.append("</section>")
    html.append("</div>")
    return "\n".join(html)


def _unscheduled(document: Mapping[str, Any]) -> str:
    """Pods without a node, apart from the pools: the controllers delete them first."""
    pods = [pod for pod in document["pods"] if pod["node"] is None]
    if not pods:
        return ""
    show_rs, numbers = _several_replica_sets(document), _victim_numbers(document)
    chips = "".join(_pod_chip(pod, show_rs, numbers, _unit_of(document))
                    for pod in _in_order(pods))
    return ('<section class="unscheduled" id="unscheduled"><h3>Not scheduled: on no node, so '
            f"in no pool yet</h3>{chips}</section>")


def _in_order(pods: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return sorted(pods, key=lambda p: (p["deletionOrder"] is None, p["deletionOrder"] or 0,
                                       p["name"]))


def _pod_chip(pod: Mapping[str, Any], show_rs: bool, numbers: Mapping[str, int],
              unit: str | None) -> str:
    fate = pod["fate"]
    number = numbers.get(pod["name"])
    order = f'<span class="order">{number}</span>' if number is not None else ""
    rs = (f'<span class="rs">[{escape(pod["replicaSet"])}]</span>'
          if show_rs and pod.get("replicaSet") else "")
    in_unit = unit is not None and pod.get(unit) is not None
    if in_unit:
        rs = f'<span class="rs">[{unit} {pod[unit]}]</span>'
    # Pods of a unit go by the unit's index: their cost plays no part.
    cost = ("" if in_unit
            else f'<span class="cost">cost {pod["deletionCost"]}</span>')
    reason = pod.get("reason")
    why = f'<span class="reason">{escape(reason)}</span>' if reason else ""
    title = fate + (f": {reason}" if reason else "")
    return (f'<span class="pod {fate}" data-pod="{escape(pod["name"])}" data-fate="{fate}" '
            f'title="{escape(title)}">{order}{escape(pod["name"])}{rs}{cost}{why}</span>')


def _notes(document: Mapping[str, Any]) -> str:
    items = [escape(w) for w in document["warnings"]]
    if document["exemptUsers"]:
        items.append("Unknown to plan: who scales. The webhook does not check requests by "
                     "scaleDown.exemptUsers: " + escape(", ".join(document["exemptUsers"])))
    if not items:
        return ""
    return "<h2>Notes</h2><ul id=\"notes\">" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"
