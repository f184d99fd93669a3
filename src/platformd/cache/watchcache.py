"""
The watch cache: every object of every served kind, in memory, kept current by one
ordered watch on the storage interface; per kind, a ring of recent events and the live
watchers (spec 4.5, 4.9).

Reads are served from here, never from disk: a GET is a dict lookup that returns bytes
encoded once per object version (``CachedObject.json``), shared by every request that
reads that version; a watch event is encoded once per type and media type
(``CacheEvent.frame``) and the same bytes go to every watcher.  The cache is fed only
through ``IStorage.watch``, so the SQLite and etcd backends feed it alike.  Because
backends deliver a write's event before they acknowledge the write, a client that hears
"created" can read its object back at once.

History: each kind keeps its recent events (``KindCache.history``).  ``expire`` (driven
by a LoopingCall on an injectable clock, see ``expiry.py``) drops events older than the
history TTL and compacts the store at the same point, so the cache and the store agree on
what history exists.  ``horizon`` is the revision after which every event is held: a
watch or exact list from an older revision is 410 Gone.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from typing import Callable, NamedTuple, Optional

import orjson
from twisted.internet.defer import Deferred, inlineCallbacks, succeed
from twisted.logger import Logger

from platformd.util.deferreds import then
from platformd.model.meta import set_resource_version
from platformd.util.ratelog import RateLimitedLog, origin
from platformd.storage.interface import DELETE, PUT, Event, IWatch, KeyValue

log = Logger()

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"


class CorruptObjectError(Exception):
    """Stored bytes that do not decode to an object (see unsafe delete, issue 4)."""


class CachedObject:
    """
    One version of one object.  ``obj`` is shared and must not be mutated: take
    ``mutable()`` for a private copy.  Encodings are computed on first use and kept.
    """

    __slots__ = ("key", "revision", "create_revision", "raw", "_obj", "_json", "_encodings")

    def __init__(self, key: str, raw: bytes, revision: int, create_revision: int):
        self.key = key
        self.raw = bytes(memoryview(raw)) if isinstance(raw, bytes) else raw
        self.revision = revision
        self.create_revision = create_revision
        self._obj: Optional[dict] = None
        self._json: Optional[bytes] = None
        self._encodings: Optional[dict] = None

    @property
    def obj(self) -> dict:
        if self._obj is None:
            self._obj = self._decode()
        return self._obj

    def _decode(self) -> dict:
        try:
            obj = orjson.loads(self._json if self._json is not None else self.raw)
        except orjson.JSONDecodeError as e:
            raise CorruptObjectError(f"{self.key}: {e}") from None
        if not isinstance(obj, dict):
            raise CorruptObjectError(f"{self.key}: stored value is not an object")
        set_resource_version(obj.setdefault("metadata", {}), str(self.revision))
        return obj

    @property
    def json(self) -> bytes:
        """
        The response bytes.  Computed without keeping the decoded dict when nothing has
        asked for it yet (a dict costs several times the bytes), and copied to an
        exact-size object (orjson's output buffer is over-allocated).
        """
        if self._json is None:
            obj = self._obj if self._obj is not None else self._decode()
            self._json = bytes(memoryview(orjson.dumps(obj)))
        return self._json

    def encoded(self, media: str, encode: Callable) -> bytes:
        """
        ``encode(object)`` for another media type than JSON (Protobuf), computed once per
        object version and media type and shared by every GET, list and watch that
        sends it; like ``json``, without keeping the decoded dict.
        """
        if self._encodings is None:
            self._encodings = {}
        found = self._encodings.get(media)
        if found is None:
            found = self._encodings[media] = encode(
                self._obj if self._obj is not None else self._decode())
        return found

    def mutable(self) -> dict:
        """A private deep copy of the object (fastest way: reparse its JSON)."""
        return orjson.loads(self.json)

    def at(self, revision: int) -> "CachedObject":
        """The same content stamped with another resourceVersion (a deletion's)."""
        return CachedObject(self.key, self.raw, revision, self.create_revision)

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[1]

    @property
    def namespace(self) -> Optional[str]:
        """From the key (``/registry/{resource}/{namespace}/{name}``): works even for an
        object whose bytes do not decode."""
        parts = self.key.split("/")
        return parts[3] if len(parts) == 5 else None

    def stub(self, kind) -> dict:
        """What can be said of an object whose stored bytes do not decode."""
        meta = {"name": self.name, "resourceVersion": str(self.revision)}
        if self.namespace:
            meta["namespace"] = self.namespace
        return {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}


class CacheEvent:
    """
    One change of one object, as watchers see it.  ``new`` is None for a deletion;
    ``old`` is None for a creation.  ``frame`` memoises the encoded watch event per
    (type, media type), so every watcher is sent the same bytes.
    """

    __slots__ = ("type", "new", "old", "revision", "time", "_frames", "_gone")

    def __init__(self, type_: str, new, old, revision: int, time: float):
        self.type = type_
        self.new = new
        self.old = old
        self.revision = revision
        self.time = time
        self._frames: dict = {}
        self._gone: Optional[CachedObject] = None

    @property
    def key(self) -> str:
        return (self.new or self.old).key

    def gone(self) -> CachedObject:
        """What a DELETED event carries: the last content, at this event's revision."""
        if self._gone is None:
            self._gone = self.old.at(self.revision)
        return self._gone

    def object_for(self, type_: str):
        """The object a watch event of ``type_`` carries: the last state for a deletion."""
        return self.gone() if type_ == DELETED else self.new

    def frame(self, type_: str, media: str, encode: Callable) -> bytes:
        """This event as a watch event of ``type_``, encoded by ``encode(type_, object)``."""
        cache_key = (type_, media)
        frame = self._frames.get(cache_key)
        if frame is None:
            frame = self._frames[cache_key] = encode(type_, self.object_for(type_))
        return frame


#: How every object stored before objects were kept in upstream's field order begins
#: (that version wrote apiVersion first; every later one writes kind first).
_OLD_ORDER = b'{"apiVersion":'


def _in_upstream_order(kind, raw: bytes) -> bytes:
    """
    ``raw`` in upstream's field order: objects are written in it (``Struct.order``), so
    only those a previous version stored are reordered, once as they enter the cache.
    Bytes that do not decode are left for ``CachedObject`` to report.
    """
    if raw[:len(_OLD_ORDER)] != _OLD_ORDER:
        return raw
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return raw
    kind.schema.order(obj)
    return orjson.dumps(obj)


def old_kv(entry: CachedObject) -> KeyValue:
    return KeyValue(entry.key, entry.raw, entry.create_revision, entry.revision)


class KindCache:
    """The current objects of one kind by storage key, its recent events, its watchers."""

    def __init__(self, kind, clock):
        self.kind = kind
        self.clock = clock
        #: A listener failing on a stored object fails on each of its events: one
        #: traceback a minute per bug.
        self._failures = RateLimitedLog(log, clock=clock)
        self._objects: dict = {}
        self._keys: list = []
        #: Recent events, oldest first (see module docstring).
        self.history: deque = deque()
        #: Watchers by namespace ("" for watchers of every namespace): only those that
        #: can care about an event are offered it.
        self.watchers: dict = {}
        #: ``listener(type, new_or_none, old_or_none, revision)`` after each change
        #: (``add_listener``: the informers).
        self._listeners: list = []
        self._pending: list = []
        self._fan_out_call = None
        #: Counts for upstream's watch-cache metrics (read when /metrics is scraped):
        #: events received from storage, events dispatched to watchers, (re)loads and
        #: the objects they loaded.
        self.events_received = 0
        self.events_dispatched = 0
        self.initializations = 0
        self.init_events = 0

    def __len__(self) -> int:
        return len(self._objects)

    def get(self, key: str) -> Optional[CachedObject]:
        return self._objects.get(key)

    def _keys_from(self, prefix: str, start_after: str = ""):
        """Keys under ``prefix`` in order, beginning after ``start_after``."""
        keys = self._keys
        low = prefix if not start_after else start_after + "\x00"
        i = bisect_left(keys, max(low, prefix))
        while i < len(keys) and keys[i].startswith(prefix):
            yield keys[i]
            i += 1

    def add_listener(self, listener: Callable) -> None:
        """``listener(type, new_or_none, old_or_none, revision)`` after each change."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Callable) -> None:
        """Stop calling ``listener`` (again: nothing)."""
        if listener in self._listeners:
            self._listeners.remove(listener)

    def everything(self) -> list:
        """Every current object, in the order they were loaded or added."""
        return list(self._objects.values())

    def current(self, prefix: str) -> list:
        """The objects under ``prefix``, in key order."""
        objects = self._objects
        return [objects[k] for k in self._keys_from(prefix)]

    def apply(self, event) -> None:
        self.events_received += 1
        key = event.kv.key
        old = self._objects.get(key)
        if event.type == DELETE:
            if old is None:
                return
            del self._objects[key]
            del self._keys[bisect_left(self._keys, key)]
            self._publish(CacheEvent(DELETED, None, old, event.revision, self.clock.seconds()))
            return
        new = self._admit(event.kv)
        self._objects[key] = new
        if old is None:
            insort(self._keys, key)
        self._publish(CacheEvent(ADDED if old is None else MODIFIED, new, old, event.revision,
                                 self.clock.seconds()))

    def load(self, kv) -> None:
        self.init_events += 1
        self._objects[kv.key] = self._admit(kv)
        insort(self._keys, kv.key)

    def _admit(self, kv) -> CachedObject:
        return CachedObject(kv.key, _in_upstream_order(self.kind, kv.value), kv.mod_revision,
                            kv.create_revision)

    def replace(self, kvs, revision: int) -> None:
        """
        Become exactly ``kvs`` (a fresh list at ``revision``), telling watchers and
        listeners what changed as if each difference were an event: a relist after a lost
        watch must not leave them with a stale picture.
        """
        self.initializations += 1
        self.init_events += len(kvs)
        fresh = {kv.key: kv for kv in kvs}
        for key in [k for k in self._keys if k not in fresh]:
            old = self._objects[key]
            self.apply(Event(DELETE, KeyValue(key, old.raw, old.create_revision, revision),
                             old_kv(old)))
        for kv in kvs:
            current = self._objects.get(kv.key)
            if current is None or current.revision != kv.mod_revision:
                self.apply(Event(PUT, kv, None if current is None else old_kv(current)))

    def add_watcher(self, namespace: str, watcher) -> None:
        self.watchers.setdefault(namespace, {})[watcher] = None

    def remove_watcher(self, namespace: str, watcher) -> None:
        group = self.watchers.get(namespace)
        if group is not None:
            group.pop(watcher, None)
            if not group:
                del self.watchers[namespace]

    def all_watchers(self):
        for group in list(self.watchers.values()):
            yield from list(group)

    def events_after(self, revision: int):
        """Held events with a revision above ``revision``, oldest first."""
        history = self.history
        # Revisions rise along the ring: find the first newer event by bisection.
        low, high = 0, len(history)
        while low < high:
            mid = (low + high) // 2
            if history[mid].revision <= revision:
                low = mid + 1
            else:
                high = mid
        for i in range(low, len(history)):
            yield history[i]

    def state_at(self, prefix: str, revision: int) -> list:
        """
        The objects under ``prefix`` as they were at ``revision``, in key order: the
        current ones with every later event undone.  The caller checks that ``revision``
        is within the held history.
        """
        state = {k: self._objects[k] for k in self._keys_from(prefix)}
        history = self.history
        for i in range(len(history) - 1, -1, -1):
            event = history[i]
            if event.revision <= revision:
                break
            key = event.key
            if not key.startswith(prefix):
                continue
            if event.old is None:
                state.pop(key, None)
            else:
                state[key] = event.old
        return [state[k] for k in sorted(state)]

    def _fan_out(self) -> None:
        self._fan_out_call = None
        events, self._pending = self._pending, []
        self.events_dispatched += len(events)
        watchers = self.watchers
        for event in events:
            namespace = (event.new or event.old).namespace or ""
            for group in (watchers.get(namespace), watchers.get("") if namespace else None):
                if group:
                    for watcher in list(group):
                        watcher.offer(event)

    def drop_before(self, cutoff: float) -> int:
        """Drop events that arrived before ``cutoff``; the newest dropped revision (or 0)."""
        dropped = 0
        history = self.history
        while history and history[0].time < cutoff:
            dropped = history.popleft().revision
        return dropped

    def _publish(self, event: CacheEvent) -> None:
        self.history.append(event)
        if self.watchers:
            # Fan out after the current reactor turn: the write that made this event is
            # acknowledged first, and events of one turn go out together.
            self._pending.append(event)
            if self._fan_out_call is None:
                self._fan_out_call = self.clock.callLater(0, self._fan_out)
        for listener in list(self._listeners):
            try:
                listener(event.type, event.new, event.old, event.revision)
            except Exception:
                self._failures.failure("cache listener failed", key=origin())


class KindCounts(NamedTuple):
    """One kind's numbers for upstream's watch-cache and object-count metrics."""

    objects: int
    events_received: int
    events_dispatched: int
    initializations: int
    init_events: int


class WatchCache:
    """Every kind's ``KindCache``, fed by one storage watch from a consistent start."""

    def __init__(self, storage, catalog, clock, history_ttl: float = 300.0):
        self.storage = storage
        self.clock = clock
        self.history_ttl = history_ttl
        stored = [k for k in catalog.kinds if k.stored]  # reviews store nothing
        self._kinds = {k.storage_prefix: KindCache(k, clock) for k in stored}
        self._by_kind = {k.gvr: self._kinds[k.storage_prefix] for k in stored}
        self.revision = 0
        #: Every event after this revision is held in the kinds' histories.
        self.horizon = 0
        self._watch: Optional[IWatch] = None
        self._waiters: list = []  # (revision, Deferred), fired once the cache reaches it
        self._stopped = False
        #: Whether ``start`` has loaded every object (informers' "has synced").
        self.loaded = False
        self._on_loaded: list = []

    def served(self) -> list:
        """The ``ResourceType`` of every kind the cache holds."""
        return [c.kind for c in self._kinds.values()]

    def for_kind(self, kind) -> KindCache:
        return self._by_kind[kind.gvr]

    def kind_counts(self) -> list:
        """
        ``[(kind, KindCounts), ...]`` for every kind: what ``/metrics`` reports of the
        cache (``metrics/sources.py``), read when scraped.
        """
        return [(c.kind, KindCounts(len(c), c.events_received, c.events_dispatched,
                                    c.initializations, c.init_events))
                for c in self._kinds.values()]

    def for_gvr(self, gvr: tuple) -> KindCache:
        """The cache of the kind served as ``(group, version, plural)``."""
        return self._by_kind[gvr]

    def when_loaded(self, f: Callable[[], None]) -> None:
        """``f()`` once ``start`` has loaded every object (at once if it has)."""
        if self.loaded:
            f()
        else:
            self._on_loaded.append(f)

    @inlineCallbacks
    def start(self):
        """Load every object at one revision, then follow changes from it."""
        result = yield self.storage.range("/registry/")
        for kv in result.kvs:
            cache = self._cache_for(kv.key)
            if cache is not None:
                cache.load(kv)
        for cache in self._kinds.values():
            cache.initializations += 1
        self.revision = self.horizon = result.revision
        self._follow(result.revision)
        self.loaded = True
        waiting, self._on_loaded = self._on_loaded, []
        for f in waiting:
            f()

    def stop(self):
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        # Nothing more will arrive: whoever waits for a revision hears so now, and so
        # does whoever asks from now on.
        self._stopped = True
        waiters, self._waiters = self._waiters, []
        for _revision, d in waiters:
            d.callback(False)

    def wait_for(self, revision: int, timeout: float) -> Deferred:
        """
        Deferred firing True once the cache has reached ``revision``, or False after
        ``timeout`` seconds (for "not older than" reads of a version not yet seen).
        """
        if self.revision >= revision:
            return succeed(True)
        if self._stopped:
            return succeed(False)
        d: Deferred[bool] = Deferred()
        entry = (revision, d)
        self._waiters.append(entry)

        def give_up():
            if entry in self._waiters:
                self._waiters.remove(entry)
                d.callback(False)
        call = self.clock.callLater(timeout, give_up)
        d.addBoth(lambda result: (call.active() and call.cancel(), result)[1])
        return d

    def sync(self) -> Optional[Deferred]:
        """
        Deferred firing once the cache holds every write committed before the call, by
        any server over the same storage: ``IStorage.sync`` (with etcd, a quorum read of
        the current revision, then a wait for the storage's watch to reach it), then
        ``advance``; None over a storage this server alone writes (nothing to wait for:
        ``deferreds.then`` goes on at once).  What upstream reads from etcd itself (a GET
        or an update's current object, ``ConsistentListFromCache`` for lists) is read
        from the cache after this.
        """
        return then(self.storage.sync(), lambda _: self.advance(self.storage.revision))

    def advance(self, revision: int) -> None:
        """
        The storage says every event up to ``revision`` has been delivered (after
        ``IStorage.sync``): the cache holds the state at ``revision`` although its last
        event may be older (the newer writes were outside the served keys).
        """
        if revision > self.revision and self._watch is not None:
            self.revision = revision
            self._reached(revision)

    def expire(self) -> Optional[int]:
        """
        Drop history older than the TTL from every kind and compact the store up to the
        newest dropped event; the compacted revision, or None when nothing was dropped.
        """
        cutoff = self.clock.seconds() - self.history_ttl
        dropped = max((cache.drop_before(cutoff) for cache in self._kinds.values()), default=0)
        if dropped <= self.horizon:
            return None
        self.horizon = dropped
        if dropped > self.storage.compacted_revision:
            self.storage.compact(dropped).addErrback(
                lambda f: log.failure("compacting the store at {rev} failed", f, rev=dropped))
        return dropped

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
        grouped: dict[str, list[KeyValue]] = {prefix: [] for prefix in self._kinds}
        for kv in result.kvs:
            cache = self._cache_for(kv.key)
            if cache is not None:
                grouped[cache.kind.storage_prefix].append(kv)
        for prefix, cache in self._kinds.items():
            cache.replace(grouped[prefix], result.revision)
        # Events in the gap are unknown: no exact read or watch may start before here.
        self.revision = self.horizon = result.revision
        self._reached(result.revision)
        self._follow(result.revision)

    def _cache_for(self, key: str) -> Optional[KindCache]:
        # "/registry/{qualified resource}/..." -> the prefix up to the third slash.
        end = key.find("/", len("/registry/"))
        return self._kinds.get(key[:end + 1]) if end > 0 else None

    def _on_event(self, event) -> None:
        cache = self._cache_for(event.kv.key)
        self.revision = event.revision
        if cache is not None:
            cache.apply(event)
        if self._waiters:
            self._reached(event.revision)

    def _reached(self, revision: int) -> None:
        ready = [w for w in self._waiters if w[0] <= revision]
        for entry in ready:
            self._waiters.remove(entry)
            entry[1].callback(True)

