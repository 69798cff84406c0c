"""What a cluster view can report about itself, beyond the reads the core makes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from ..core.view.cluster import ClusterView


@runtime_checkable
class WatchedView(ClusterView, Protocol):
    """A view fed by watches (LiveCluster): it may lag or be unsynced, and says so.

    A state-file Snapshot is not one: it is complete and never changes.
    """

    @property
    def synced(self) -> bool:
        """Every watched resource has been listed at least once."""
        ...

    def staleness_seconds(self) -> float:
        """Seconds since the quietest watch was last heard from."""
        ...

    def sync_status(self) -> dict[str, Any]:
        """Per-resource sync details for /readyz."""
        ...

    def pod_count(self) -> int:
        """The pods cached, or the pods the first list will bring while it comes in."""
        ...

    def fetch_pod(self, namespace: str, name: str,
                  timeout: float = 1.0) -> Mapping[str, Any] | None:
        """The pod read from the API server past the cache (one bounded request), or
        None if the server has no such pod; raises when the read fails."""
        ...
