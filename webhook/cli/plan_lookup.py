"""Finding the workload `plan` is asked about: KIND/NAMESPACE/NAME, and what was meant."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

from ..core.kinds.registry import KIND_NAMES, KIND_SHORT_NAMES, KINDS, canonical_kind
from ..core.objects.kube import name_of, namespace_of, replicas_of
from ..core.view.cluster import ClusterView
from ..errors import InputError


class PlanError(InputError):
    """Unusable `plan` input; the message says what and where."""


def parse_workload_ref(text: str) -> tuple[str, str, str]:
    """KIND/NAMESPACE/NAME with any accepted spelling of the kind."""
    parts = text.split("/")
    if len(parts) != 3 or not all(parts):
        raise PlanError(f"--workload {text!r}: expected KIND/NAMESPACE/NAME, "
                        "for example deployment/ml/llm-serve")
    kind = canonical_kind(parts[0])
    if kind is None:
        raise PlanError(f"--workload {text!r}: unknown kind {parts[0]!r} (use {KIND_NAMES}, "
                        f"or {KIND_SHORT_NAMES})")
    return kind, parts[1], parts[2]


def find_workload(view: ClusterView, workload_ref: str) -> Mapping[str, Any]:
    """The workload KIND/NAMESPACE/NAME names, or PlanError saying why it is not there."""
    kind, namespace, name = parse_workload_ref(workload_ref)
    workload = view.workload(kind, namespace, name)
    if workload is None:
        raise PlanError(f"{kind} {namespace}/{name}: not found in {_describe(view)}"
                        f"{_others(view, kind, namespace, name)}")
    return workload


def _others(view: ClusterView, kind: str, namespace: str, name: str) -> str:
    """What the user may have meant: near names, else the kind's workloads there."""
    every = view.workloads()
    here = sorted(name_of(w) for w in every
                  if w.get("kind") == kind and namespace_of(w) == namespace)
    close = difflib.get_close_matches(name, here, n=3, cutoff=0.6)
    if close:
        return "; did you mean " + " or ".join(close) + "?"
    if here:
        shown = ", ".join(here[:10]) + (f" and {len(here) - 10} more" if len(here) > 10 else "")
        return f"; the {kind}s in namespace {namespace}: {shown}"
    elsewhere = sorted({f"{w.get('kind')} {namespace_of(w)}/{name}" for w in every
                        if name_of(w) == name})
    if elsewhere:
        return f"; no {kind} in namespace {namespace}, but there is " + ", ".join(elsewhere)
    return f"; no {kind} in namespace {namespace}" if every else ""


def _describe(view: ClusterView) -> str:
    """The cluster state, in words that say when it holds no workloads at all."""
    if not view.workloads():
        kinds = [f"{kind.kind}s" for kind in KINDS]
        return ("the cluster state, which holds no " + ", ".join(kinds[:-1])
                + f" or {kinds[-1]}")
    return "the cluster state"


def current_replicas(view: ClusterView, workload_ref: str) -> int:
    """The workload's spec.replicas (for --replicas-delta)."""
    return replicas_of(find_workload(view, workload_ref))
