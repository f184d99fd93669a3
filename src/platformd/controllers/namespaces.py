"""
The namespace controller: deleting a namespace deletes its contents, then the namespace.

A namespace being deleted is marked terminating (``deletionTimestamp``, phase
``Terminating``) by the store.  This controller then deletes every namespaced object in
it through the same generic stores a client would use (so finalizers are honoured), and
once nothing is left it removes the namespace itself.  It follows informers
(``cache/informers.py``): a terminating namespace added or changed, or an object in one
deleted, puts the namespace on the work queue (``controllers/queue.py``), which one
worker drains; a namespace whose cleaning fails is tried again a second later, its
traceback logged once a minute.

It is a step of the daemon's boot sequence, started once the cache has loaded; stopping
it shuts its queue down (work under way finishes or is dropped; the next start picks up
every terminating namespace again).
"""

from __future__ import annotations


from twisted.internet.defer import inlineCallbacks
from twisted.logger import Logger

from platformd import errors
from platformd.cache.informers import EventHandlers
from platformd.context import internal
from platformd.controllers.queue import FixedRateLimiter, WorkQueue
from platformd.controllers.worker import Controller, work
from platformd.registry.kinds.namespace import finalize
from platformd.util.ratelog import RateLimitedLog

log = Logger()

#: Seconds before a namespace whose cleaning failed is tried again.
RETRY = 1.0


def _terminating(entry) -> bool:
    return entry is not None and bool(entry.obj["metadata"].get("deletionTimestamp"))


class NamespaceController(Controller):
    """``NamespaceController(clock, informers, catalog, stores, namespace_kind)``."""

    def __init__(self, clock, informers, catalog, stores, namespace_kind):
        super().__init__(clock)
        self.namespace_store = stores[namespace_kind.gvr]
        self.namespaces = informers.for_kind(namespace_kind)
        self.catalog = catalog
        self.stores = stores
        kinds = [k for k in catalog.kinds if k.namespaced and k.stored]
        self.contents = [informers.for_kind(k) for k in kinds]
        self._failures = RateLimitedLog(log, clock=clock)

    def _namespaced(self) -> list:
        """Every namespaced kind served now (custom resources too) with its store."""
        return [(k, self.stores[k.gvr]) for k in self.catalog.kinds
                if k.namespaced and k.stored and k.gvr in self.stores]

    def start(self):
        if self.queue is not None:
            return
        self.queue = queue = WorkQueue(self.clock, FixedRateLimiter(RETRY))

        def namespace_changed(entry):
            if _terminating(entry):
                queue.add(entry.name)

        def content_deleted(old):
            if old.namespace and _terminating(self.namespaces.lister.get(None, old.namespace)):
                queue.add(old.namespace)

        self.follow(self.namespaces, EventHandlers(
            on_add=namespace_changed, on_update=lambda old, new: namespace_changed(new)))
        for informer in self.contents:
            self.follow(informer, EventHandlers(on_delete=content_deleted))
        work(queue, self._clean, lambda name: f"cleaning namespace {name} failed; retrying",
             self._failures)

    @inlineCallbacks
    def _clean(self, name: str):
        queue = self.queue
        if not _terminating(self.namespaces.lister.get(None, name)):
            return
        remaining = 0
        unfollowed = 0  # objects of kinds added at run time: no informer requeues us
        for kind, store in self._namespaced():
            if not self.catalog.fixed(kind):
                unfollowed += len(store.list(name))
            for entry in store.list(name):
                if queue is None or queue.shutting_down:
                    return  # stopped meanwhile: the next start picks this up
                remaining += 1
                if entry.obj["metadata"].get("deletionTimestamp"):
                    continue  # waiting for its finalizers
                try:
                    yield store.delete(internal(), name, entry.name)
                except errors.StatusError as e:
                    if e.code != 404:
                        raise
        if unfollowed and queue is not None:
            queue.add_after(name, RETRY)
        if remaining:
            return  # deletions re-trigger us until the namespace is empty
        yield finalize(self.namespace_store, internal(), name)
