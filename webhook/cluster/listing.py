"""LIST requests: in pages for the cache's reflectors (as client-go's tools/pager pages),
whole for a one-off snapshot of the cluster (`plan`, the reconciler's passes).

Objects are returned exactly as the API returns them, with `kind` and `apiVersion`
filled in for list items.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..core.kinds.registry import RESOURCES
from ..core.view.resource import Resource
from .kubeclient import LIST_TIMEOUT, ApiError, request_json
from .state import ListedSnapshot

if TYPE_CHECKING:
    from kubernetes import client

# Objects per LIST page. Not client-go's 500: on kube-apiserver 1.37 with 10,000 pods of
# 8.5 KB the sync took the same 4.5-7 s at 100, 250, 500 or 1,000 per page (the time is
# ours, decoding and compacting), while the resident memory left after the sync grew with
# the page (34, 46, 72, 122 MB): a page's decoded objects pin heap arenas among the kept
# records. docs/performance.md, "Live cache", has the measurement.
LIST_PAGE = 100

Obj = Mapping[str, Any]

# Every resource the kind registry names, in the order a saved state lists them.
SNAPSHOT_RESOURCES = RESOURCES


def not_served(resource: Resource, err: BaseException) -> bool:
    """An optional resource's 404 (its CRD is not installed) or 403 (not granted to us)."""
    return (resource.optional and isinstance(err, ApiError)
            and getattr(err, "status", None) in (403, 404))


def resource_version_of(obj: Obj) -> str:
    """The object's metadata.resourceVersion, or ""."""
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def typed(resource: Resource, item: Obj) -> Obj:
    """The item with `apiVersion` and `kind` set (list responses leave them out)."""
    if item.get("kind") and item.get("apiVersion"):
        return item
    return {"apiVersion": resource.api_version, "kind": resource.kind,
            **{k: v for k, v in item.items() if k not in ("apiVersion", "kind")}}


class PagedList:
    """A LIST in pages of LIST_PAGE objects (`limit` and `continue`), as client-go pages.

    `pages()` yields each page's objects (kind and apiVersion set) as it arrives;
    `resource_version` is the list's, once the last page is in. A paged list is a
    consistent read at one resourceVersion (served from the API server's watch cache
    since Kubernetes 1.31). A continue token can expire before the last page (410 Gone
    once the server compacted its history past the list's resourceVersion): the
    GoneError ends the relist, and the reflector lists again from the first page, never
    all at once (client-go's pager falls back to one unpaged list, which at 150,000 pods
    is 1.3 GB of JSON). The pages already applied are fresh; the objects the new list
    does not have are dropped at its end (LiveCluster.relist).
    """

    def __init__(self, api: client.ApiClient, resource: Resource) -> None:
        self.api, self.resource = api, resource
        self.resource_version = ""
        # Objects of the pages so far plus the last page's remainingItemCount (which the
        # API server may leave out): the list's size before its last page is in.
        self.listed = 0
        self.expected = 0

    def pages(self) -> Iterator[list[Obj]]:
        token = ""
        while True:
            query: dict[str, Any] = {"limit": LIST_PAGE}
            if token:
                query["continue"] = token
            body = request_json(self.api, "GET", self.resource.path, query=query,
                                timeout=LIST_TIMEOUT)
            metadata = body.get("metadata") or {}
            items = body.get("items") or []
            remaining = metadata.get("remainingItemCount")
            self.listed += len(items)
            self.expected = self.listed + (remaining if isinstance(remaining, int) else 0)
            yield [typed(self.resource, item) for item in items]
            token = str(metadata.get("continue") or "")
            if not token:
                self.resource_version = str(metadata.get("resourceVersion") or "")
                return


def list_objects(api: client.ApiClient, resource: Resource) -> tuple[list[Obj], str]:
    """Every object of `resource` (with kind and apiVersion) and the list's resourceVersion.

    Like client-go's reflector, resourceVersion=0 lets the API server answer from its
    watch cache instead of a full read from etcd; a large cluster's list gets a longer
    read timeout than ordinary requests.
    """
    body = request_json(api, "GET", resource.path, query={"resourceVersion": "0"},
                        timeout=LIST_TIMEOUT)
    items = [typed(resource, item) for item in body.get("items") or []]
    return items, str((body.get("metadata") or {}).get("resourceVersion") or "")


def read_snapshot(api: client.ApiClient,
                  resources: Iterable[Resource] = SNAPSHOT_RESOURCES) -> ListedSnapshot:
    """List every resource once: a Snapshot of the live cluster (for `plan`).

    A custom resource the API server does not serve (its CRD not installed, or not
    readable with these credentials) is left out, as a cluster without any.
    """
    snapshot = ListedSnapshot()
    for resource in resources:
        try:
            items, _ = list_objects(api, resource)
        except ApiError as err:
            if not not_served(resource, err):
                raise
            continue  # a custom resource whose CRD is not installed: the cluster has none
        for item in items:
            snapshot.add(item)
    return snapshot
