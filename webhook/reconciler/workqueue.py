"""A deduplicating work queue and a token-bucket rate limiter (client-go's shapes)."""

from __future__ import annotations

import heapq
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable


class WorkQueue:
    """Keys to process, each at most once in the queue and by one worker at a time.

    A key added while queued is not queued twice; a key added while being processed
    is queued again when the worker calls done(key).
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._cond = threading.Condition()
        self._queue: deque[Hashable] = deque()
        self._dirty: set[Hashable] = set()
        self._processing: set[Hashable] = set()
        self._later: list[tuple[float, int, Hashable]] = []
        self._sequence = 0

    def __len__(self) -> int:
        with self._cond:
            return len(self._queue)

    def add(self, key: Hashable) -> None:
        """Queue `key` unless it is already waiting."""
        with self._cond:
            if key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        """Queue `key` after `delay` seconds (retries with backoff)."""
        with self._cond:
            self._sequence += 1
            heapq.heappush(self._later, (self._clock() + delay, self._sequence, key))
            self._cond.notify()

    def get(self, timeout: float) -> Hashable | None:
        """The next key (now being processed), or None after `timeout` seconds."""
        deadline = self._clock() + timeout
        with self._cond:
            while True:
                self._promote_due()
                if self._queue:
                    key = self._queue.popleft()
                    self._dirty.discard(key)
                    self._processing.add(key)
                    return key
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return None
                if self._later:
                    remaining = min(remaining, max(self._later[0][0] - self._clock(), 0.0))
                self._cond.wait(remaining)

    def done(self, key: Hashable) -> None:
        """Mark `key` processed; re-queue it if it was added meanwhile."""
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    def _promote_due(self) -> None:
        now = self._clock()
        while self._later and self._later[0][0] <= now:
            _, _, key = heapq.heappop(self._later)
            if key not in self._dirty:
                self._dirty.add(key)
                if key not in self._processing:
                    self._queue.append(key)


class TokenBucket:
    """`qps` tokens a second, up to `burst` saved; one token per write."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic
                 ) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be positive, got {qps}")
        self.qps = qps
        self.burst = max(int(burst), 1)
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._updated = clock()

    def try_acquire(self) -> bool:
        """Take a token if one is available now."""
        with self._lock:
            self._refill()
            if self._tokens >= 1:
                self._tokens -= 1
                return True
            return False

    def acquire(self, stop: threading.Event | None = None) -> bool:
        """Wait for a token; False if `stop` is set first."""
        while True:
            with self._lock:
                self._refill()
                if self._tokens >= 1:
                    self._tokens -= 1
                    return True
                wait = (1 - self._tokens) / self.qps
            if stop is None:
                time.sleep(wait)
            elif stop.wait(wait):
                return False

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._updated) * self.qps)
        self._updated = now
