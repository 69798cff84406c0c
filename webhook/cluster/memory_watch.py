"""The memory check at startup and every half minute: the cgroup read, judged, reported.

Each check reads the container's cgroup (cgroup.py), counts the pods the cache holds and
judges them by the sizing table (memory_budget.py); the caller reports the result
(metrics, /readyz). A warning is logged when it appears, changes or clears, not at every
check.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .cgroup import ContainerMemory, read_container_memory
from .memory_budget import Footprint, MemoryCheck, check_memory

log = logging.getLogger("poolguard")

MEMORY_CHECK_SECONDS = 30.0


class MemoryWatch:
    """Checks the container's memory against what `caches` caches of the pods need."""

    def __init__(self, footprint: Footprint, count_pods: Callable[[], int], caches: int = 1,
                 on_check: Callable[[MemoryCheck], None] = lambda _: None,
                 read: Callable[[], ContainerMemory] = read_container_memory) -> None:
        self.footprint = footprint
        self.count_pods = count_pods
        self.caches = caches
        self.on_check = on_check
        self.read = read
        self.latest: MemoryCheck | None = None

    def check(self) -> MemoryCheck:
        """Read, judge and report once; logs what changed since the last check."""
        memory = self.read()
        result = check_memory(self.footprint, memory.limit, memory.used, self.count_pods(),
                              self.caches)
        if self.latest is None:
            self._log_start(memory)
        if result.warning and (self.latest is None or self.latest.warning != result.warning):
            log.warning("memory: %s", result.warning)
        elif not result.warning and self.latest is not None and self.latest.warning:
            log.info("memory: the limit holds the cache again (%s)", _figures(result))
        self.latest = result
        self.on_check(result)
        return result

    def start(self, period: float = MEMORY_CHECK_SECONDS,
              stop: threading.Event | None = None) -> None:
        """Check now, then every `period` seconds in a daemon thread until `stop` is set."""
        self.check()
        stopped = stop or threading.Event()

        def loop() -> None:
            while not stopped.wait(period):
                try:
                    self.check()
                except Exception:  # a check must never end the loop that reports it
                    log.exception("memory: the check failed")

        threading.Thread(target=loop, daemon=True, name="memory-check").start()

    def _log_start(self, memory: ContainerMemory) -> None:
        if memory.limit is None:
            log.info("memory: no container memory limit (%s); the cache grows with the "
                     "cluster unchecked (docs/performance.md#sizing)", memory.source)
            return
        log.info("memory: container limit %d MiB (%s): room for about %s pods with %d "
                 "cache(s) (docs/performance.md#sizing)", memory.limit // 2**20, memory.source,
                 f"{self.footprint.pods_within(memory.limit, self.caches):,}", self.caches)


def _figures(result: MemoryCheck) -> str:
    used = "unknown" if result.used is None else f"{result.used // 2**20} MiB"
    limit = "none" if result.limit is None else f"{result.limit // 2**20} MiB"
    return (f"{result.pods:,} pods need about {result.projected // 2**20} MiB, "
            f"working set {used}, limit {limit}")
