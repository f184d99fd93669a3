"""
The namespace controller: deleting a namespace deletes its contents, then the namespace.

A namespace being deleted is marked terminating (``deletionTimestamp``, phase
``Terminating``) by the store.  This controller then deletes every namespaced object in
it through the same generic stores a client would use (so finalizers are honoured), and
once nothing is left it removes the namespace itself.  It reacts to cache events on the
reactor: when a terminating namespace appears, and when an object in one goes away.

It is a step of the daemon's boot sequence, started once the cache has loaded; stopping it stops it
following the cache (work already scheduled finishes or is dropped).
"""

from __future__ import annotations

from twisted.internet.defer import inlineCallbacks
from twisted.logger import Logger

from platformd import errors
from platformd.cache.watchcache import DELETED
from platformd.context import internal
from platformd.ratelog import RateLimitedLog

log = Logger()


class NamespaceController:
    def __init__(self, reactor, cache, catalog, stores, namespace_kind):
        self.reactor = reactor
        self.cache = cache
        self.namespace_kind = namespace_kind
        self.namespace_store = stores[namespace_kind.gvr]
        self.namespaced = [(k, stores[k.gvr]) for k in catalog.kinds
                           if k.namespaced and k.stored]
        self._scheduled: set = set()
        self._running: set = set()
        self._following = False
        #: Pending delayed calls, cancelled by ``stop`` so nothing runs after it.
        self._calls: set = set()
        #: A namespace whose cleaning keeps failing is retried every second; its
        #: traceback is logged once a minute.
        self._failures = RateLimitedLog(log, clock=reactor)

    def start(self):
        self._following = True
        self.cache.for_kind(self.namespace_kind).listeners.append(self._namespace_changed)
        for kind, _store in self.namespaced:
            self.cache.for_kind(kind).listeners.append(self._content_changed)
        for entry in list(self.cache.for_kind(self.namespace_kind).objects.values()):
            if entry.obj["metadata"].get("deletionTimestamp"):
                self._schedule(entry.name)

    def stop(self):
        if not self._following:
            return
        self._following = False
        self._listening(self.namespace_kind).remove(self._namespace_changed)
        for kind, _store in self.namespaced:
            self._listening(kind).remove(self._content_changed)
        for call in self._calls:
            if call.active():
                call.cancel()
        self._calls.clear()

    def _later(self, delay: float, f, *args) -> None:
        def fire():
            self._calls.discard(call)
            f(*args)

        call = self.reactor.callLater(delay, fire)
        self._calls.add(call)

    def _listening(self, kind) -> list:
        return self.cache.for_kind(kind).listeners

    def _namespace_changed(self, type_, new, old, revision):
        if new is not None and new.obj["metadata"].get("deletionTimestamp"):
            self._schedule(new.name)

    def _content_changed(self, type_, new, old, revision):
        if type_ == DELETED and old is not None:
            namespace = old.namespace
            if namespace and self._terminating(namespace):
                self._schedule(namespace)

    def _terminating(self, name: str) -> bool:
        entry = self.cache.for_kind(self.namespace_kind).get(
            self.namespace_kind.storage_key(None, name))
        return entry is not None and bool(entry.obj["metadata"].get("deletionTimestamp"))

    def _schedule(self, name: str):
        if name in self._scheduled or not self._following:
            return
        self._scheduled.add(name)
        self._later(0, self._run, name)

    @inlineCallbacks
    def _run(self, name: str):
        self._scheduled.discard(name)
        if not self._following:
            return
        if name in self._running:
            self._scheduled.add(name)
            self._later(0.1, self._run, name)
            return
        self._running.add(name)
        try:
            yield self._clean(name)
        except Exception:
            if self._following:
                self._failures.failure(f"cleaning namespace {name} failed; retrying")
                self._later(1, self._schedule, name)
        finally:
            self._running.discard(name)

    @inlineCallbacks
    def _clean(self, name: str):
        if not self._terminating(name):
            return
        remaining = 0
        for kind, store in self.namespaced:
            for entry in store.list(name):
                if not self._following:
                    return  # stopped meanwhile: the next start picks this up
                remaining += 1
                if entry.obj["metadata"].get("deletionTimestamp"):
                    continue  # waiting for its finalizers
                try:
                    yield store.delete(internal(), name, entry.name)
                except errors.StatusError as e:
                    if e.code != 404:
                        raise
        if remaining:
            return  # deletions re-trigger us until the namespace is empty
        yield self.namespace_store.finalize(internal(), name)
