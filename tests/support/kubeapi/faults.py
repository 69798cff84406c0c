"""Faults a test injects into the fake API server: an error status or a delay, for a
while or a number of requests, optionally only for one method or path."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Fault:
    """One injected fault: `status` None only delays."""

    status: int | None
    delay: float
    until: float | None
    remaining: int | None
    match: Callable[[str, str], bool]

    def active(self, now: float) -> bool:
        """Still in force: neither expired nor used up."""
        return ((self.until is None or now < self.until)
                and (self.remaining is None or self.remaining > 0))

