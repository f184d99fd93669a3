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

Kinds at run time (custom resources): ``WatchCache.add_kind`` loads a kind while the
cache follows the storage, consistently with that stream, and ``remove_kind`` stops
serving one (its watches end, its informers stop, its memory is let go); see
``WatchCache`` and docs/architecture.md, "Kinds added at run time".
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from typing import Callable, NamedTuple, Optional

import orjson
from twisted.internet.defer import Deferred, fail, inlineCallbacks, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from platformd.cache import versions, webhookversions
from platformd.informing import CHANGES, UnknownKindError, unknown_kind
from platformd.util.deferreds import then
from platformd.model.meta import set_resource_version
from platformd.util.ratelog import RateLimitedLog, origin
from platformd.storage.interface import DELETE, PUT, CompactedError, Event, IWatch, KeyValue

log = Logger()

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"


class CorruptObjectError(Exception):
    """Stored bytes that do not decode to an object (see unsafe delete, issue 4)."""


#: What a ``CachedObject``'s one byte form is (``_form``).
_STORED, _JSON, _OTHER_JSON = 0, 1, 2


def _memo_view(holder, key, make: Callable):
    """``make()`` kept in ``holder._views`` under ``key`` (a dict made at the first)."""
    if holder._views is None:
        holder._views = {}
    found = holder._views.get(key)
    if found is None:
        found = holder._views[key] = make()
    return found


class CachedObject:
    """
    One version of one object.  ``obj`` is shared and must not be mutated: take
    ``mutable()`` for a private copy.  Encodings are computed on first use and kept.

    One byte form is held at a time (``_data``): the stored bytes until the response
    JSON is first asked for, then the JSON bytes alone (the stored bytes plus
    ``resourceVersion``: keeping both doubled an object's memory once it had been read);
    ``raw`` is then derived again on the rare occasions it is asked for.
    """

    __slots__ = ("key", "revision", "create_revision", "_data", "_form", "_obj",
                 "_encodings", "_views")

    def __init__(self, key: str, raw: bytes, revision: int, create_revision: int):
        self.key = key
        self._data = bytes(memoryview(raw)) if isinstance(raw, bytes) else raw
        #: What ``_data`` is: the stored bytes (``_STORED``), this version's JSON (``_JSON``), or
        #: the JSON of another version (``_OTHER_JSON``: ``at``), with its resourceVersion.
        self._form = _STORED
        self.revision = revision
        # One int object for both when they are equal (every object's first version).
        self.create_revision = revision if create_revision == revision else create_revision
        self._obj: Optional[dict] = None
        self._encodings: Optional[dict] = None
        self._views: Optional[dict] = None

    @property
    def raw(self) -> bytes:
        """The stored bytes (without ``resourceVersion``)."""
        if self._form == _STORED:
            return self._data
        obj = orjson.loads(self._data)
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("resourceVersion", None)
        return orjson.dumps(obj)

    @property
    def obj(self) -> dict:
        if self._obj is None:
            self._obj = self._decode()
        return self._obj

    def _decode(self) -> dict:
        try:
            obj = orjson.loads(self._data)
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
        exact-size object (orjson's output buffer is over-allocated); they replace the
        stored bytes (see the class docstring).
        """
        if self._form == _JSON:
            return self._data
        obj = self._obj if self._obj is not None else self._decode()
        data = self._data = bytes(memoryview(orjson.dumps(obj)))
        self._form = _JSON
        return data

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

    def view(self, key, make: Callable) -> "CachedObject":
        """``make()`` (this version as another version of its kind serves it,
        ``cache/versions.py``), made once per ``key`` and kept with this version."""
        return _memo_view(self, key, make)

    def mutable(self) -> dict:
        """A private deep copy of the object (fastest way: reparse its JSON)."""
        return orjson.loads(self.json)

    def at(self, revision: int) -> "CachedObject":
        """The same content stamped with another resourceVersion (a deletion's)."""
        gone = CachedObject(self.key, self._data, revision, self.create_revision)
        if self._form != _STORED:
            # JSON bytes with another resourceVersion: decoding stamps this one, and
            # ``raw`` (without one) is derived from them.
            gone._form = _OTHER_JSON
        return gone

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

    __slots__ = ("type", "new", "old", "revision", "time", "_frames", "_gone", "_views")

    def __init__(self, type_: str, new, old, revision: int, time: float):
        self.type = type_
        self.new = new
        self.old = old
        self.revision = revision
        self.time = time
        #: (type, media) -> the encoded event; made at the first frame (most events in
        #: the history are never framed: no watcher).
        self._frames: Optional[dict] = None
        self._gone: Optional[CachedObject] = None
        self._views: Optional[dict] = None

    def view(self, key, make: Callable) -> "CacheEvent":
        """``make()`` (this event as another version sees it), once per ``key``."""
        return _memo_view(self, key, make)

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
        frames = self._frames
        if frames is None:
            frames = self._frames = {}
        cache_key = (type_, media)
        frame = frames.get(cache_key)
        if frame is None:
            frame = frames[cache_key] = encode(type_, self.object_for(type_))
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

    def __init__(self, kind, clock, convert: Optional[Callable[[bytes], bytes]] = None):
        #: For a version view (``WatchCache.add_version``): the stored bytes as this
        #: version shows them; None: as stored.
        self.convert = convert
        self.kind = kind
        self.clock = clock
        #: A listener failing on a stored object fails on each of its events: one
        #: traceback a minute per bug.
        self._failures = RateLimitedLog(log, clock=clock)
        self._objects: dict = {}
        self._keys: list = []
        #: Bumped by every change of the objects (a load, an event applied, a relist's
        #: changes, the kind's removal): whatever was derived from them at one version
        #: (a lister's list, ``Lister``) is current while the version is unchanged.
        self.version = 0
        #: Recent events, oldest first (see module docstring).
        self.history: deque = deque()
        #: Watchers by namespace ("" for watchers of every namespace): only those that
        #: can care about an event are offered it.
        self.watchers: dict = {}
        #: listener -> the change types it is called for (``add_listener``: the
        #: informers, the event expiry).
        self._listeners: dict = {}
        self._pending: list = []
        self._fan_out_call = None
        #: Counts for upstream's watch-cache metrics (read when /metrics is scraped):
        #: events received from storage, events dispatched to watchers, (re)loads and
        #: the objects they loaded.
        self.events_received = 0
        self.events_dispatched = 0
        self.initializations = 0
        self.init_events = 0
        #: Whether the kind's objects are loaded (by ``WatchCache.start``, or by
        #: ``add_kind`` for a kind added at run time): its informers' "has synced".
        self.loaded = False
        #: Every event of this kind after this revision is held (``WatchCache.horizon``
        #: for every kind; a kind added at run time holds nothing before its load).
        self.horizon = 0
        #: Whether the kind stopped being served (``WatchCache.remove_kind``).
        self.removed = False
        self._on_loaded: list = []
        self._on_removed: list = []
        #: A converted version view's feed (``webhookversions.ConvertingFeed``), which
        #: converts the storage events it is fed asynchronously; None: events are
        #: applied as they come.
        self.feed: Optional[webhookversions.ConvertingFeed] = None

    def __len__(self) -> int:
        return len(self._objects)

    def ready_at(self, revision: int) -> Optional[Deferred]:
        """
        None when the kind's objects are those of the cache at ``revision`` (always,
        but for a converted view still converting: then a Deferred firing once they
        are, or failing with the conversion's ``StatusError``).
        """
        return None if self.feed is None else self.feed.ready_at(revision)

    def ready_for(self, key: str, revision: int) -> Optional[Deferred]:
        """``ready_at`` for a read of the one object at ``key``: a converted view
        whose conversion fails still reads an object needing none (``get``)."""
        return None if self.feed is None else self.feed.ready_for(key, revision)

    def state_revision(self, current: int) -> int:
        """The revision the kind's objects are consistent at when the cache is at
        ``current`` (a converted view still converting is at an older one)."""
        return current if self.feed is None else self.feed.state_revision(current)

    def stored_elsewise(self, key: str) -> bool:
        """Whether the object at ``key`` is stored in another apiVersion than the kind
        shows it in (a storage version's object stored under an earlier one, converted
        by the webhook): a write of it stores it anew even when nothing changed, as
        upstream's newly encoded bytes differ from the stored ones."""
        return self.feed is not None and self.feed.stored_elsewise(key)

    def when_loaded(self, f: Callable[[], None]) -> None:
        """``f()`` once the kind's objects are loaded (at once if they are; never if it
        is removed first)."""
        if self.loaded:
            f()
        elif not self.removed:
            self._on_loaded.append(f)

    def when_removed(self, f: Callable[[], None]) -> None:
        """``f()`` once the kind stops being served (at once if it has)."""
        if self.removed:
            f()
        else:
            self._on_removed.append(f)

    def mark_loaded(self, revision: int) -> None:
        """The objects as of ``revision`` are in: serve, and tell who waits."""
        self.initializations += 1
        self.horizon = revision
        self.version += 1
        self.loaded = True
        waiting, self._on_loaded = self._on_loaded, []
        for f in waiting:
            f()

    def remove(self) -> None:
        """
        Stop serving (``WatchCache.remove_kind``): events not yet fanned out go to the
        watchers first; every object, event, listener and watcher is let go; then each
        watcher hears ``kind_removed()`` (its stream ends) and whoever asked
        ``when_removed`` is told.  Again: nothing.
        """
        if self.removed:
            return
        self.removed = True
        if self._fan_out_call is not None:
            self._fan_out_call.cancel()
            self._fan_out()
        watchers = list(self.all_watchers())
        told, self._on_removed = self._on_removed, []
        self._objects.clear()
        self._keys.clear()
        self.version += 1
        self.history.clear()
        self.watchers.clear()
        self._listeners.clear()
        self._pending.clear()
        self._on_loaded.clear()
        for f in [w.kind_removed for w in watchers] + told:
            try:
                f()
            except Exception:
                self._failures.failure("telling of a removed kind failed", key=origin())

    def get(self, key: str) -> Optional[CachedObject]:
        """The object at ``key``; while a converted view's conversion fails, as stored
        when it needs no conversion (its view copy may be stale: ``ConvertingFeed.
        while_failing``)."""
        found = self._objects.get(key)
        feed = self.feed
        if feed is not None and feed.failure is not None:
            return feed.while_failing(key, found)
        return found

    def _keys_from(self, prefix: str, start_after: str = ""):
        """Keys under ``prefix`` in order, beginning after ``start_after``."""
        keys = self._keys
        low = prefix if not start_after else start_after + "\x00"
        i = bisect_left(keys, max(low, prefix))
        while i < len(keys) and keys[i].startswith(prefix):
            yield keys[i]
            i += 1

    def add_listener(self, listener: Callable, types: frozenset = CHANGES) -> None:
        """
        ``listener(type, new_or_none, old_or_none, revision)`` after each change whose
        type is one of ``types``: a listener is not called for what it ignores, so a
        view in another version (``versions.py``) converts nothing for it then.
        """
        self._listeners[listener] = types

    def remove_listener(self, listener: Callable) -> None:
        """Stop calling ``listener`` (again: nothing)."""
        self._listeners.pop(listener, None)

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
            self.version += 1
            del self._objects[key]
            del self._keys[bisect_left(self._keys, key)]
            self._publish(CacheEvent(DELETED, None, old, event.revision, self.clock.seconds()))
            return
        new = self._admit(event.kv)
        self.version += 1
        self._objects[key] = new
        if old is None:
            insort(self._keys, key)
        self._publish(CacheEvent(ADDED if old is None else MODIFIED, new, old, event.revision,
                                 self.clock.seconds()))

    def load(self, kv) -> None:
        self.init_events += 1
        self.version += 1
        self._objects[kv.key] = self._admit(kv)
        insort(self._keys, kv.key)

    def _admit(self, kv) -> CachedObject:
        value = kv.value if self.convert is None else self.convert(kv.value)
        return CachedObject(kv.key, _in_upstream_order(self.kind, value), kv.mod_revision,
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
        if len(events) == 1:
            event = events[0]
            namespace = (event.new or event.old).namespace or ""
            for group in (watchers.get(namespace), watchers.get("") if namespace else None):
                if group:
                    for watcher in list(group):
                        watcher.offer(event)
            return
        # Several events in one turn: each watcher is given all of its own at once, in
        # order, so that a stream can write them together (``offer_many``).
        batches: dict = {}
        for event in events:
            namespace = (event.new or event.old).namespace or ""
            for group in (watchers.get(namespace), watchers.get("") if namespace else None):
                if group:
                    for watcher in group:
                        batch = batches.get(watcher)
                        if batch is None:
                            batches[watcher] = [event]
                        else:
                            batch.append(event)
        for watcher, batch in batches.items():
            offer_many = getattr(watcher, "offer_many", None)
            if offer_many is not None:
                offer_many(batch)
            else:
                for event in batch:
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
        type_ = event.type
        for listener, types in list(self._listeners.items()):
            if type_ not in types:
                continue
            try:
                listener(type_, event.new, event.old, event.revision)
            except Exception:
                self._failures.failure("cache listener failed", key=origin())


class KindCounts(NamedTuple):
    """One kind's numbers for upstream's watch-cache and object-count metrics."""

    objects: int
    events_received: int
    events_dispatched: int
    initializations: int
    init_events: int


class _Load:
    """
    A kind being loaded by ``WatchCache.add_kind``: its objects are read at ``revision``
    (the cache's revision when the load began, so every earlier event had been received)
    while the events of its keys arriving meanwhile wait in ``events``; ``done`` fires
    once the kind is served.
    """

    __slots__ = ("cache", "revision", "events", "done")

    def __init__(self, cache: KindCache, revision: int, done: Deferred):
        self.cache = cache
        self.revision = revision
        self.events: list = []
        self.done = done

    def rebase(self, revision: int) -> None:
        """Read at ``revision`` instead (a later one): drop the events it includes."""
        self.revision = revision
        self.events = [e for e in self.events if e.revision > revision]


def _prefix_of(key: str) -> str:
    """A key's kind prefix: ``/registry/{qualified resource}/`` ("" for none)."""
    end = key.find("/", len("/registry/"))
    return key[:end + 1] if end > 0 else ""


class WatchCache:
    """
    Every kind's ``KindCache``, fed by one storage watch from a consistent start.

    Kinds added at run time (``add_kind``, for custom resources) are loaded without
    stopping that watch: the watch covers every key under ``/registry/``, so events of a
    kind the cache does not serve arrive too, and are dropped (they only move
    ``revision`` on).  ``add_kind`` reads the kind's keys at the cache's revision ``C``
    while keeping the kind's events that arrive meanwhile (all after ``C``: events come
    in revision order); once the read is in, those after ``C`` are applied on top, in
    order, and the kind is served.  None is lost, none applied twice.  Its history
    begins at ``C`` (``KindCache.horizon``): a watch or exact list of it from an older
    version is 410 Gone.  ``remove_kind`` stops serving one: its watchers' streams end,
    its informers are shut down, its events are dropped again, its objects let go.
    """

    def __init__(self, storage, catalog, clock, history_ttl: float = 300.0):
        self.storage = storage
        self.clock = clock
        self.history_ttl = history_ttl
        stored = [k for k in catalog.kinds if k.stored]  # reviews store nothing
        #: The served kinds by storage prefix: where the storage's events go.  A kind
        #: served from another kind's storage (``storage_kind``) has none of its own.
        self._kinds = {k.storage_prefix: KindCache(k, clock) for k in stored
                       if k.storage_kind is None}
        #: Every kind by GVR, those being loaded by ``add_kind`` too; a kind served
        #: from another's storage is a view of that kind's cache (``cache/versions.py``).
        self._by_kind: dict = {
            k.gvr: self._kinds[k.storage_prefix] if k.storage_kind is None
            else versions.ConvertedKindCache(k, self._kinds[k.storage_prefix])
            for k in stored}
        #: The kinds the cache was built with: never removed.
        self._builtin = frozenset(self._by_kind)
        #: Kinds being loaded by ``add_kind``, by storage prefix (``_Load``).
        self._loading: dict[str, _Load] = {}
        #: Version views (``add_version``) by storage prefix: more kinds fed the same
        #: events as the kind stored there, each showing them as its own version (the
        #: stored kind's own, when ``add_kind`` was given a ``converter``).
        self._views: dict[str, list] = {}
        #: ``f(kind)`` after a kind is removed (``when_kind_removed``).
        self._on_kind_removed: list = []
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
        """The ``ResourceType`` of every kind the cache holds (not those still loading)."""
        return [c.kind for c in self._kinds.values()] + [
            v.kind for views in self._views.values() for v in views
            if self._is_version_view(v)]

    def for_kind(self, kind) -> KindCache:
        """``kind``'s cache (perhaps still loading: ``KindCache.loaded``), or
        ``UnknownKindError``."""
        return self.for_gvr(kind.gvr)

    def kind_counts(self) -> list:
        """
        ``[(kind, KindCounts), ...]`` for every kind: what ``/metrics`` reports of the
        cache (``metrics/sources.py``), read when scraped.
        """
        return [(c.kind, KindCounts(len(c), c.events_received, c.events_dispatched,
                                    c.initializations, c.init_events))
                for c in self._kinds.values()]

    def for_gvr(self, gvr: tuple) -> KindCache:
        """The cache of the kind served (or being loaded) as ``(group, version, plural)``;
        ``UnknownKindError`` for any other."""
        try:
            return self._by_kind[gvr]
        except KeyError:
            raise unknown_kind(gvr) from None

    def horizon_of(self, kind) -> int:
        """
        The revision after which every event of ``kind`` is held: a watch or exact list
        of it from an older one is 410 Gone (``horizon``, or later for a kind added at
        run time: its load's revision).
        """
        return max(self.horizon, self.for_kind(kind).horizon)

    def when_loaded(self, f: Callable[[], None]) -> None:
        """``f()`` once ``start`` has loaded every object (at once if it has)."""
        if self.loaded:
            f()
        else:
            self._on_loaded.append(f)

    def when_kind_removed(self, f: Callable) -> None:
        """``f(kind)`` after each ``remove_kind`` (the reader drops the kind's snapshots)."""
        self._on_kind_removed.append(f)

    # -- kinds added and removed at run time ---------------------------------------------

    def add_kind(self, kind, convert: Optional[Callable[[bytes], bytes]] = None,
                 converter: Optional[Callable] = None) -> Deferred:
        """
        Start serving ``kind`` (a stored ``ResourceType``) at run time: its cache exists
        at once (``for_kind``; informers can be made, not yet synced) and the Deferred
        fires (None) once its objects are loaded (see the class docstring) and its
        lists, gets, watches and informers are served.  It fails with the storage's
        error if the read fails (the kind is then not served), and with
        ``UnknownKindError`` if the kind is removed first.  Before ``start`` the kind is
        simply loaded with the others.  ``ValueError`` for a kind already served (its
        GVR, or its storage prefix under another version) or one that stores nothing.
        ``convert``: the stored bytes as the kind shows them (a custom resource's objects
        stored in an earlier storage version), as for ``add_version``.  ``converter``
        instead: ``converter(objects, api_version)`` (a Deferred: a custom resource's
        conversion webhook) makes the objects stored in another apiVersion the kind's,
        asynchronously and in order (``_add_stored_view``).
        """
        if not kind.stored:
            raise ValueError(f"{kind.qualified_resource} stores nothing: nothing to cache")
        prefix = kind.storage_prefix
        if kind.gvr in self._by_kind or prefix in self._kinds or prefix in self._loading:
            raise ValueError(f"{kind.qualified_resource} {kind.version} is already served")
        if self._stopped:
            return fail(RuntimeError("the watch cache is stopped"))
        cache = KindCache(kind, self.clock, convert)
        self._by_kind[kind.gvr] = cache
        served = cache if converter is None else self._add_stored_view(cache, converter)
        done: Deferred = Deferred()

        def loaded() -> None:
            if not done.called:
                done.callback(None)

        def removed() -> None:
            if not done.called:
                done.errback(UnknownKindError(
                    f"{kind.qualified_resource} {kind.version} was removed before it loaded"))
        served.when_loaded(loaded)
        served.when_removed(removed)
        if not self.loaded:
            self._kinds[prefix] = cache  # ``start`` loads it with every other kind
            return done
        load = self._loading[prefix] = _Load(cache, self.revision, done)
        self._read(load).addErrback(self._abandon, load)
        return done

    @inlineCallbacks
    def _read(self, load: _Load):
        prefix = load.cache.kind.storage_prefix
        try:
            result = yield self.storage.range(prefix, load.revision)
        except CompactedError:
            # Another server compacted past this cache's revision (it lags, or a relist
            # is under way, which then finishes the load): catch up, read from there.
            if self._loading.get(prefix) is not load:
                return
            yield self.sync()
            if self._loading.get(prefix) is not load:
                return
            load.rebase(self.revision)
            result = yield self.storage.range(prefix, load.revision)
        if self._loading.get(prefix) is load:  # not removed, nor finished by a relist
            self._finish(load, result.kvs, load.revision)

    def _finish(self, load: _Load, kvs: list, revision: int) -> None:
        """Serve a loaded kind: ``kvs`` (its keys at ``revision``), then the later events."""
        cache = load.cache
        prefix = cache.kind.storage_prefix
        del self._loading[prefix]
        for kv in kvs:
            cache.load(kv)
        self._kinds[prefix] = cache
        events, load.events = load.events, []
        for event in events:
            if event.revision > revision:
                cache.apply(event)
        cache.mark_loaded(revision)

    def _abandon(self, failure, load: _Load) -> None:
        """The load failed (or the cache stopped): the kind is not served."""
        cache = load.cache
        prefix = cache.kind.storage_prefix
        if self._loading.get(prefix) is not load:
            # Removed or finished already: a late read failing (the storage stopping),
            # or a bug in serving it.
            log.failure("loading {kind} failed after it was served or removed", failure,
                        kind=cache.kind.qualified_resource)
            return
        del self._loading[prefix]
        self._by_kind.pop(cache.kind.gvr, None)
        load.done.errback(failure)
        for view in list(self._views.get(prefix, ())):  # a stored view (``converter``)
            self._remove_view(view)
        cache.remove()

    def _add_stored_view(self, stored: KindCache, converter: Callable) -> KindCache:
        """
        The stored kind served through ``converter`` (``add_kind``): ``stored`` holds
        the objects as stored, unserved; a version view of the same kind, fed by a
        ``ConvertingFeed`` once ``stored`` is loaded, is what ``for_kind`` gives (reads,
        watches, informers, the kind's store).  Objects already in the kind's version
        pass through it at once (``ConvertingFeed.offer``), the others wait for the
        webhook, as upstream's storage codec converts each object read from etcd from
        the version it was stored in.
        """
        kind = stored.kind
        view = KindCache(kind, self.clock)
        self._by_kind[kind.gvr] = view
        self._views.setdefault(kind.storage_prefix, []).append(view)
        feed = view.feed = webhookversions.ConvertingFeed(
            view, stored, converter, lambda: self.revision, self.clock)
        stored.when_loaded(feed.start)
        return view

    def _stored_cache(self, prefix: str) -> Optional[KindCache]:
        """The cache holding the objects stored under ``prefix`` as stored (loaded or
        loading), or None."""
        load = self._loading.get(prefix)
        return load.cache if load is not None else self._kinds.get(prefix)

    def _is_version_view(self, cache) -> bool:
        """Whether ``cache`` is another version's view of a stored kind (not the stored
        kind's own view made by ``_add_stored_view``)."""
        prefix = cache.kind.storage_prefix
        if cache not in self._views.get(prefix, ()):
            return False
        stored = self._stored_cache(prefix)
        return stored is None or stored.kind.gvr != cache.kind.gvr

    def add_version(self, kind, convert: Callable[[bytes], bytes]) -> None:
        """
        Serve ``kind`` as another version of the kind stored under its storage prefix
        (served and loaded: ``ValueError`` otherwise): a version view, with a cache of its
        own (its watchers, history and informers) holding the same objects, each shown
        through ``convert`` (stored bytes → this version's bytes), fed every later event
        of the prefix.  Its history begins now, as a kind added at run time's does.
        Removed with ``remove_kind`` (and with the stored kind).  A custom resource's
        versions other than its storage version (conversion ``None``).
        """
        stored, view = self._new_view(kind, convert)
        for entry in stored.current(kind.storage_prefix):
            view.load(old_kv(entry))
        view.mark_loaded(self.revision)

    def _new_view(self, kind, convert=None) -> tuple:
        """``(stored kind's cache, view)``: a version view of ``kind`` served (not yet
        loaded); ``ValueError`` unless its stored kind is served and loaded and it is
        not served yet."""
        prefix = kind.storage_prefix
        stored = self._kinds.get(prefix)
        if stored is None or not stored.loaded:
            raise ValueError(f"{kind.qualified_resource} is not served: no version to view")
        if kind.gvr in self._by_kind:
            raise ValueError(f"{kind.qualified_resource} {kind.version} is already served")
        view = KindCache(kind, self.clock, convert)
        self._by_kind[kind.gvr] = view
        self._views.setdefault(prefix, []).append(view)
        return stored, view

    def add_converted_version(self, kind, convert: Callable) -> None:
        """
        Serve ``kind`` as another version of the kind stored under its storage prefix,
        its objects made by ``convert(objects, api_version)`` (a Deferred: a custom
        resource's conversion webhook) asynchronously and in order
        (``webhookversions.ConvertingFeed``): the view loads once its first conversion
        is in (or has failed: its reads then say why).  ``ValueError`` as for
        ``add_version``; removed with ``remove_kind``.
        """
        stored, view = self._new_view(kind)
        feed = view.feed = webhookversions.ConvertingFeed(view, stored, convert,
                                                          lambda: self.revision, self.clock)
        feed.start()

    def _remove_view(self, view) -> None:
        prefix = view.kind.storage_prefix
        views = self._views.get(prefix) or []
        if view in views:
            views.remove(view)
        if not views:
            self._views.pop(prefix, None)
        self._by_kind.pop(view.kind.gvr, None)
        if view.feed is not None:
            view.feed.stop()
        view.remove()
        for f in list(self._on_kind_removed):
            f(view.kind)

    def remove_kind(self, kind) -> None:
        """
        Stop serving ``kind`` (added by ``add_kind``; built-in kinds stay:
        ``ValueError``), as upstream stops a removed CRD's cacher: events not yet sent
        go out, then every open watch of it ends (``watcher.kind_removed()``: the stream
        closes, no bookmark: there is nothing left to resume), its informers are shut
        down (``informing.py``), a pending ``add_kind`` fails with ``UnknownKindError``,
        its objects, history and watchers are let go, and its events are dropped from
        now on.  ``UnknownKindError`` for a kind not served.
        """
        gvr = kind.gvr
        cache = self._by_kind.get(gvr)
        if cache is None:
            raise unknown_kind(gvr)
        if gvr in self._builtin:
            raise ValueError(f"{kind.qualified_resource} {kind.version} is built in: it stays")
        prefix = cache.kind.storage_prefix
        if self._is_version_view(cache):
            self._remove_view(cache)
            return
        stored = self._stored_cache(prefix) or cache
        for view in list(self._views.get(prefix, ())):
            self._remove_view(view)
        self._by_kind.pop(gvr, None)
        self._loading.pop(prefix, None)
        self._kinds.pop(prefix, None)
        stored.remove()
        for f in list(self._on_kind_removed):
            f(stored.kind)

    def wait_loaded(self, kind, timeout: float) -> Deferred:
        """
        Deferred firing True once ``kind``'s objects are loaded, False after ``timeout``
        seconds or if it is removed first (``UnknownKindError`` at once for a kind not
        served).
        """
        cache = self.for_kind(kind)
        if cache.loaded:
            return succeed(True)
        d: Deferred[bool] = Deferred()

        def settle(result: bool) -> None:
            if not d.called:
                d.callback(result)
        cache.when_loaded(lambda: settle(True))
        cache.when_removed(lambda: settle(False))
        call = self.clock.callLater(timeout, settle, False)
        d.addBoth(lambda result: (call.active() and call.cancel(), result)[1])
        return d

    # -- following the storage -----------------------------------------------------------

    @inlineCallbacks
    def start(self):
        """Load every object at one revision, then follow changes from it."""
        result = yield self.storage.range("/registry/")
        for kv in result.kvs:
            cache = self._cache_for(kv.key)
            if cache is not None:
                cache.load(kv)
        self.revision = self.horizon = result.revision
        self._follow(result.revision)
        self.loaded = True
        for cache in list(self._kinds.values()):
            cache.mark_loaded(result.revision)
        waiting, self._on_loaded = self._on_loaded, []
        for f in waiting:
            f()

    def stop(self):
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        # Nothing more will arrive: whoever waits for a revision hears so now, and so
        # does whoever asks from now on; kinds still loading are not served.
        self._stopped = True
        waiters, self._waiters = self._waiters, []
        for _revision, d in waiters:
            d.callback(False)
        for load in list(self._loading.values()):
            self._abandon(Failure(RuntimeError("the watch cache stopped")), load)

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
        caches = list(self._kinds.values()) + [v for vs in self._views.values() for v in vs]
        dropped = max((cache.drop_before(cutoff) for cache in caches), default=0)
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
        loading = dict(self._loading)
        grouped.update((prefix, []) for prefix in loading)
        for kv in result.kvs:
            group = grouped.get(_prefix_of(kv.key))
            if group is not None:
                group.append(kv)
        for prefix, cache in list(self._kinds.items()):
            cache.replace(grouped[prefix], result.revision)
            for view in list(self._views.get(prefix, ())):
                if view.feed is not None:
                    view.feed.relisted()
                else:
                    view.replace(grouped[prefix], result.revision)
        # A kind still loading is loaded from this list: the events it kept are older.
        for prefix, load in loading.items():
            if self._loading.get(prefix) is load:
                self._finish(load, grouped[prefix], result.revision)
        # Events in the gap are unknown: no exact read or watch may start before here.
        self.revision = self.horizon = result.revision
        self._reached(result.revision)
        self._follow(result.revision)

    def _cache_for(self, key: str) -> Optional[KindCache]:
        return self._kinds.get(_prefix_of(key))

    def _on_event(self, event) -> None:
        key = event.kv.key
        cache = self._kinds.get(_prefix_of(key))
        self.revision = event.revision
        if cache is not None:
            cache.apply(event)
            if self._views:
                for view in self._views.get(_prefix_of(key), ()):
                    if view.feed is not None:
                        view.feed.offer(event)
                    else:
                        view.apply(event)
        elif self._loading:
            load = self._loading.get(_prefix_of(key))
            if load is not None:
                load.events.append(event)  # applied once its kind has loaded
        if self._waiters:
            self._reached(event.revision)

    def _reached(self, revision: int) -> None:
        ready = [w for w in self._waiters if w[0] <= revision]
        for entry in ready:
            self._waiters.remove(entry)
            entry[1].callback(True)

