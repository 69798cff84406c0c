"""A pod's facts, read once from its dict, and the integer sort key the ranking uses.

The ReplicaSet comparator (see `active_pods_with_ranks`) reads a dozen fields of every
pod. Reading them from the nested API dict at every sync of every prediction would
dominate the time of a large scale check, so they are read once per pod object into a
`PodFacts` (the snapshot and the live cache build these when an object arrives;
anything else gets them built on the fly), and the comparator's rules are encoded
into one integer per pod so that sorting compares machine-sized integers instead of
tuples.

Encoding (most significant first); every field has a fixed width so that integer
order is exactly the tuple order `active_pods_with_ranks` documents:

  rules 1-4   scheduled (1) | phase (2) | ready (1) | deletion cost + 2**31 (32)
  rule 5      2**32 - 1 - rank (32)
  rules 6-8   with a clock: ready-time present (1) | ready bucket + 1 (7) |
              class UID (UIDW) | ready time (72) | tail
              tail = restarts' (64) | sidecar restarts' (64) | created present (1) |
                     created bucket + 1 (7) | UID (UIDW)
              without a clock: ready-time present (1) | -ready time (72) |
              restarts' | sidecar restarts' | created present (1) | -created (72) | UID
              (not-ready pods leave the ready fields zero: a rules 1-5 group never mixes
              ready and not-ready pods)
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .deletion_cost import (
    DELETION_COST_ANNOTATION,
    MANAGED_COST_ANNOTATION,
    cost_writer,
    parse_deletion_cost,
)
from .kube import parse_time_ns
from .ownership import controller_in

PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}
UID_BYTES = 40  # UIDs up to this length encode directly; longer ones by their order (below)
UIDW = 8 * UID_BYTES + 8
_TIME_OFFSET = 1 << 71  # times are offset into 72 unsigned bits (any year 1-9999)
_COUNT_TOP = (1 << 63) - 1  # restarts r -> _COUNT_TOP - r, clamped into 64 bits
_TAILW = 64 + 64 + 8 + UIDW
COUNT_TOP = _COUNT_TOP  # restart counts beyond +-COUNT_TOP share a key field value
CLOCK_WITHIN_BITS = 8 + UIDW + 72 + _TAILW
NO_CLOCK_WITHIN_BITS = 1 + 72 + 128 + 1 + 72 + UIDW
_CLASS_SHIFT = 72 + _TAILW
READY_HEAD_SHIFT = _CLASS_SHIFT + UIDW  # a clock key's ready present bit and bucket + 1
_RANK_MAX = (1 << 32) - 1
_NEVER = 1 << 80  # a clock beyond any time: "valid for every now"
_LN2_INVERSE = 1 / math.log(2)


class PodFacts:
    """What the ranking, the policy and the handlers read from one pod, read once.

    `pod` is the object the facts came from (a full API dict, or the compact dict the
    live cache keeps). Instances are shared between requests and never change, except
    for the memo of the clock-dependent sort key (`memo`), which is
    replaced whole, so concurrent readers see either the old or the new value.
    """

    __slots__ = (
        "_no_clock_base",
        "_tail_parts",
        "active",
        "controller",
        "cost_by_hand",
        "cost_writer",
        "created_ns",
        "deleting",
        "deletion_cost",
        "invalid_cost",
        "labels",
        "memo",
        "name",
        "namespace",
        "node_name",
        "phase_ordinal",
        "pod",
        "ready",
        "ready_time_ns",
        "restarts",
        "rules_1_to_4",
        "sidecar_restarts",
        "uid",
        "uid_key",
    )

    def __init__(self, pod: Mapping[str, Any], keep: Mapping[str, Any] | None = None) -> None:
        """Read the facts of `pod`; `keep` is the object to remember instead (a compact
        copy with the same metadata), so `pod` itself can be dropped."""
        metadata = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        annotations = metadata.get("annotations") or {}
        condition = _ready_condition(status)
        self.pod = pod if keep is None else keep
        # Names and labels from the kept copy: its strings are shared (interned).
        names = metadata if keep is None else (keep.get("metadata") or {})
        self.name: str = names.get("name") or ""
        self.namespace: str = names.get("namespace") or ""
        self.uid: bytes = (metadata.get("uid") or "").encode()
        self.uid_key = _uid_key(self.uid)
        self.node_name: str = spec.get("nodeName") or ""
        phase = status.get("phase") or ""
        self.phase_ordinal = PHASE_ORDINAL.get(phase, 0)
        self.ready = condition is not None and condition.get("status") == "True"
        self.deleting = bool(metadata.get("deletionTimestamp"))
        self.active = phase not in ("Succeeded", "Failed") and not self.deleting
        # The cost the controller uses, and the raw value when the API server would
        # reject it (the prediction names such pods); parsed once here.
        self.deletion_cost, self.invalid_cost = _cost(annotations.get(DELETION_COST_ANNOTATION))
        self.cost_by_hand = (DELETION_COST_ANNOTATION in annotations and
                             annotations.get(MANAGED_COST_ANNOTATION)
                             != annotations[DELETION_COST_ANNOTATION])
        # Another controller that owns the cost (Karpenter, OpenKruise...): read here, where
        # the full object still has managedFields (the live cache's copy drops them).
        self.cost_writer = cost_writer(metadata) if self.cost_by_hand else ""
        self.ready_time_ns = (parse_time_ns(condition.get("lastTransitionTime"))
                              if self.ready else None)
        self.restarts, self.sidecar_restarts = _max_restarts(spec, status)
        self.created_ns = parse_time_ns(metadata.get("creationTimestamp"))
        self.labels: Mapping[str, str] = names.get("labels") or {}
        self.controller = controller_in(metadata)
        scheduled = 1 if self.node_name else 0
        self.rules_1_to_4 = (((scheduled << 2 | self.phase_ordinal) << 1 | self.ready) << 32
                             | (self.deletion_cost + (1 << 31)))
        self._tail_parts = ((_count(self.restarts) << 64 | _count(self.sidecar_restarts)) << 1
                            | (self.created_ns is not None))
        self._no_clock_base: int | None = None
        # (low, high, base key, comparator fields...): base_key for any clock in
        # [low, high) and `comparator_fields` there; replaced whole.
        self.memo: tuple[int, int, int, tuple[int, bytes], tuple[int, int, int]] | None = None

    @property
    def ref(self) -> tuple[str, str]:
        """(namespace, name): how the controller tells pods apart."""
        return (self.namespace, self.name)

    # ----- the sort key --------------------------------------------------------------

    def base_key(self, now_ns: int | None, uid_key: int | None = None) -> int:
        """The sort key with the rank field zero: rules 1-4 and 6-8 against `now_ns`.

        `uid_key` stands for the UID when given (UIDs too long to encode). The result
        is remembered for as long as the clock leaves the log2 buckets unchanged.
        """
        if now_ns is None:
            if uid_key is not None:
                return self.rules_1_to_4 << (32 + NO_CLOCK_WITHIN_BITS) | self._no_clock(uid_key)
            base = self._no_clock_base
            if base is None:
                base = self._no_clock_base = (self.rules_1_to_4 << (32 + NO_CLOCK_WITHIN_BITS)
                                              | self._no_clock(self.uid_key))
            return base
        if uid_key is None:
            memo = self.memo
            if memo is not None and memo[0] <= now_ns < memo[1]:
                return memo[2]
            low, high, within, ready_head, created_head = self._clock(now_ns, self.uid_key)
            base = self.rules_1_to_4 << (32 + CLOCK_WITHIN_BITS) | within
            self.memo = (low, high, base, (ready_head, self.uid),
                         (-self.restarts, -self.sidecar_restarts, created_head))
            return base
        return self.rules_1_to_4 << (32 + CLOCK_WITHIN_BITS) | self._clock(now_ns, uid_key)[2]

    def comparator_fields(self, now_ns: int) -> tuple[tuple[int, bytes], tuple[int, int, int]]:
        """What the comparator's rules 6-8 read against `now_ns` (see `sort_keys.Less`):
        (ready head, UID) and (-restarts, -sidecar restarts, creation head), where a head
        is the time's present bit and bucket + 1 (the ready head is 0 when not ready).
        Remembered with the key (`memo`)."""
        memo = self.memo
        if memo is None or not memo[0] <= now_ns < memo[1]:
            self.base_key(now_ns)
            memo = self.memo
            assert memo is not None
        return memo[3], memo[4]

    def with_class_uid(self, within: int, class_uid_key: int) -> int:
        """`within` with the class UID field (ready pods, clock) set to `class_uid_key`."""
        own = (within >> _CLASS_SHIFT) & ((1 << UIDW) - 1)
        return within + ((class_uid_key - own) << _CLASS_SHIFT)

    def _no_clock(self, uid_key: int) -> int:
        created = _TIME_OFFSET - (self.created_ns or 0)
        tail = ((self._tail_parts << 72 | created) << UIDW) | uid_key
        if not self.ready:
            return tail
        ready = _TIME_OFFSET - (self.ready_time_ns or 0)
        return (((self.ready_time_ns is not None) << 72 | ready) << (NO_CLOCK_WITHIN_BITS - 73)
                | tail)

    def _clock(self, now_ns: int, uid_key: int) -> tuple[int, int, int, int, int]:
        """(low, high, within, ready head, creation head): the key below rules 1-5 and the
        heads in it (a time's present bit and bucket + 1), valid for clocks in [low, high)."""
        created_bucket, low, high = bucket_window(self.created_ns, now_ns)
        created_head = (self.created_ns is not None) << 7 | (created_bucket + 1)
        tail = ((self._tail_parts << 7 | (created_bucket + 1)) << UIDW) | uid_key
        if not self.ready:
            return low, high, tail, 0, created_head
        ready_bucket, ready_low, ready_high = bucket_window(self.ready_time_ns, now_ns)
        head = (self.ready_time_ns is not None) << 7 | (ready_bucket + 1)
        ready = (self.ready_time_ns or 0) + _TIME_OFFSET
        within = (((head << UIDW | uid_key) << 72 | ready) << _TAILW) | tail
        return max(low, ready_low), min(high, ready_high), within, head, created_head


def rank_field(rank: int) -> int:
    """Rule 5 (more related pods first) as the 32-bit field below rules 1-4."""
    return _RANK_MAX - min(max(rank, 0), _RANK_MAX)


def bucket_window(time_ns: int | None, now_ns: int) -> tuple[int, int, int]:
    """(int(log2(now - t)) as Go computes it, low, high): the bucket holds for now in [low, high).

    -1 when `time_ns` is zero or not in the past. The bucket is the bit length of the
    age minus one, except just below a power of two, where Go's float log2 rounds up:
    there the float is computed and the window is this instant alone.
    """
    if time_ns is None:
        return -1, -_NEVER, _NEVER
    age = now_ns - time_ns
    if age <= 0:
        return -1, -_NEVER, time_ns + 1
    bucket = age.bit_length() - 1
    top = 1 << (bucket + 1)
    if bucket >= 44:
        top -= 1 << (bucket - 43)
        if age >= top:
            return int(go_log2(float(age))), now_ns, now_ns + 1
    return bucket, time_ns + (1 << bucket), time_ns + top


def uid_order_keys(uids: list[bytes]) -> dict[bytes, int]:
    """Order-preserving small keys for UIDs too long to encode directly."""
    return {uid: index for index, uid in enumerate(sorted(set(uids)))}


def _uid_key(uid: bytes) -> int:
    """An integer whose order is the bytes order of UIDs up to UID_BYTES long; -1 beyond."""
    if len(uid) > UID_BYTES:
        return -1
    return int.from_bytes(uid.ljust(UID_BYTES, b"\0"), "big") << 8 | len(uid)


def _count(value: int) -> int:
    """A restart count as a 64-bit field, more restarts smaller (clamped to int64)."""
    return _COUNT_TOP - min(max(value, -_COUNT_TOP), _COUNT_TOP)


def go_log2(value: float) -> float:
    """math.Log2 as Go computes it (exact for powers of two, frexp otherwise)."""
    fraction, exponent = math.frexp(value)
    if fraction == 0.5:
        return float(exponent - 1)
    return math.log(fraction) * _LN2_INVERSE + exponent


def _cost(raw: object) -> tuple[int, str | None]:
    """(deletion cost as the controller counts it, the raw text if it is invalid)."""
    if raw is None:
        return 0, None
    parsed = parse_deletion_cost(raw if isinstance(raw, str) else str(raw))
    if parsed is None:
        return 0, str(raw)
    # deletion_cost_of: a value that is not a string counts as 0 even when its text parses.
    return (parsed if isinstance(raw, str) else 0), None


def _ready_condition(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or ():
        if condition.get("type") == "Ready":
            return condition
    return None


def _max_restarts(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[int, int]:
    """(regular, sidecar) maximum restart counts, as controller.maxContainerRestarts."""
    regular = 0
    for container in status.get("containerStatuses") or ():
        regular = max(regular, int(container.get("restartCount") or 0))
    init_statuses = status.get("initContainerStatuses")
    if not init_statuses:
        return regular, 0
    sidecar_names = {c.get("name") for c in spec.get("initContainers") or ()
                     if c.get("restartPolicy") == "Always"}
    sidecar = 0
    for container in init_statuses:
        if container.get("name") in sidecar_names:
            sidecar = max(sidecar, int(container.get("restartCount") or 0))
    return regular, sidecar
