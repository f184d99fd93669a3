"""
One storage served in another version (spec 2.1.3, 9.1: "different versions of one
group and resource share identity and storage"; upstream serves ``events.k8s.io/v1``
Events from the core Events' storage).

A kind with a ``storage_kind`` (``ResourceType``) has no objects of its own: the watch
cache holds its storage kind's, and ``ConvertedKindCache`` shows them to the kind's
readers — gets, lists, exact and continued lists, watches, informers — converted by the
kind's ``from_storage``.  Each object version is converted once (``CachedObject.view``),
and each event once for every watcher of the view (``CacheEvent.view``), so a watch
fan-out to many watchers of the second version encodes each event once, as for the
first.  Writes go to the storage kind's keys in its form (``GenericStore._encode``,
``to_storage``).  History, expiry and counts stay the storage kind's.
"""

from __future__ import annotations

from typing import Callable

import orjson

from platformd.informing import CHANGES


# The cache's own types come from the objects themselves: ``watchcache`` makes these
# views, so this module does not import it.


def _converted(kind, entry):
    """``entry`` in ``kind``'s form (made once per object version), or None."""
    if entry is None:
        return None
    return entry.view(kind.gvr, lambda: _convert(kind, entry))


def _convert(kind, entry):
    try:
        obj = entry.mutable()
    except Exception:  # noqa: BLE001 -- CorruptObjectError: shown as it is in any version
        return entry
    obj["metadata"].pop("resourceVersion", None)
    served = kind.from_storage(obj)
    kind.schema.order(served)
    return type(entry)(entry.key, orjson.dumps(served), entry.revision,
                       entry.create_revision)


def _converted_event(kind, event):
    return event.view(kind.gvr, lambda: type(event)(
        event.type, _converted(kind, event.new), _converted(kind, event.old), event.revision,
        event.time))


class _Relay:
    """A watcher of the storage kind that offers each event converted to ``watcher``."""

    __slots__ = ("kind", "watcher")

    def __init__(self, kind, watcher):
        self.kind = kind
        self.watcher = watcher

    def offer(self, event) -> None:
        self.watcher.offer(_converted_event(self.kind, event))

    def __getattr__(self, name):
        return getattr(self.watcher, name)


class ConvertedKindCache:
    """A ``KindCache``'s objects, events and watchers, seen as ``kind`` (module doc)."""

    def __init__(self, kind, base):
        self.kind = kind
        self.base = base
        self.clock = base.clock
        self._relays: dict = {}
        self._listeners: dict = {}

    #: Converted synchronously: never waits (``KindCache.ready_at``).
    feed = None

    def __len__(self) -> int:
        return len(self.base)

    def ready_at(self, revision: int) -> None:
        return None

    def ready_for(self, key: str, revision: int) -> None:
        return None

    def state_revision(self, current: int) -> int:
        return current

    def stored_elsewise(self, key: str) -> bool:
        """Never: the store writes the storage kind's form (``to_storage``), which is
        what decides whether a write changes anything."""
        return False

    # Its lifecycle is the storage kind's (built in: loaded with the cache, never removed).
    @property
    def loaded(self) -> bool:
        return self.base.loaded

    @property
    def horizon(self) -> int:
        return self.base.horizon

    @property
    def version(self) -> int:
        """The storage kind's (a lister's kept lists follow its changes)."""
        return self.base.version

    @property
    def removed(self) -> bool:
        return self.base.removed

    def when_loaded(self, f: Callable[[], None]) -> None:
        self.base.when_loaded(f)

    def when_removed(self, f: Callable[[], None]) -> None:
        self.base.when_removed(f)

    def get(self, key: str):
        return _converted(self.kind, self.base.get(key))

    def current(self, prefix: str) -> list:
        kind = self.kind
        return [_converted(kind, e) for e in self.base.current(prefix)]

    def everything(self) -> list:
        kind = self.kind
        return [_converted(kind, e) for e in self.base.everything()]

    def state_at(self, prefix: str, revision: int) -> list:
        kind = self.kind
        return [_converted(kind, e) for e in self.base.state_at(prefix, revision)]

    def events_after(self, revision: int):
        kind = self.kind
        for event in self.base.events_after(revision):
            yield _converted_event(kind, event)

    @property
    def history(self):
        return self.base.history

    def add_watcher(self, namespace: str, watcher) -> None:
        relay = self._relays.setdefault(watcher, _Relay(self.kind, watcher))
        self.base.add_watcher(namespace, relay)

    def remove_watcher(self, namespace: str, watcher) -> None:
        relay = self._relays.pop(watcher, None)
        if relay is not None:
            self.base.remove_watcher(namespace, relay)

    def all_watchers(self):
        return iter(list(self._relays))

    def add_listener(self, listener: Callable, types: frozenset = CHANGES) -> None:
        """``KindCache.add_listener``: only the changes of ``types`` (default: every
        one) are converted, so an informer following deletes alone (the namespace
        controller's) costs a create nothing."""
        kind = self.kind

        def converted(type_, new, old, revision):
            listener(type_, _converted(kind, new), _converted(kind, old), revision)
        self._listeners[listener] = converted
        self.base.add_listener(converted, types)

    def remove_listener(self, listener: Callable) -> None:
        converted = self._listeners.pop(listener, None)
        if converted is not None:
            self.base.remove_listener(converted)
