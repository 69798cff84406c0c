"""Fake cgroup directories, as a container sees its own (cgroup v2, or v1's memory
controller), for the memory check's tests: point POOLGUARD_CGROUP_ROOT at one."""

from __future__ import annotations

from pathlib import Path

V1_UNLIMITED = "9223372036854771712"


def cgroup_v2(root: Path, limit: str, current: int, inactive_file: int = 0) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "memory.max").write_text(limit + "\n")
    (root / "memory.current").write_text(f"{current}\n")
    (root / "memory.stat").write_text(f"anon {current}\nfile 0\nactive_file 0\n"
                                      f"inactive_file {inactive_file}\n")
    return root


def cgroup_v1(root: Path, limit: str, usage: int, total_inactive_file: int = 0) -> Path:
    memory = root / "memory"
    memory.mkdir(parents=True)
    (memory / "memory.limit_in_bytes").write_text(limit + "\n")
    (memory / "memory.usage_in_bytes").write_text(f"{usage}\n")
    # v1 has both the group's own and the hierarchy's total: the total counts
    (memory / "memory.stat").write_text(f"inactive_file 1\ntotal_inactive_file "
                                        f"{total_inactive_file}\n")
    return root
