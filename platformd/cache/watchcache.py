"""
The watch cache: every object of every served kind, in memory, kept current by one
ordered watch on the storage interface.

Reads are served from here, never from disk: a GET is a dict lookup that returns bytes
encoded once per object version (``CachedObject.json``), shared by every request that
reads that version.  The cache is fed only through ``IStorage.watch``, so the SQLite and
etcd backends feed it alike.  Because backends deliver a write's event before they
acknowledge the write, a client that hears "created" can read its object back at once.

Later work (issue 3) adds the ring of recent events, snapshots and watchers on top of
the per-kind ``KindCache``; its ``listeners`` are that seam.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Callable, Optional

import orjson
from twisted.internet.defer import inlineCallbacks
from twisted.logger import Logger

from platformd.storage.interface import DELETE, PUT, Event, KeyValue

log = Logger()

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


class CorruptObjectError(Exception):
    """Stored bytes that do not decode to an object (see unsafe delete, issue 4)."""


class CachedObject:
    """
    One version of one object.  ``obj`` is shared and must not be mutated: take
    ``mutable()`` for a private copy.  Encodings are computed on first use and kept.
    """

    __slots__ = ("key", "revision", "create_revision", "raw", "_obj", "_json")

    def __init__(self, key: str, raw: bytes, revision: int, create_revision: int):
        self.key = key
        self.raw = raw
        self.revision = revision
        self.create_revision = create_revision
        self._obj = None
        self._json = None

    @property
    def obj(self) -> dict:
        if self._obj is None:
            try:
                obj = orjson.loads(self.raw)
            except orjson.JSONDecodeError as e:
                raise CorruptObjectError(f"{self.key}: {e}") from None
            if not isinstance(obj, dict):
                raise CorruptObjectError(f"{self.key}: stored value is not an object")
            obj.setdefault("metadata", {})["resourceVersion"] = str(self.revision)
            self._obj = obj
        return self._obj

    @property
    def json(self) -> bytes:
        if self._json is None:
            self._json = orjson.dumps(self.obj)
        return self._json

    def mutable(self) -> dict:
        """A private deep copy of the object (fastest way: reparse its JSON)."""
        return orjson.loads(self.json)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[1]

    @property
    def namespace(self) -> Optional[str]:
        return (self.obj.get("metadata") or {}).get("namespace")


def old_kv(entry: CachedObject) -> KeyValue:
    return KeyValue(entry.key, entry.raw, entry.create_revision, entry.revision)


class KindCache:
    """The current objects of one kind, by storage key, with a key-ordered index."""

    def __init__(self, kind):
        self.kind = kind
        self.objects: dict = {}
        self._keys: list = []
        #: ``listener(type, new_or_none, old_or_none, revision)`` after each change.
        self.listeners: list = []

    def get(self, key: str) -> Optional[CachedObject]:
        return self.objects.get(key)

    def keys_from(self, prefix: str, start_after: str = ""):
        """Keys under ``prefix`` in order, beginning after ``start_after``."""
        keys = self._keys
        low = prefix if not start_after else start_after + "\x00"
        i = bisect_left(keys, max(low, prefix))
        while i < len(keys) and keys[i].startswith(prefix):
            yield keys[i]
            i += 1

    def apply(self, event) -> None:
        key = event.kv.key
        old = self.objects.get(key)
        if event.type == DELETE:
            if old is None:
                return
            del self.objects[key]
            del self._keys[bisect_left(self._keys, key)]
            self._notify(DELETED, None, old, event.revision)
            return
        new = CachedObject(key, event.kv.value, event.kv.mod_revision, event.kv.create_revision)
        self.objects[key] = new
        if old is None:
            insort(self._keys, key)
        self._notify(ADDED if old is None else MODIFIED, new, old, event.revision)

    def load(self, kv) -> None:
        self.objects[kv.key] = CachedObject(kv.key, kv.value, kv.mod_revision, kv.create_revision)
        insort(self._keys, kv.key)

    def replace(self, kvs, revision: int) -> None:
        """
        Become exactly ``kvs`` (a fresh list at ``revision``), telling listeners what
        changed as if each difference were an event: a relist after a lost watch must not
        leave watchers or controllers with a stale picture.
        """
        fresh = {kv.key: kv for kv in kvs}
        for key in [k for k in self._keys if k not in fresh]:
            old = self.objects[key]
            self.apply(Event(DELETE, KeyValue(key, old.raw, old.create_revision, revision), old_kv(old)))
        for kv in kvs:
            current = self.objects.get(kv.key)
            if current is None or current.revision != kv.mod_revision:
                self.apply(Event(PUT, kv, None if current is None else old_kv(current)))

    def _notify(self, type_, new, old, revision):
        for listener in list(self.listeners):
            try:
                listener(type_, new, old, revision)
            except Exception:
                log.failure("cache listener failed")


class WatchCache:
    """Every kind's ``KindCache``, fed by one storage watch from a consistent start."""

    def __init__(self, storage, catalog):
        self.storage = storage
        self.kinds = {k.storage_prefix: KindCache(k) for k in catalog.kinds}
        self._by_kind = {id(k): self.kinds[k.storage_prefix] for k in catalog.kinds}
        self.revision = 0
        self._watch = None
        #: ``callback(revision)`` after every event, for waiters on a revision.
        self.revision_listeners: list[Callable[[int], None]] = []

    def for_kind(self, kind) -> KindCache:
        return self._by_kind[id(kind)]

    @inlineCallbacks
    def start(self):
        """Load every object at one revision, then follow changes from it."""
        result = yield self.storage.range("/registry/")
        for kv in result.kvs:
            cache = self._cache_for(kv.key)
            if cache is not None:
                cache.load(kv)
        self.revision = result.revision
        self._follow(result.revision)

    def _follow(self, revision: int) -> None:
        self._watch = self.storage.watch("/registry/", revision, self._on_event)
        self._watch.done.addErrback(self._watch_ended)

    def _watch_ended(self, failure):
        """The backend ended the watch (history gone, connection lost): list again."""
        log.failure("the storage watch ended; relisting", failure)
        self._watch = None
        return self._relist().addErrback(
            lambda f: log.failure("relisting after a lost watch failed", f))

    @inlineCallbacks
    def _relist(self):
        result = yield self.storage.range("/registry/")
        grouped = {prefix: [] for prefix in self.kinds}
        for kv in result.kvs:
            cache = self._cache_for(kv.key)
            if cache is not None:
                grouped[cache.kind.storage_prefix].append(kv)
        for prefix, cache in self.kinds.items():
            cache.replace(grouped[prefix], result.revision)
        self.revision = result.revision
        self._follow(result.revision)

    def stop(self):
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def _cache_for(self, key: str) -> Optional[KindCache]:
        # "/registry/{qualified resource}/..." -> the prefix up to the third slash.
        end = key.find("/", len("/registry/"))
        return self.kinds.get(key[:end + 1]) if end > 0 else None

    def _on_event(self, event) -> None:
        cache = self._cache_for(event.kv.key)
        self.revision = event.revision
        if cache is not None:
            cache.apply(event)
        for listener in self.revision_listeners:
            listener(event.revision)
