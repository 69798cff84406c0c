"""The reflector, as client-go calls it: one thread per resource that lists it, then
watches it, and keeps a store (the live cache) current.

It lists the resource, then watches it from the list's resourceVersion with bookmarks; a
`410 Gone` (the resourceVersion fell out of the server's history) makes it list again,
and any other error or a lost connection makes it wait (exponential backoff) and resume
the watch from the last resourceVersion it saw.

Why raw list+watch rather than `kubernetes.watch.Watch`: Watch deserializes every
event into generated model classes (which drop fields they do not know, and cost
time on large pods), retries a 410 once by itself instead of letting us relist, and
gives no handle on the open response, so a blocked read could not be interrupted on
stop(). We issue the same requests through the client's ApiClient (see
webhook.cluster.kubeclient) and decode JSON lines ourselves.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..core.view.resource import Resource
from ..errors import GoneError, NotFoundError
from .kubeclient import ApiError, describe_error, iter_json_lines, open_stream
from .listing import Obj, PagedList, not_served, resource_version_of, typed

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("poolguard.live")

# How often a cache asks again for a custom resource the API server did not serve (its CRD
# not installed, or not readable). A list that answers 404 costs the API server next to
# nothing, and needs no permission beyond the list itself (watching
# customresourcedefinitions would need one): a CRD installed later is in the cache within
# this time.
ABSENT_RECHECK_SECONDS = 60.0


class Store(Protocol):
    """What a reflector fills (client-go's Store): the live cache."""

    @property
    def synced(self) -> bool:
        """Every resource has been listed at least once."""
        ...

    def relist(self, resource: Resource, pages: Iterable[list[Obj]]) -> None:
        """Take in a fresh list of `resource`, page by page."""
        ...

    def apply(self, resource: Resource, event_type: str, raw: Obj) -> None:
        """Store (or drop) one object of `resource`."""
        ...

    def freeze(self) -> None:
        """Keep what is in memory now out of later garbage collections."""
        ...


class Reflector:
    """List, then watch one resource, forever; never raises out of its thread."""

    def __init__(self, store: Store, api: client.ApiClient, resource: Resource,
                 watch_timeout: int, backoff_initial: float, backoff_max: float,
                 absent_recheck: float = ABSENT_RECHECK_SECONDS) -> None:
        self.store, self.api, self.resource = store, api, resource
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
                if not_served(self.resource, err):  # its CRD went away while watched
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
            self.store.relist(self.resource, listing.pages())
        except ApiError as err:
            if not not_served(self.resource, err):
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
        self.store.relist(self.resource, ())
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
        if freeze and self.store.synced:  # everything listed: the cache is the bulk of memory
            self.store.freeze()

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
            self.store.apply(self.resource, event_type, typed(self.resource, obj))
        elif event_type != "BOOKMARK":
            log.warning("%s: ignoring watch event of type %r", self.resource.name, event_type)
            return
        self.rv = resource_version_of(obj) or self.rv
        self._heard()



def _close_response(response: Any) -> None:
    with contextlib.suppress(Exception):  # already closed, or urllib3 < 2.3
        response.shutdown()  # unblocks a read in progress on another thread
    with contextlib.suppress(Exception):
        response.close()
