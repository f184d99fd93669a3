"""
The in-process client side of the watch cache (upstream's client-go ``tools/cache``
informers and listers): what controllers, the RBAC index and other in-process readers
use instead of reaching into ``KindCache``.

An ``IInformer`` serves one kind, named by its GVR (``(group, version, plural)``):

- ``lister`` (``ILister``): ``get(namespace, name)`` and ``list(namespace, selector)``
  read the cache's current objects (``CachedObject``, shared: take ``mutable()`` to
  change one);
- ``add_handler(EventHandlers(on_add, on_update, on_delete, on_stop))`` delivers the
  current objects as adds (once the kind has loaded, if it has not yet), then every
  change, on the reactor, in the cache's order (a deleted object stamped with the
  deletion's revision, as a watch sends it); ``remove_handler`` stops it.  A handler
  that raises is logged (once a minute per place) and the others still hear the event;
- ``has_synced()``: the kind has loaded; ``is_stopped()``: it was removed.

``Informers(cache).informer(gvr)`` makes them on demand, one per GVR, so a kind the
cache serves from later on (custom resources, ``WatchCache.add_kind``) gets one the same
way, as soon as its load has begun: ``has_synced()`` turns true, and handlers get the
current objects as adds, once the load is in (events that arrived during the load are
part of those objects, not sent again).  When the kind is removed (``remove_kind``) its
informer is shut down (``informing.py``): every handler hears ``on_stop``, no delete is
sent for what it held, ``is_stopped()`` is true, the lister reads nothing and
``Informers`` forgets it; asking again raises ``UnknownKindError`` until the kind is
added again, which makes a new informer.  ``FakeInformer`` is the in-memory
implementation for tests: objects are put in and taken out by hand, ``stop()`` stands
for the kind's removal.
The interfaces and ``EventHandlers`` live in ``platformd/informing.py`` (re-exported
here), so layers below the cache (the RBAC index) can name them.
"""

from __future__ import annotations

from typing import Callable, Optional

import attrs
import orjson
from twisted.logger import Logger
from zope.interface import implementer

from platformd.cache.watchcache import ADDED, DELETED, MODIFIED, CachedObject, CorruptObjectError
from platformd.informing import (
    EventHandlers, IInformer, IInformers, ILister, InformerStoppedError, UnknownKindError,
)
from platformd.util.labelselectors import labels_of, matches

__all__ = ["EventHandlers", "FakeInformer", "IInformer", "IInformers", "ILister", "Informer",
           "InformerStoppedError", "Informers", "Lister", "UnknownKindError"]

log = Logger()


def _selected(entries, selector) -> list:
    if selector is None:
        return list(entries)
    found = []
    for entry in entries:
        try:
            labels = labels_of(entry.obj)
        except CorruptObjectError:
            continue
        if matches(selector, labels):
            found.append(entry)
    return found


#: A lister keeps lists of at most this many objects (``Lister``).
KEPT_LIST_LIMIT = 1000


@implementer(ILister)
class Lister:
    """
    An ``ILister`` over one ``KindCache``.  A list without a selector is kept per
    namespace for the kind's ``version`` (which every change of its objects bumps), so
    the readers that list on every request (admission's webhook and policy
    configurations) do not rebuild it from the keys each time; each call gets a list of
    its own.
    """

    def __init__(self, kind_cache):
        self._cache = kind_cache
        self._kind = kind_cache.kind
        #: namespace (None: every one) -> (the kind's version, its objects in key order).
        self._lists: dict = {}

    def get(self, namespace, name):
        return self._cache.get(self._kind.storage_key(namespace, name))

    def list(self, namespace=None, selector=None):
        namespace = namespace or None
        cache = self._cache
        kept = self._lists.get(namespace)
        if kept is None or kept[0] != cache.version:
            kind = self._kind
            prefix = kind.namespace_prefix(namespace) if namespace else kind.storage_prefix
            kept = (cache.version, cache.current(prefix))
            if len(kept[1]) <= KEPT_LIST_LIMIT:  # no old versions of a large kind held
                if len(self._lists) >= 64:
                    self._lists.clear()
                self._lists[namespace] = kept
        return _selected(kept[1], selector)

    def forget(self) -> None:
        """Drop the kept lists (the kind was removed)."""
        self._lists.clear()


@implementer(IInformer)
class Informer:
    """An ``IInformer`` over one ``KindCache`` of a ``WatchCache``."""

    def __init__(self, cache, kind_cache):
        self._cache = cache
        self._kind_cache = kind_cache
        self.lister = Lister(kind_cache)
        self._registrations: list = []
        self._stopped = False
        kind_cache.when_removed(self._stop)

    def add_handler(self, handlers: EventHandlers):
        if self._stopped:
            raise InformerStoppedError(
                f"{self._kind_cache.kind.qualified_resource} is no longer served: "
                "its informer has stopped")
        registration = _Registration(handlers)

        def listener(type_, new, old, revision):
            # Nothing before the current objects: a kind loaded at run time applies the
            # events it kept during its load before they are sent as adds.
            if registration.primed:
                # A deletion's object carries the deletion's revision, as a watch's event.
                handlers.dispatch(type_, new, old.at(revision) if type_ == DELETED else old)

        registration.listener = listener
        self._kind_cache.add_listener(listener, handlers.types)
        self._registrations.append(registration)

        def initial():
            if registration.active:
                registration.primed = True
                for entry in self._kind_cache.everything():
                    handlers.dispatch(ADDED, entry, None)
        self._kind_cache.when_loaded(initial)
        return registration

    def remove_handler(self, registration) -> None:
        registration.active = registration.primed = False
        self._kind_cache.remove_listener(registration.listener)
        if registration in self._registrations:
            self._registrations.remove(registration)

    def has_synced(self) -> bool:
        return self._kind_cache.loaded

    def is_stopped(self) -> bool:
        return self._stopped

    def _stop(self) -> None:
        """The kind is no longer served: tell every handler, once."""
        self._stopped = True
        self.lister.forget()
        registrations, self._registrations = self._registrations, []
        for registration in registrations:
            # Not even the rest of an event being delivered (removed by a handler).
            registration.active = registration.primed = False
            _tell_stopped(registration.handlers)


def _tell_stopped(handlers: EventHandlers) -> None:
    try:
        handlers.stopped()
    except Exception:
        log.failure("an informer's on_stop failed")


@attrs.define(eq=False)
class _Registration:
    handlers: EventHandlers
    listener: Optional[Callable] = None
    active: bool = True
    #: The current objects have been sent (as adds): changes follow (until removed).
    primed: bool = False


@implementer(IInformers)
class Informers:
    """
    ``informer(gvr)``: the one informer per GVR over a ``WatchCache``, made on demand
    (``UnknownKindError`` for a GVR the cache neither serves nor is loading), and
    forgotten when its kind is removed.
    """

    def __init__(self, cache):
        self._cache = cache
        self._made: dict = {}

    def informer(self, gvr: tuple) -> Informer:
        kind_cache = self._cache.for_gvr(gvr)
        found = self._made.get(gvr)
        if found is None or found._kind_cache is not kind_cache:
            made = found = self._made[gvr] = Informer(self._cache, kind_cache)
            kind_cache.when_removed(lambda: self._forget(gvr, made))
        return found

    def _forget(self, gvr: tuple, informer: Informer) -> None:
        if self._made.get(gvr) is informer:
            del self._made[gvr]

    def for_kind(self, kind) -> Informer:
        """``informer(kind.gvr)``."""
        return self.informer(kind.gvr)

    def served_kind(self, group, kind, version=None):
        for served in self._cache.served():
            if served.group == group and served.kind == kind and \
                    (version is None or served.version == version):
                return served
        return None


# -- the fake -------------------------------------------------------------------------


@implementer(ILister)
class FakeLister:
    """An ``ILister`` over a ``FakeInformer``'s objects."""

    def __init__(self, objects: dict):
        self._objects = objects

    def get(self, namespace, name):
        return self._objects.get((namespace or None, name))

    def list(self, namespace=None, selector=None):
        entries = [self._objects[k] for k in sorted(self._objects, key=lambda k: (k[0] or "", k[1]))
                   if namespace is None or k[0] == namespace]
        return _selected(entries, selector)


@implementer(IInformer)
class FakeInformer:
    """
    An in-memory ``IInformer`` for tests: ``put(obj)`` adds or replaces an object (an
    add or an update for the handlers), ``delete(namespace, name)`` removes one; each
    change gets the next revision.  ``synced`` says what ``has_synced`` answers; until it
    is set, handlers are not yet given the current objects (as over an unloaded cache).
    ``stop()`` shuts it down as a removed kind's informer is (``informing.py``).
    """

    def __init__(self, objects=(), resource: str = "things", synced: bool = True):
        self.resource = resource
        self.revision = 0
        self._objects: dict = {}
        self.handlers: list = []
        self._waiting: list = []
        self.lister = FakeLister(self._objects)
        self.stopped = False
        for obj in objects:
            self.put(obj)
        self.synced = False
        if synced:
            self.sync()

    def sync(self) -> None:
        """The fake has "loaded": handlers added meanwhile get the current objects."""
        self.synced = True
        waiting, self._waiting = self._waiting, []
        for handlers in waiting:
            self._initial(handlers)

    def _initial(self, handlers) -> None:
        for entry in self.lister.list():
            handlers.dispatch(ADDED, entry, None)

    def put(self, obj: dict, raw: Optional[bytes] = None) -> CachedObject:
        """Add or replace ``obj`` (stored as ``raw`` when given: bytes that may not decode)."""
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace") or None, meta["name"]
        key = f"/registry/{self.resource}/{namespace}/{name}" if namespace else \
            f"/registry/{self.resource}/{name}"
        self.revision += 1
        old = self._objects.get((namespace, name))
        new = CachedObject(key, orjson.dumps(obj) if raw is None else raw, self.revision,
                           old.create_revision if old is not None else self.revision)
        self._objects[(namespace, name)] = new
        self._emit(MODIFIED if old is not None else ADDED, new, old)
        return new

    def delete(self, namespace: Optional[str], name: str) -> None:
        old = self._objects.pop((namespace or None, name))
        self.revision += 1
        self._emit(DELETED, None, old.at(self.revision))

    def _emit(self, type_: str, new, old) -> None:
        for handlers in list(self.handlers):
            handlers.dispatch(type_, new, old)

    def stop(self) -> None:
        """The kind is removed: every handler hears ``on_stop``; the objects go."""
        if self.stopped:
            return
        self.stopped = True
        handlers, self.handlers, self._waiting = self.handlers, [], []
        self._objects.clear()
        for each in handlers:
            _tell_stopped(each)

    def is_stopped(self) -> bool:
        return self.stopped

    def add_handler(self, handlers: EventHandlers):
        if self.stopped:
            raise InformerStoppedError(f"{self.resource} is no longer served")
        self.handlers.append(handlers)
        if self.synced:
            self._initial(handlers)
        else:
            self._waiting.append(handlers)
        return handlers

    def remove_handler(self, registration) -> None:
        for pending in (self.handlers, self._waiting):
            if registration in pending:
                pending.remove(registration)

    def has_synced(self) -> bool:
        return self.synced
