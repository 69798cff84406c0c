"""The pod-deletion-cost annotation, parsed exactly as Kubernetes parses it.

Mirrors `GetDeletionCostFromPodAnnotations` in pkg/apis/core/helper/helpers.go:
the first byte must be `-`, or the value must be exactly "0", or start with 1-9;
then `strconv.ParseInt(value, 10, 32)` must accept it.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..errors import InputError
from .kube import go_parse_int

DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
# poolguard's marker: the cost value poolguard wrote. A cost that differs from it (or has
# no marker) was set by someone else and is never overwritten.
MANAGED_COST_ANNOTATION = "poolguard.dev/managed-deletion-cost"
POOL_ANNOTATION = "poolguard.dev/pool"
# managedFields' path to the cost annotation (fieldsV1: keys prefixed with "f:").
_COST_FIELD_PATH = ("f:metadata", "f:annotations", f"f:{DELETION_COST_ANNOTATION}")
# Field managers that do not name another controller: poolguard itself (its reconciler's
# user agent "poolguard/..."), people's tools (kubectl annotate/edit/patch/apply, helm, k9s,
# browser consoles "Mozilla/...", scripts on the official Python client, whose default user
# agent is "OpenAPI-Generator/<version>/python"), and kube-controller-manager, which
# creates pods with the cost their workload's template carries: a person's choice too.
OWN_MANAGER_PREFIXES = ("poolguard",)
PERSON_MANAGER_PREFIXES = ("kubectl", "kube-controller-manager", "helm", "k9s", "Mozilla",
                           "OpenAPI-Generator")
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1


class InvalidDeletionCost(InputError):
    """An annotation value the API server would reject."""

    def __init__(self, value: str, field_path: str) -> None:
        self.value = value
        self.field_path = field_path
        super().__init__(invalid_cost_message(value, field_path))


def annotation_field_path(prefix: str = "metadata.annotations") -> str:
    """The field path the API server names for the annotation under `prefix`."""
    return f"{prefix}[{DELETION_COST_ANNOTATION}]"


def invalid_cost_message(value: str, field_path: str | None = None) -> str:
    """The API server's own wording for an invalid deletion cost."""
    path = field_path or annotation_field_path()
    return f"{path}: Invalid value: {go_quote(value)}: must be a 32bit integer"


def parse_deletion_cost(value: str) -> int | None:
    """Return the int32 value of `value`, or None when Kubernetes rejects it."""
    if not _valid_first_digit(value):
        return None
    return go_parse_int(value, 32)


def is_valid_deletion_cost(value: str) -> bool:
    """True when the API server accepts `value` as a deletion cost."""
    return parse_deletion_cost(value) is not None


def deletion_cost_of(annotations: Mapping[str, str] | None) -> int:
    """The cost the ReplicaSet controller uses: absent or invalid counts as 0."""
    if not annotations:
        return 0
    value = annotations.get(DELETION_COST_ANNOTATION)
    if value is None:
        return 0
    parsed = parse_deletion_cost(value) if isinstance(value, str) else None
    return 0 if parsed is None else parsed


def check_deletion_cost(
    annotations: Mapping[str, object] | None, field_prefix: str = "metadata.annotations"
) -> None:
    """Raise InvalidDeletionCost when an explicit value would be rejected."""
    if not annotations or DELETION_COST_ANNOTATION not in annotations:
        return
    value = annotations[DELETION_COST_ANNOTATION]
    if not isinstance(value, str) or parse_deletion_cost(value) is None:
        raise InvalidDeletionCost(
            value if isinstance(value, str) else repr(value), annotation_field_path(field_prefix)
        )


def cost_set_by_hand(annotations: Mapping[str, str] | None) -> bool:
    """True when a deletion cost is present that poolguard did not write."""
    if not annotations or DELETION_COST_ANNOTATION not in annotations:
        return False
    return annotations.get(MANAGED_COST_ANNOTATION) != annotations[DELETION_COST_ANNOTATION]


def cost_writer(metadata: Mapping[str, object]) -> str:
    """The field manager of another controller that last wrote the deletion cost, or "".

    Read from `metadata.managedFields`: of the managers whose fieldsV1 hold the cost
    annotation, the latest by time; "" when none does or when that one is poolguard
    or a person's tool (`OWN_MANAGER_PREFIXES`, `PERSON_MANAGER_PREFIXES`).
    """
    owners = []
    entries = metadata.get("managedFields")
    for entry in entries if isinstance(entries, list) else ():
        node = entry.get("fieldsV1") if isinstance(entry, Mapping) else None
        for key in _COST_FIELD_PATH:
            node = node.get(key) if isinstance(node, Mapping) else None
        manager = entry.get("manager") if node is not None else None
        if isinstance(manager, str) and manager:
            owners.append((str(entry.get("time") or ""), manager))
    if not owners:
        return ""
    manager = max(owners)[1]  # RFC 3339 times in UTC order as text
    if manager.startswith(OWN_MANAGER_PREFIXES + PERSON_MANAGER_PREFIXES):
        return ""
    return manager


def format_deletion_cost(cost: int) -> str:
    """The canonical annotation text for `cost`; refuses anything outside int32."""
    if isinstance(cost, bool) or not isinstance(cost, int):
        raise TypeError(f"deletion cost must be an int, got {type(cost).__name__}")
    if cost < INT32_MIN or cost > INT32_MAX:
        raise ValueError(f"deletion cost {cost} is outside the int32 range")
    return str(cost)


def _valid_first_digit(value: str) -> bool:
    if not value:
        return False
    first = value[0]
    return first == "-" or value == "0" or "1" <= first <= "9"


_GO_ESCAPES = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r",
               "\t": "\\t", "\v": "\\v"}


def go_quote(value: str) -> str:
    """Approximate Go's %q so messages read like the API server's."""
    out = []
    for char in value:
        if char in _GO_ESCAPES:
            out.append(_GO_ESCAPES[char])
        elif char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}" if ord(char) > 0x7F else f"\\x{ord(char):02x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'
