"""The live ClusterView: an in-memory cache of the cluster, fed by watches.

One thread per resource (a "reflector", as client-go calls it) lists the resource,
then watches it from the list's resourceVersion with bookmarks; a `410 Gone` (the
resourceVersion fell out of the server's history) makes it list again, and any other
error or a lost connection makes it wait (exponential backoff) and resume the watch
from the last resourceVersion it saw. Reads are served from memory under a lock and
never touch the network.

Why raw list+watch rather than `kubernetes.watch.Watch`: Watch deserializes every
event into generated model classes (which drop fields they do not know, and cost
time on large pods), retries a 410 once by itself instead of letting us relist, and
gives no handle on the open response, so a blocked read could not be interrupted on
stop(). We issue the same requests through the client's ApiClient (see
webhook.kubeclient) and decode JSON lines ourselves; objects are stored exactly as
the API returns them, with `kind` and `apiVersion` filled in for list items.

Size: the cache and the reflectors that fill it (through its private `_relist` and
`_apply`, under its lock) belong together; apart, each would reach into the other.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..core.kinds.registry import RESOURCE_OF_KIND, RESOURCES
from ..core.objects.kube import labels_of, name_of, namespace_of
from ..core.objects.podfacts import PodFacts
from ..core.view.cluster import IndexedClusterView
from ..core.view.label_index import LabelIndex
from ..core.view.pods_by_node import PodsByNode, T
from ..core.view.resource import PODS, Resource
from ..errors import GoneError, NotFoundError
from .compact import compact
from .kubeclient import (
    LIST_TIMEOUT,
    ApiError,
    describe_error,
    iter_json_lines,
    open_stream,
    request_json,
)
from .state import ListedSnapshot

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("poolguard.live")

# Objects per LIST page. Not client-go's 500: on kube-apiserver 1.37 with 10,000 pods of
# 8.5 KB the sync took the same 4.5-7 s at 100, 250, 500 or 1,000 per page (the time is
# ours, decoding and compacting), while the resident memory left after the sync grew with
# the page (34, 46, 72, 122 MB): a page's decoded objects pin heap arenas among the kept
# records. docs/performance.md, "Live cache", has the measurement.
LIST_PAGE = 100
FREEZE_EVERY = 2_000  # watch events between two gc.freeze(): bounds what a collection walks

Obj = Mapping[str, Any]
# callback(resource name, event type, object, previous object or None); event types are
# ADDED, MODIFIED and DELETED, also for the differences a relist finds.
EventCallback = Callable[[str, str, Obj, Obj | None], None]


# Every resource the kind registry names, in the order a saved state lists them.
ALL_RESOURCES = SNAPSHOT_RESOURCES = RESOURCES
# How often a cache asks again for a custom resource the API server did not serve (its CRD
# not installed, or not readable). A list that answers 404 costs the API server next to
# nothing, and needs no permission beyond the list itself (watching
# customresourcedefinitions would need one): a CRD installed later is in the cache within
# this time.
ABSENT_RECHECK_SECONDS = 60.0


class LiveCluster(IndexedClusterView):
    """A ClusterView over watch-fed caches of `resources` (every kind poolguard reads by
    default).

    A custom resource (`Resource.optional`) the API server does not serve (404: its CRD
    is not installed; 403: the role does not grant it) is absent: synced and empty, never
    stale, logged once, asked for again every `absent_recheck` seconds.
    """

    def __init__(self, api: client.ApiClient, resources: Iterable[Resource] = ALL_RESOURCES,
                 *, watch_timeout: int = 300, backoff_initial: float = 0.5,
                 backoff_max: float = 30.0,
                 absent_recheck: float = ABSENT_RECHECK_SECONDS) -> None:
        self._api = api
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._callbacks: list[EventCallback] = []
        # resource -> namespace -> name -> compact object (PodFacts for pods)
        self._store: dict[str, dict[str, dict[str, Any]]] = {}
        # namespace -> the pods there by label: a scale check reads its workload's pods only
        self._pod_labels: dict[str, LabelIndex] = {}
        self._by_node = PodsByNode()  # node -> its pods: what the node ranks read
        self._events_since_freeze = 0
        self._frozen = False
        self._reflectors = {r.name: _Reflector(self, api, r, watch_timeout, backoff_initial,
                                               backoff_max, absent_recheck)
                            for r in resources}
        for name in self._reflectors:
            self._store[name] = {}

    # ----- lifecycle -------------------------------------------------------------------

    def start(self) -> LiveCluster:
        """Start one list+watch thread per resource; returns at once."""
        self._stop.clear()
        for reflector in self._reflectors.values():
            reflector.start(self._stop)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the threads, cutting open watches; waits up to `timeout` seconds."""
        self._stop.set()
        for reflector in self._reflectors.values():
            reflector.interrupt()
        deadline = time.monotonic() + timeout
        for reflector in self._reflectors.values():
            reflector.join(max(deadline - time.monotonic(), 0.0))

    def on_event(self, callback: EventCallback) -> None:
        """Call `callback(resource, type, obj, old)` after each change is in the cache.

        Callbacks run on the resource's watch thread: keep them short (enqueue work).
        """
        self._callbacks.append(callback)

    @property
    def synced(self) -> bool:
        """Every resource has been listed at least once."""
        return all(r.synced.is_set() for r in self._reflectors.values())

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        """Wait until every resource has been listed once; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for reflector in self._reflectors.values():
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not reflector.synced.wait(remaining):
                return False
        return True

    def staleness_seconds(self) -> float:
        """Seconds since the least recently heard-from resource last heard from the API
        (an event, a bookmark, an opened watch or a (re)list); inf before the first list.

        An absent custom resource has nothing to go stale and is not counted.
        """
        heard = [r.last_heard for r in self._reflectors.values() if r.absent is None]
        known = [h for h in heard if h is not None]
        if not known or len(known) < len(heard):
            return math.inf
        return max(time.monotonic() - min(known), 0.0)

    def sync_status(self) -> dict[str, Any]:
        """Per-resource sync details (JSON-ready) for /readyz and /healthz."""
        staleness = self.staleness_seconds()
        with self._lock:
            counts = {name: sum(len(v) for v in by_ns.values())
                      for name, by_ns in self._store.items()}
        return {
            "synced": self.synced,
            "stalenessSeconds": None if math.isinf(staleness) else round(staleness, 3),
            "resources": {name: r.status(counts[name]) for name, r in self._reflectors.items()},
        }

    # ----- ClusterView -----------------------------------------------------------------

    def pods(self, namespace: str) -> Sequence[Obj]:
        return [facts.pod for facts in self._list_in("pods", namespace)]

    def pod_facts(self, namespace: str) -> Sequence[PodFacts]:
        """The facts of the namespace's pods, read once per watch event."""
        return self._list_in("pods", namespace)

    def pod_facts_selected(self, namespace: str,
                           selectors: list[Mapping[str, Any] | None]) -> list[PodFacts] | None:
        """Pods that may match one of the workload `selectors`, from the label index
        (see core.cluster.candidate_pod_facts); None when a selector needs a scan."""
        with self._lock:
            index = self._pod_labels.get(namespace)
            return (index or LabelIndex()).selected(selectors)

    def all_pods(self) -> list[Obj]:
        """Every cached pod, in all namespaces."""
        return [facts.pod for facts in self._list_all("pods")]

    def pod_count(self) -> int:
        """The pods cached or, while the pod list is still coming in, the pods that list
        will bring (its pages' `remainingItemCount`): the memory check's count, known
        before the cache holds them all."""
        with self._lock:
            cached = sum(len(by_name) for by_name in self._store.get("pods", {}).values())
        reflector = self._reflectors.get("pods")
        listing = reflector.listing if reflector is not None else None
        return max(cached, listing.expected if listing is not None else 0)

    def all_pod_facts(self) -> list[PodFacts]:
        """The facts of every cached pod, in all namespaces."""
        return self._list_all("pods")

    def pod(self, namespace: str, name: str) -> Obj | None:
        """The cached pod, or None."""
        facts = self._get("pods", namespace, name)
        return facts.pod if facts is not None else None

    def fetch_pod(self, namespace: str, name: str, timeout: float = 1.0) -> Obj | None:
        """The pod as the API server has it now, read past the cache; None if it has none.

        One request, one attempt, over within about `timeout` seconds (urllib3 errors and
        ApiError otherwise). For a pod the watch has not delivered yet. It is a LIST
        narrowed to the name by a field selector, not a GET: the webhook's role grants
        list and watch only, and the API server answers it from the one key.
        """
        body = request_json(self._api, "GET",
                            f"/api/v1/namespaces/{quote(namespace, safe='')}/pods",
                            query={"fieldSelector": f"metadata.name={name}"},
                            timeout=(timeout, timeout), retry=False)
        items = [item for item in body.get("items") or [] if name_of(item) == name]
        return _typed(PODS, items[0]) if items else None

    def objects_of(self, kind: str, namespace: str) -> Sequence[Obj]:
        resource = RESOURCE_OF_KIND.get(kind)
        return self._list_in(resource, namespace) if resource else []

    def workloads(self) -> list[Obj]:
        """Every cached workload, of every kind."""
        return [obj for resource in RESOURCE_OF_KIND.values() for obj in self._list_all(resource)]

    def pods_on_node(self, name: str) -> list[Obj]:
        """The cached pods bound to node `name`."""
        with self._lock:
            return self._by_node.on(name)

    def read_node(self, name: str, key: object, compute: Callable[[list[Obj]], T]) -> T:
        """`compute(pods on node)`, remembered until a pod there changes or `key` does."""
        with self._lock:
            return self._by_node.remembered(name, key, compute)

    def node(self, name: str) -> Obj | None:
        return self._get("nodes", "", name)

    def nodes(self) -> list[Obj]:
        """Every cached node."""
        return self._list_all("nodes")

    def namespace_labels(self, name: str) -> Mapping[str, str]:
        namespace = self._get("namespaces", "", name)
        return labels_of(namespace) if namespace else {}

    def workload(self, kind: str, namespace: str, name: str) -> Obj | None:
        resource = RESOURCE_OF_KIND.get(kind)
        return self._get(resource, namespace, name) if resource else None

    def _list_in(self, resource: str, namespace: str) -> list[Any]:
        with self._lock:
            return list(self._store.get(resource, {}).get(namespace, {}).values())

    def _list_all(self, resource: str) -> list[Any]:
        with self._lock:
            return [obj for by_name in self._store.get(resource, {}).values()
                    for obj in by_name.values()]

    def _get(self, resource: str, namespace: str, name: str) -> Any:
        with self._lock:
            return self._store.get(resource, {}).get(namespace, {}).get(name)

    # ----- updates from the reflectors -------------------------------------------------

    def _relist(self, resource: Resource, pages: Iterable[list[Obj]]) -> None:
        """Take in a fresh list page by page, in place; notify the differences.

        Objects are updated as their page arrives and those the list no longer has are
        removed at the end, so the old and the new list are never both held in full.
        """
        seen: set[tuple[str, str]] = set()
        for page in pages:
            for item in page:
                seen.add((namespace_of(item), name_of(item)))
                self._apply(resource, "LISTED", item)
        with self._lock:
            gone = [(namespace, name, entry)
                    for namespace, by_name in self._store[resource.name].items()
                    for name, entry in by_name.items() if (namespace, name) not in seen]
            for namespace, name, entry in gone:
                del self._store[resource.name][namespace][name]
                if resource.kind == "Pod":
                    self._pod_labels[namespace].drop(name, entry)
                    self._by_node.drop((namespace, name))
        for _, _, entry in gone:
            obj = _object_of(entry)
            self._notify(resource.name, "DELETED", obj, obj)

    def _apply(self, resource: Resource, event_type: str, raw: Obj) -> None:
        """Store (or drop) one object; LISTED is an object seen by a relist."""
        obj = compact(resource.kind, raw)
        namespace, name = namespace_of(obj), name_of(obj)
        entry: Any = PodFacts(raw, keep=obj) if resource.kind == "Pod" else obj
        with self._lock:
            by_name = self._store[resource.name].setdefault(namespace, {})
            before_entry = by_name.get(name)
            before = _object_of(before_entry) if before_entry is not None else None
            if event_type == "LISTED" and before is not None and _rv(before) == _rv(obj):
                return  # unchanged since we last saw it
            if event_type == "DELETED":
                by_name.pop(name, None)
            else:
                by_name[name] = entry
            if resource.kind == "Pod":
                index = self._pod_labels.setdefault(namespace, LabelIndex())
                if event_type != "DELETED":
                    index.put(name, entry, before_entry)
                    self._by_node.put(obj)
                elif before_entry is not None:
                    index.drop(name, before_entry)
                    self._by_node.drop((namespace, name))
        if event_type == "LISTED":
            event_type = "ADDED" if before is None else "MODIFIED"
        self._notify(resource.name, event_type, obj, before)
        self._events_since_freeze += 1
        if self._frozen and self._events_since_freeze >= FREEZE_EVERY:
            self.freeze()

    def freeze(self) -> None:
        """Collect once, then keep everything now in memory out of later collections.

        Called when every resource is listed and every FREEZE_EVERY events: a full
        collection then walks only what arrived since, not the whole cache.
        """
        self._events_since_freeze = 0
        self._frozen = True
        gc.collect()
        gc.freeze()

    def _notify(self, resource: str, event_type: str, obj: Obj, before: Obj | None) -> None:
        for callback in list(self._callbacks):
            try:
                callback(resource, event_type, obj, before)
            except Exception:  # a broken callback must not stop the watch
                log.exception("event callback failed for %s %s", resource, name_of(obj))


class _Reflector:
    """List, then watch one resource, forever; never raises out of its thread."""

    def __init__(self, cluster: LiveCluster, api: client.ApiClient, resource: Resource,
                 watch_timeout: int, backoff_initial: float, backoff_max: float,
                 absent_recheck: float = ABSENT_RECHECK_SECONDS) -> None:
        self.cluster, self.api, self.resource = cluster, api, resource
        self.watch_timeout = watch_timeout
        self.backoff_initial, self.backoff_max = backoff_initial, backoff_max
        self.absent_recheck = absent_recheck
        # Why an optional resource is not served ("not installed", "not permitted"), or None.
        self.absent: str | None = None
        self.synced = threading.Event()
        self.last_heard: float | None = None
        self.rv: str | None = None
        self.lists = 0
        self.errors = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: Any = None
        self.listing: PagedList | None = None  # the list coming in, while it does

    def start(self, stop: threading.Event) -> None:
        self._stop = stop
        self._thread = threading.Thread(target=self.run, daemon=True,
                                        name=f"watch-{self.resource.name}")
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def interrupt(self) -> None:
        """Unblock a watch read in progress (called from stop())."""
        response = self._response
        if response is not None:
            _close_response(response)

    def status(self, objects: int) -> dict[str, Any]:
        heard = self.last_heard
        return {"synced": self.synced.is_set(), "resourceVersion": self.rv,
                "objects": objects, "lists": self.lists, "errors": self.errors,
                "lastError": self.last_error, "absent": self.absent,
                "lastHeardSecondsAgo": None if heard is None
                else round(time.monotonic() - heard, 3)}

    def run(self) -> None:
        delay = self.backoff_initial
        while not self._stop.is_set():
            try:
                if self.rv is None:
                    if not self._list():  # an optional resource the server does not serve
                        self._stop.wait(self.absent_recheck * random.uniform(1.0, 1.2))
                        continue
                    delay = self.backoff_initial
                if self._watch():
                    delay = self.backoff_initial
                else:  # the server ended a watch that brought nothing: do not spin
                    self._stop.wait(delay)
            except GoneError:
                if self.rv is None:  # a list's continue token outlived the server's history
                    log.info("%s: the paged list's continue token expired; listing again "
                             "from the first page", self.resource.name)
                else:  # the watch's resourceVersion left the server's history
                    log.info("%s: resourceVersion %s expired; listing again",
                             self.resource.name, self.rv)
                self.rv = None
            except Exception as err:  # the thread must survive anything
                if self._stop.is_set():
                    break
                if _not_served(self.resource, err):  # its CRD went away while watched
                    self.rv = None
                    continue
                self.errors += 1
                self.last_error = describe_error(err)
                log.warning("%s: %s; retrying in %.1fs", self.resource.name, self.last_error,
                            delay)
                self._stop.wait(delay * random.uniform(1.0, 1.2))
                delay = min(delay * 2, self.backoff_max)

    def _heard(self) -> None:
        self.last_heard = time.monotonic()

    def _list(self) -> bool:
        """List the resource into the cache; False when it is an optional resource the
        API server does not serve (then the cache holds none of it)."""
        listing = self.listing = PagedList(self.api, self.resource)
        try:
            self.cluster._relist(self.resource, listing.pages())
        except ApiError as err:
            if not _not_served(self.resource, err):
                raise
            self._absent(err)
            return False
        finally:
            self.listing = None
        if self.absent is not None:
            log.info("%s: now served by the API server; watching it", self.resource.name)
            self.absent = None
        self.rv = listing.resource_version
        self.lists += 1
        self._listed()
        return True

    def _absent(self, err: ApiError) -> None:
        """The resource is not served: hold none of it (a CRD deleted since the last list
        takes its objects with it), count as synced, say so once."""
        reason = "not installed" if isinstance(err, NotFoundError) else "not permitted"
        self.cluster._relist(self.resource, ())
        if self.absent != reason:
            log.info("%s (%s): %s (%s); going on without it and asking again every %.0fs",
                     self.resource.name, self.resource.api_version, reason, err,
                     self.absent_recheck)
        self.absent = reason
        self.rv = None
        # Frozen when this completes the first sync only: a re-check finds nothing new.
        self._listed(freeze=not self.synced.is_set())

    def _listed(self, freeze: bool = True) -> None:
        self._heard()
        self.synced.set()
        if freeze and self.cluster.synced:  # everything listed: the cache is the bulk of memory
            self.cluster.freeze()

    def _watch(self) -> bool:
        """Watch from self.rv until the server ends the stream; True if anything came."""
        timeout = random.randint(self.watch_timeout, 2 * self.watch_timeout)
        query = {"watch": "true", "resourceVersion": self.rv, "allowWatchBookmarks": "true",
                 "timeoutSeconds": timeout}
        response = open_stream(self.api, self.resource.path, query, (5.0, timeout + 30.0))
        self._response = response
        received = False
        try:
            if self._stop.is_set():
                return False
            self._heard()
            for event in iter_json_lines(response):
                self._handle(event)
                received = True
        finally:
            self._response = None
            _close_response(response)
        return received

    def _handle(self, event: Mapping[str, Any]) -> None:
        event_type, obj = event.get("type"), event.get("object") or {}
        if event_type == "ERROR":
            raise ApiError.of(int(obj.get("code") or 0), str(obj.get("reason") or "Error"),
                              str(obj.get("message") or ""))
        if event_type in ("ADDED", "MODIFIED", "DELETED"):
            self.cluster._apply(self.resource, event_type, _typed(self.resource, obj))
        elif event_type != "BOOKMARK":
            log.warning("%s: ignoring watch event of type %r", self.resource.name, event_type)
            return
        self.rv = _rv(obj) or self.rv
        self._heard()


def _not_served(resource: Resource, err: BaseException) -> bool:
    """An optional resource's 404 (its CRD is not installed) or 403 (not granted to us)."""
    return (resource.optional and isinstance(err, ApiError)
            and getattr(err, "status", None) in (403, 404))


def _close_response(response: Any) -> None:
    with contextlib.suppress(Exception):  # already closed, or urllib3 < 2.3
        response.shutdown()  # unblocks a read in progress on another thread
    with contextlib.suppress(Exception):
        response.close()


def _rv(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _typed(resource: Resource, item: Obj) -> Obj:
    """The item with `apiVersion` and `kind` set (list responses leave them out)."""
    if item.get("kind") and item.get("apiVersion"):
        return item
    return {"apiVersion": resource.api_version, "kind": resource.kind,
            **{k: v for k, v in item.items() if k not in ("apiVersion", "kind")}}


def _object_of(entry: Any) -> Obj:
    return entry.pod if isinstance(entry, PodFacts) else entry


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
    does not have are dropped at its end (LiveCluster._relist).
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
            yield [_typed(self.resource, item) for item in items]
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
    items = [_typed(resource, item) for item in body.get("items") or []]
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
            if not _not_served(resource, err):
                raise
            continue  # a custom resource whose CRD is not installed: the cluster has none
        for item in items:
            snapshot.add(item)
    return snapshot
