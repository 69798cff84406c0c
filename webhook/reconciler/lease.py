"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's rules.

- The holder renews `spec.renewTime` every `retry_period`; it stops acting as leader
  when it has not renewed for `renew_deadline` (shorter than the lease duration).
- Another candidate takes over only after it has seen the same lease record, unchanged,
  for `leaseDurationSeconds` of its own clock (no trust in other machines' clocks).
- Every write is an update with the lease's resourceVersion (409 Conflict: someone
  else wrote first, we lost this round).
- release() clears `holderIdentity` so a successor need not wait for expiry.

The one-shot passes hold the Lease for their duration (`holding_lease`); the service
runs `LeaderElector.run` in a thread of its own.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..cluster.kubeclient import describe_error, request_json
from ..errors import ConflictError, LeaseHeldError, NotFoundError
from .options import Options

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("poolguard.leader")


def micro_time() -> str:
    """Now as a Kubernetes MicroTime (RFC 3339 with microseconds)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate for the Lease `namespace/name`."""

    def __init__(self, api: client.ApiClient, namespace: str, name: str, identity: str, *,
                 lease_duration: int = 15, renew_deadline: float = 10.0,
                 retry_period: float = 2.0,
                 on_change: Callable[[bool], None] | None = None) -> None:
        if not 0 < retry_period < renew_deadline < lease_duration:
            raise ValueError("need 0 < retry period < renew deadline < lease duration, got "
                             f"{retry_period}, {renew_deadline}, {lease_duration}")
        self.api, self.namespace, self.name, self.identity = api, namespace, name, identity
        self.lease_duration, self.renew_deadline = int(lease_duration), renew_deadline
        self.retry_period = retry_period
        self.on_change = on_change
        self.holder: str | None = None  # the holder last observed
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._leading = False
        self._last_renew = -float("inf")
        self._round_started = time.monotonic()

    @property
    def path(self) -> str:
        return f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases"

    def is_leader(self) -> bool:
        """True while we hold the lease and renewed it within the renew deadline."""
        return self._leading and time.monotonic() - self._last_renew < self.renew_deadline

    def try_acquire_or_renew(self) -> bool:
        """One round: create, renew or take over the lease. True if we now hold it."""
        # A renewal counts from before we asked: if the answer is slow, the others may
        # already count the lease's duration from an earlier renewTime.
        self._round_started = time.monotonic()
        try:
            lease = request_json(self.api, "GET", f"{self.path}/{self.name}")
        except NotFoundError:
            return self._create()
        spec = self._observe(lease)
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity:
            if self._leading:  # someone else holds it now: stop writing at once
                log.warning("lease %s/%s: now held by %s; stepping down", self.namespace,
                            self.name, holder)
                self._set_leading(False)
            if not self._expired(spec):
                return False
        wanted = dict(spec, holderIdentity=self.identity, renewTime=micro_time(),
                      leaseDurationSeconds=self.lease_duration)
        if holder != self.identity:
            wanted["acquireTime"] = wanted["renewTime"]
            wanted["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        return self._update(lease, wanted)

    def acquire(self, timeout: float, stop: threading.Event | None = None) -> bool:
        """Try until we hold the lease or `timeout` seconds pass."""
        stop = stop or threading.Event()
        deadline = time.monotonic() + timeout
        while not stop.is_set():
            if self.step():
                return True
            if time.monotonic() + self.retry_period > deadline:
                return False
            stop.wait(self.retry_period)
        return False

    def run(self, stop: threading.Event, first_wait: float = 0.0) -> None:
        """Acquire, then keep renewing every retry period, until `stop` is set."""
        if stop.wait(first_wait):
            return
        while not stop.is_set():
            self.step()
            stop.wait(self.retry_period)

    def step(self) -> bool:
        """One acquire-or-renew round that never raises; True if we hold the lease.

        Leadership lapses when renewals keep failing past the renew deadline.
        """
        try:
            ok = self.try_acquire_or_renew()
        except Exception as err:  # API down: keep trying, leadership lapses by deadline
            log.warning("lease %s/%s: %s", self.namespace, self.name, describe_error(err))
            ok = False
        if not ok and self._leading and not self.is_leader():
            log.warning("lease %s/%s: not renewed for %.1fs; stepping down", self.namespace,
                        self.name, self.renew_deadline)
            self._set_leading(False)
        return ok

    def release(self) -> bool:
        """Give the lease up (clear holderIdentity) if we hold it. True if released."""
        was_leading = self._leading
        self._set_leading(False)
        if not was_leading:
            return False
        try:
            lease = request_json(self.api, "GET", f"{self.path}/{self.name}")
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return False
            now = micro_time()
            return self._update(lease, dict(spec, holderIdentity="", leaseDurationSeconds=1,
                                            renewTime=now, acquireTime=now), releasing=True)
        except Exception as err:  # best effort: the lease expires anyway
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name,
                        describe_error(err))
            return False

    # ----- internals -------------------------------------------------------------------

    def _create(self) -> bool:
        now = micro_time()
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": {"holderIdentity": self.identity, "leaseDurationSeconds":
                         self.lease_duration, "acquireTime": now, "renewTime": now,
                         "leaseTransitions": 0}}
        try:
            lease = request_json(self.api, "POST", self.path, body=body)
        except ConflictError:  # someone created it first
            return False
        self._won(lease)
        return True

    def _update(self, lease: Mapping[str, Any], spec: dict[str, Any],
                releasing: bool = False) -> bool:
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": dict(lease.get("metadata") or {}), "spec": spec}
        try:
            updated = request_json(self.api, "PUT", f"{self.path}/{self.name}", body=body)
        except ConflictError:  # the lease changed since we read it
            return False
        if releasing:
            self._observe(updated)
        else:
            self._won(updated)
        return True

    def _won(self, lease: Mapping[str, Any]) -> None:
        self._observe(lease)
        self._last_renew = self._round_started
        self._set_leading(True)

    def _observe(self, lease: Mapping[str, Any]) -> dict[str, Any]:
        spec = dict(lease.get("spec") or {})
        record = tuple(sorted((k, str(v)) for k, v in spec.items()))
        if record != self._observed:
            self._observed, self._observed_at = record, time.monotonic()
        self.holder = spec.get("holderIdentity") or None
        return spec

    def _expired(self, spec: Mapping[str, Any]) -> bool:
        duration = int(spec.get("leaseDurationSeconds") or self.lease_duration)
        return time.monotonic() > self._observed_at + duration

    def _set_leading(self, leading: bool) -> None:
        if leading == self._leading:
            return
        self._leading = leading
        log.info("lease %s/%s: %s", self.namespace, self.name,
                 "became leader" if leading else "no longer leader")
        if self.on_change is not None:
            try:
                self.on_change(leading)
            except Exception:
                log.exception("leadership callback failed")


def make_elector(api: client.ApiClient, options: Options,
                 on_change: Callable[[bool], None] | None = None) -> LeaderElector:
    """The Lease candidate for `options` (namespace, name, identity, timings)."""
    return LeaderElector(api, options.lease_namespace, options.lease_name, options.identity,
                         lease_duration=options.lease_duration,
                         renew_deadline=options.renew_deadline,
                         retry_period=options.retry_period, on_change=on_change)


def always_leading() -> bool:
    """The may-write check where no Lease is taken (a dry run writes nothing anyway)."""
    return True


@contextlib.contextmanager
def holding_lease(elector: LeaderElector | None,
                  stop: threading.Event) -> Iterator[Callable[[], bool]]:
    """Acquire the Lease (LeaseHeldError if another holder keeps it), renew it in the
    background, release it at the end; yields the may-write check."""
    if elector is None:
        yield always_leading
        return
    # The first round raises on connection errors; later ones wait out a stale holder.
    if not elector.try_acquire_or_renew():
        wait = elector.lease_duration + 2 * elector.retry_period
        if not elector.acquire(wait, stop):
            raise LeaseHeldError(
                f"lease {elector.namespace}/{elector.name} is held by {elector.holder}: "
                "another reconciler is running (stop it, or let it do the work)")
    renew_stop = threading.Event()
    renewer = threading.Thread(target=elector.run, args=(renew_stop, elector.retry_period),
                               daemon=True, name="lease-renew")
    renewer.start()
    try:
        yield elector.is_leader
    finally:
        renew_stop.set()
        renewer.join(timeout=elector.retry_period + 35)
        elector.release()
