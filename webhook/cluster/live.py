"""The live ClusterView: an in-memory cache of the cluster, fed by watches.

One reflector per resource (webhook.cluster.reflector) lists it, then watches it, and
applies what it hears here; reads are served from memory under a lock and never touch
the network. Objects are stored compacted (webhook.cluster.compact; pods with their
PodFacts), with `kind` and `apiVersion` filled in for list items.
"""

from __future__ import annotations

import gc
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from ..core.kinds.registry import RESOURCE_OF_KIND, RESOURCES
from ..core.objects.kube import labels_of, name_of, namespace_of
from ..core.objects.podfacts import PodFacts
from ..core.view.cluster import IndexedClusterView
from ..core.view.label_index import LabelIndex
from ..core.view.pods_by_node import PodsByNode, T
from ..core.view.resource import PODS, Resource
from .compact import compact
from .kubeclient import request_json
from .listing import Obj, resource_version_of, typed
from .reflector import ABSENT_RECHECK_SECONDS, Reflector

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("poolguard.live")

FREEZE_EVERY = 2_000  # watch events between two gc.freeze(): bounds what a collection walks

# callback(resource name, event type, object, previous object or None); event types are
# ADDED, MODIFIED and DELETED, also for the differences a relist finds.
EventCallback = Callable[[str, str, Obj, Obj | None], None]

# Every kind poolguard reads, by default.
ALL_RESOURCES = RESOURCES


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
        self._reflectors = {r.name: Reflector(self, api, r, watch_timeout, backoff_initial,
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
        return typed(PODS, items[0]) if items else None

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

    def relist(self, resource: Resource, pages: Iterable[list[Obj]]) -> None:
        """Take in a fresh list page by page, in place; notify the differences.

        Objects are updated as their page arrives and those the list no longer has are
        removed at the end, so the old and the new list are never both held in full.
        """
        seen: set[tuple[str, str]] = set()
        for page in pages:
            for item in page:
                seen.add((namespace_of(item), name_of(item)))
                self.apply(resource, "LISTED", item)
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

    def apply(self, resource: Resource, event_type: str, raw: Obj) -> None:
        """Store (or drop) one object; LISTED is an object seen by a relist."""
        obj = compact(resource.kind, raw)
        namespace, name = namespace_of(obj), name_of(obj)
        entry: Any = PodFacts(raw, keep=obj) if resource.kind == "Pod" else obj
        with self._lock:
            by_name = self._store[resource.name].setdefault(namespace, {})
            before_entry = by_name.get(name)
            before = _object_of(before_entry) if before_entry is not None else None
            if (event_type == "LISTED" and before is not None
                    and resource_version_of(before) == resource_version_of(obj)):
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



def _object_of(entry: Any) -> Obj:
    return entry.pod if isinstance(entry, PodFacts) else entry

