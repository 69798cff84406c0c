"""The container's own memory limit and working set, read from its cgroup.

In a container the cgroup filesystem mounted at /sys/fs/cgroup is the container's own
(a private cgroup namespace under cgroup v2; the container's directory bind-mounted
under v1). cgroup v2: `memory.max` ("max" when unlimited), `memory.current` and
`memory.stat`'s `inactive_file`. cgroup v1, when there is no `memory.max`:
`memory/memory.limit_in_bytes` (a huge number when unlimited), `memory.usage_in_bytes`
and `total_inactive_file`. The working set is usage less inactive file pages, as the
kubelet computes it for evictions and `kubectl top`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
# Where to read the cgroup instead (tests, or a cgroup mounted elsewhere).
CGROUP_ROOT_ENV = "POOLGUARD_CGROUP_ROOT"
# cgroup v1 reports "no limit" as the largest page-aligned counter (about 2^63).
UNLIMITED_FROM = 2**62


@dataclass(frozen=True)
class ContainerMemory:
    """The container's memory limit and working set in bytes (None: none, or unreadable),
    and the files they came from."""

    limit: int | None
    used: int | None
    source: str


def cgroup_root() -> Path:
    """The cgroup filesystem's mount point: $POOLGUARD_CGROUP_ROOT, else /sys/fs/cgroup."""
    return Path(os.environ.get(CGROUP_ROOT_ENV) or CGROUP_ROOT)


def read_container_memory(root: Path | None = None) -> ContainerMemory:
    """The container's memory figures from cgroup v2, else v1; never raises."""
    root = root or cgroup_root()
    if (root / "memory.max").is_file():
        return _read(root, "memory.max", "memory.current", "inactive_file", "cgroup v2")
    v1 = root / "memory"
    if (v1 / "memory.limit_in_bytes").is_file():
        return _read(v1, "memory.limit_in_bytes", "memory.usage_in_bytes",
                     "total_inactive_file", "cgroup v1")
    return ContainerMemory(limit=None, used=None, source=f"no memory cgroup under {root}")


def _read(directory: Path, limit_file: str, usage_file: str, inactive_key: str,
          version: str) -> ContainerMemory:
    limit = _number(directory / limit_file)
    if limit is not None and limit >= UNLIMITED_FROM:
        limit = None
    usage = _number(directory / usage_file)
    inactive = _stat(directory / "memory.stat", inactive_key) or 0
    used = None if usage is None else max(usage - inactive, 0)
    return ContainerMemory(limit=limit, used=used, source=f"{version} {directory / limit_file}")


def _number(path: Path) -> int | None:
    """The file's integer; None for "max", a missing or unreadable file or other text."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _stat(path: Path, key: str) -> int | None:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None
