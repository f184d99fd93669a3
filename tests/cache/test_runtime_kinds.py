"""
Kinds added to and removed from the watch cache at run time (``WatchCache.add_kind``,
``remove_kind``: the seam custom resources will use), over memory storage on a Clock
and over SQLite on the reactor: the load is consistent with the stream the cache
follows (writes during the load neither lost nor doubled), lists and watches keep the
resourceVersion rules, informers sync and are shut down, open watches end, memory is
let go, and the kind can come back clean.
"""

from __future__ import annotations

import gc

import attrs
import orjson
from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from platformd import errors
from platformd.cache.continuetokens import Snapshots
from platformd.cache.informers import (
    EventHandlers, FakeInformer, Informers, InformerStoppedError, UnknownKindError,
)
from platformd.cache.reads import ANY, CONTINUATION, EXACTLY, MOST_RECENT, NOT_OLDER, CacheReader
from platformd.cache.watchcache import CachedObject, WatchCache
from platformd.featuregates import FeatureGates
from platformd.registry import core
from platformd.registry.catalog import Catalog, builtin
from platformd.registry.kinds import configmap, tokenreview
from platformd.registry.store import GenericStore
from platformd.storage.interface import CompactedError
from platformd.storage.memory import MemoryStorage
from platformd.storage.sqlite import SQLiteStorage
from platformd.util.labelselectors import compile_selector
from tests.cache.test_reads import watch_options
from tests.stub import StubServer

#: Stand-ins for custom resources: a namespaced kind and a cluster-scoped one.
WIDGET = attrs.evolve(configmap.KIND, group="example.com", version="v1", kind="Widget",
                      plural="widgets", singular="widget", short_names=(),
                      definition_prefix="com.example.v1", presence={})
GIZMO = attrs.evolve(WIDGET, kind="Gizmo", plural="gizmos", singular="gizmo",
                     namespaced=False)


def body(name, namespace=None, labels=None, **data) -> bytes:
    meta: dict = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    if labels:
        meta["labels"] = labels
    return orjson.dumps({"metadata": meta, "data": data})


class HeldRanges:
    """
    ``storage`` whose range reads are answered only on ``release()`` while ``holding``:
    a kind's load in flight while writes go on.  Everything else is the storage's.
    """

    def __init__(self, storage):
        self._storage = storage
        self.holding = False
        self.held: list = []

    def __getattr__(self, name):
        return getattr(self._storage, name)

    def range(self, prefix, revision=None):
        d = self._storage.range(prefix, revision)
        if not self.holding:
            return d
        held: Deferred = Deferred()
        self.held.append(((prefix, revision), d, held))
        return held

    def release(self) -> None:
        self.holding = False
        held, self.held = self.held, []
        for _args, d, answer in held:
            d.chainDeferred(answer)


class Watcher:
    """A cache watcher: the events offered, and whether it heard of the kind's removal."""

    def __init__(self):
        self.events: list = []
        self.removed = 0

    def offer(self, event):
        self.events.append(event)

    def kind_removed(self):
        self.removed += 1

    def seen(self) -> list:
        return [(e.type, (e.new or e.old).name) for e in self.events]


class Recorder:
    def __init__(self):
        self.seen: list = []
        self.handlers = EventHandlers(
            on_add=lambda new: self.seen.append(("add", new.name)),
            on_update=lambda old, new: self.seen.append(("update", new.name)),
            on_delete=lambda old: self.seen.append(("delete", old.name)),
            on_stop=lambda: self.seen.append(("stop",)))


def names(entries) -> list:
    return [e.name for e in entries]


class Harness:
    """A started cache over ``storage`` (held ranges), its reader and informers."""

    def make(self, storage, clock):
        self.storage = storage
        self.held = HeldRanges(storage)
        self.clock = clock
        self.cache = WatchCache(self.held, builtin(), clock, history_ttl=60)
        self.snapshots = Snapshots(clock, 300)
        self.reader = CacheReader(self.cache, self.snapshots, self.held,
                                  FeatureGates.parse(""), wait=3.0)
        self.informers = Informers(self.cache)

    def assert_consistent(self, stored, kind):
        """The kind's cache is exactly ``stored`` (a range of its prefix at the cache's
        revision), and its history holds each revision once, in order."""
        cached = self.cache.for_kind(kind).current(kind.storage_prefix)
        self.assertEqual([(e.key, e.revision, e.create_revision, e.raw) for e in cached],
                         [(kv.key, kv.mod_revision, kv.create_revision, kv.value)
                          for kv in stored.kvs])
        revisions = [e.revision for e in self.cache.for_kind(kind).history]
        self.assertEqual(revisions, sorted(set(revisions)))


class MemoryTests(Harness, SynchronousTestCase):
    def setUp(self):
        clock = Clock()
        storage = MemoryStorage(clock)
        self.successResultOf(storage.start())
        self.make(storage, clock)
        self.successResultOf(self.cache.start())

    def put(self, kind, name, namespace=None, labels=None, **data):
        key = kind.storage_key(namespace, name)
        current = self.successResultOf(self.storage.get(key))
        value = body(name, namespace, labels, **data)
        if current is None:
            return self.successResultOf(self.storage.create(key, value)).mod_revision
        return self.successResultOf(
            self.storage.update(key, value, current.mod_revision)).mod_revision

    def delete(self, kind, name, namespace=None):
        return self.successResultOf(
            self.storage.delete(kind.storage_key(namespace, name))).mod_revision

    def add(self, kind):
        self.assertIsNone(self.successResultOf(self.cache.add_kind(kind)))

    def listing(self, kind, namespace="", plan=MOST_RECENT, rv=None, token="", limit=None):
        return self.successResultOf(self.reader.list(kind, namespace, plan, rv, token, limit))

    def status(self, d) -> errors.StatusError:
        return self.failureResultOf(d, errors.StatusError).value

    # -- before: an unknown kind -----------------------------------------------------------

    def test_unknown_kind_before_add(self):
        """Writes of a kind not served only move the revision on; nothing serves it."""
        revision = self.put(WIDGET, "w", "one")
        self.assertEqual(self.cache.revision, revision)
        with self.assertRaises(UnknownKindError) as raised:
            self.cache.for_kind(WIDGET)
        self.assertEqual(str(raised.exception), "no kind is served as 'widgets' in example.com/v1")
        self.assertRaises(UnknownKindError, self.informers.for_kind, WIDGET)
        self.assertRaises(KeyError, self.informers.informer, WIDGET.gvr)  # as before
        error = self.status(self.reader.list(WIDGET, "", MOST_RECENT, None))
        self.assertEqual((error.code, error.message),
                         (404, "the server could not find the requested resource"))
        self.assertEqual(self.status(self.reader.watch_start(WIDGET, "", watch_options())).code,
                         404)
        self.assertNotIn(WIDGET, self.cache.served())

    # -- adding ----------------------------------------------------------------------------

    def test_add_loads_what_is_stored(self):
        """A kind added at run time serves what was stored before, at the cache's revision."""
        self.put(WIDGET, "b", "one", labels={"tier": "x"})
        self.put(WIDGET, "a", "one")
        self.put(WIDGET, "c", "two", labels={"tier": "x"})
        self.put(core.CONFIG_MAP, "other", "one")
        self.add(WIDGET)
        self.assertIn(WIDGET, self.cache.served())
        listing = self.listing(WIDGET)
        self.assertEqual((names(listing.entries), listing.revision),
                         (["a", "b", "c"], self.cache.revision))
        self.assertEqual(names(self.listing(WIDGET, "one").entries), ["a", "b"])
        self.assertEqual(names(self.listing(WIDGET, "two", ANY).entries), ["c"])
        self.assertEqual(names(self.listing(core.CONFIG_MAP).entries), ["other"])
        entry = self.cache.for_kind(WIDGET).get(WIDGET.storage_key("one", "a"))
        self.assertEqual(entry.obj["metadata"]["resourceVersion"], str(entry.revision))
        lister = self.informers.for_kind(WIDGET).lister
        tier = compile_selector({"matchLabels": {"tier": "x"}})
        self.assertEqual(names(lister.list(selector=tier)), ["b", "c"])
        self.assertEqual(names(lister.list("one", tier)), ["b"])
        self.assertEqual(names(lister.list("three")), [])
        self.assertEqual(lister.get("two", "c").namespace, "two")
        self.assert_consistent(self.successResultOf(self.storage.range(WIDGET.storage_prefix)),
                               WIDGET)

    def test_cluster_scoped_kind(self):
        """A cluster-scoped kind: keys without a namespace, listed whole."""
        self.put(GIZMO, "g1", labels={"a": "b"})
        self.add(GIZMO)
        self.put(GIZMO, "g2")
        self.assertEqual(names(self.listing(GIZMO).entries), ["g1", "g2"])
        lister = self.informers.for_kind(GIZMO).lister
        self.assertEqual(lister.get(None, "g1").namespace, None)
        self.assertEqual(names(lister.list(selector=compile_selector(
            {"matchLabels": {"a": "b"}}))), ["g1"])

    def test_writes_during_the_load(self):
        """
        Creates, updates and deletes of the kind committed while its read is in flight
        are applied once, in order, on top of it: nothing lost, nothing doubled; the
        history holds them (a watch from the load's revision replays them).
        """
        self.put(WIDGET, "kept", "one", v="1")
        self.put(WIDGET, "gone", "one")
        self.put(WIDGET, "changed", "two", v="1")
        self.held.holding = True
        loaded = self.cache.add_kind(WIDGET)
        [((prefix, at), _d, _held)] = self.held.held
        self.assertEqual((prefix, at), (WIDGET.storage_prefix, self.cache.revision))
        informer = self.informers.for_kind(WIDGET)
        recorder = Recorder()
        informer.add_handler(recorder.handlers)
        self.assertFalse(informer.has_synced())
        self.assertEqual(informer.lister.list(), [])  # kept, for the kind's version
        # Meanwhile: writes of the kind (and of others) go on.
        during = [self.put(WIDGET, "new", "one"), self.put(WIDGET, "changed", "two", v="2"),
                  self.delete(WIDGET, "gone", "one"), self.put(core.CONFIG_MAP, "cm", "one"),
                  self.put(WIDGET, "changed", "two", v="3")]
        self.assertNoResult(loaded)
        self.assertEqual(recorder.seen, [])
        self.held.release()
        self.successResultOf(loaded)
        self.assertTrue(informer.has_synced())
        self.assertEqual(sorted(recorder.seen),
                         [("add", "changed"), ("add", "kept"), ("add", "new")])
        # The load moved the kind's version on: the lister's kept (empty) list is gone.
        self.assertEqual([e.name for e in informer.lister.list()], ["kept", "new", "changed"])
        self.assert_consistent(self.successResultOf(self.storage.range(WIDGET.storage_prefix)),
                               WIDGET)
        changed = self.cache.for_kind(WIDGET).get(WIDGET.storage_key("two", "changed"))
        self.assertEqual((changed.obj["data"], changed.revision), ({"v": "3"}, during[-1]))
        # The events of the load are its history: a watch from its revision gets them once.
        start = self.successResultOf(self.reader.watch_start(WIDGET, "", watch_options(at)))
        self.assertEqual([(e.type, e.key.rsplit("/", 1)[1], e.revision) for e in start.replay],
                         [("ADDED", "new", during[0]), ("MODIFIED", "changed", during[1]),
                          ("DELETED", "gone", during[2]), ("MODIFIED", "changed", during[4])])
        # Later changes reach the informer as for a built-in kind.
        self.put(WIDGET, "kept", "one", v="2")
        self.delete(WIDGET, "new", "one")
        self.assertEqual(recorder.seen[3:], [("update", "kept"), ("delete", "new")])

    def test_resource_version_rules(self):
        """The kind's history begins at its load: older versions are 410, later ones held."""
        before = self.put(WIDGET, "a", "one")
        self.put(core.CONFIG_MAP, "cm", "one")
        self.add(WIDGET)
        loaded_at = self.cache.revision
        later = self.put(WIDGET, "b", "one")
        self.delete(WIDGET, "a", "one")
        # Exact at the load's revision and after: rebuilt from the held history.
        self.assertEqual(names(self.listing(WIDGET, "one", EXACTLY, loaded_at).entries), ["a"])
        self.assertEqual(names(self.listing(WIDGET, "one", EXACTLY, later).entries), ["a", "b"])
        # Before it: the kind's history does not reach there (a built-in kind's does).
        error = self.status(self.reader.list(WIDGET, "one", EXACTLY, before))
        self.assertEqual((error.code, error.reason, error.message),
                         (410, "Expired", f"too old resource version: {before} ({loaded_at})"))
        self.assertEqual(names(self.listing(core.CONFIG_MAP, "one", EXACTLY, before).entries), [])
        self.assertEqual(self.status(self.reader.watch_start(
            WIDGET, "", watch_options(before))).code, 410)
        # Not older than an old version: the current state.
        self.assertEqual(names(self.listing(WIDGET, "one", NOT_OLDER, before).entries), ["b"])
        # A watch from the load's revision replays what followed; a future one waits.
        start = self.successResultOf(self.reader.watch_start(WIDGET, "one",
                                                             watch_options(loaded_at)))
        self.assertEqual([(e.type, e.key.rsplit("/", 1)[1]) for e in start.replay],
                         [("ADDED", "b"), ("DELETED", "a")])
        d = self.reader.watch_start(WIDGET, "", watch_options(self.cache.revision + 1))
        self.assertNoResult(d)
        self.put(WIDGET, "c", "two")
        self.assertEqual(self.successResultOf(d).revision, self.cache.revision)
        # Pages: a continue token reads the first page's snapshot.
        first = self.listing(WIDGET, "", MOST_RECENT, limit=1)
        token = self.reader.continue_token(first, first.entries[0].key + "\x00")
        self.put(WIDGET, "d", "two")
        page = self.listing(WIDGET, "", CONTINUATION, token=token)  # its snapshot: no d
        self.assertEqual((names(page.entries), page.start, page.revision),
                         (["b", "c"], first.entries[0].key + "\x00", first.revision))

    def test_requests_wait_for_the_load(self):
        """A list or watch of a kind still loading waits for it; too long is 429."""
        self.put(WIDGET, "a", "one")
        self.held.holding = True
        loaded = self.cache.add_kind(WIDGET)
        listing = self.reader.list(WIDGET, "", MOST_RECENT, None)
        watch = self.reader.watch_start(WIDGET, "", watch_options())
        self.assertNoResult(listing)
        self.assertNoResult(watch)
        self.assertNotIn(WIDGET, self.cache.served())
        self.clock.advance(1)
        self.held.release()
        self.successResultOf(loaded)
        self.assertEqual(names(self.successResultOf(listing).entries), ["a"])
        self.assertEqual(names(self.successResultOf(watch).initial), ["a"])
        # A load that takes longer than the wait: upstream's "not ready" answer.
        self.held.holding = True
        loaded = self.cache.add_kind(GIZMO)
        listing = self.reader.list(GIZMO, "", MOST_RECENT, None)
        self.clock.advance(3)
        error = self.status(listing)
        self.assertEqual((error.code, error.reason, error.message, error.retry_after),
                         (429, "TooManyRequests", "storage is (re)initializing", 1))
        self.held.release()
        self.successResultOf(loaded)
        self.assertEqual(self.listing(GIZMO).entries, [])

    def test_informer_made_before_the_load_syncs_after(self):
        """An informer of a kind being added: not synced, then the objects as adds."""
        self.put(WIDGET, "a", "one")
        self.held.holding = True
        loaded = self.cache.add_kind(WIDGET)
        informer = self.informers.for_kind(WIDGET)
        self.assertIs(self.informers.informer(WIDGET.gvr), informer)
        self.assertFalse(informer.has_synced())
        self.assertFalse(informer.is_stopped())
        recorder = Recorder()
        informer.add_handler(recorder.handlers)
        self.held.release()
        self.successResultOf(loaded)
        self.assertTrue(informer.has_synced())
        late = Recorder()
        informer.add_handler(late.handlers)
        self.put(WIDGET, "a", "one", v="2")
        self.assertEqual(recorder.seen, [("add", "a"), ("update", "a")])
        self.assertEqual(late.seen, [("add", "a"), ("update", "a")])

    def test_add_before_start(self):
        """A kind added before the cache starts is loaded with the built-in kinds."""
        clock = Clock()
        storage = MemoryStorage(clock)
        self.successResultOf(storage.start())
        self.successResultOf(storage.create(WIDGET.storage_key("one", "a"), body("a", "one")))
        cache = WatchCache(storage, builtin(), clock)
        loaded = cache.add_kind(WIDGET)
        informer = Informers(cache).for_kind(WIDGET)
        self.assertNoResult(loaded)
        self.successResultOf(cache.start())
        self.successResultOf(loaded)
        self.assertTrue(informer.has_synced())
        self.assertEqual(names(informer.lister.list()), ["a"])

    def test_relist_during_the_load(self):
        """The storage watch lost during a load: the relist loads the kind too."""
        self.put(WIDGET, "a", "one")
        self.held.holding = True
        loaded = self.cache.add_kind(WIDGET)
        watch = self.cache._watch
        self.storage._watchers.discard(watch)
        self.put(WIDGET, "b", "one")  # never delivered: the watch is lost
        self.held.holding = False
        watch.fail(RuntimeError("connection lost"))
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        self.successResultOf(loaded)
        self.assertEqual(names(self.listing(WIDGET).entries), ["a", "b"])
        self.held.release()  # the load's own read, late: superseded
        self.assertEqual(names(self.listing(WIDGET).entries), ["a", "b"])
        self.put(WIDGET, "c", "one")
        self.assert_consistent(self.successResultOf(self.storage.range(WIDGET.storage_prefix)),
                               WIDGET)

    def test_failed_load(self):
        """A load whose read fails: add_kind fails with it, the kind is not served."""
        self.held.holding = True
        loaded = self.cache.add_kind(WIDGET)
        [(_args, d, held)] = self.held.held
        self.held.held = []
        held.errback(RuntimeError("disk on fire"))
        self.failureResultOf(loaded, RuntimeError)
        self.assertRaises(UnknownKindError, self.cache.for_kind, WIDGET)
        self.held.holding = False
        self.add(WIDGET)  # and can be added again

    def test_read_compacted_meanwhile(self):
        """
        The load's read finds its revision compacted (another server compacted past this
        cache): it reads again at the cache's newer revision, keeping only the events
        after that one.
        """
        self.put(WIDGET, "a", "one")
        self.held.holding = True
        loaded = self.cache.add_kind(WIDGET)
        [((_prefix, at), _d, held)] = self.held.held
        self.held.held = []
        self.put(WIDGET, "b", "one")
        self.put(WIDGET, "a", "one", v="2")
        self.held.holding = False
        held.errback(CompactedError(at, at + 1))
        self.successResultOf(loaded)
        self.assertEqual(list(self.cache.for_kind(WIDGET).history), [])
        self.assertEqual(self.status(self.reader.watch_start(
            WIDGET, "", watch_options(at))).code, 410)
        self.put(WIDGET, "c", "one")
        self.assert_consistent(self.successResultOf(self.storage.range(WIDGET.storage_prefix)),
                               WIDGET)

    def test_what_cannot_be_added_or_removed(self):
        """Built-in kinds stay; a kind is added once; a review kind has nothing to cache."""
        with self.assertRaises(ValueError):
            self.cache.remove_kind(core.CONFIG_MAP)
        with self.assertRaises(ValueError):
            self.cache.add_kind(core.CONFIG_MAP)
        with self.assertRaises(ValueError):
            self.cache.add_kind(tokenreview.KIND)
        self.add(WIDGET)
        with self.assertRaises(ValueError):
            self.cache.add_kind(WIDGET)
        with self.assertRaises(ValueError):  # another version, same storage
            self.cache.add_kind(attrs.evolve(WIDGET, version="v2"))
        self.assertRaises(UnknownKindError, self.cache.remove_kind, GIZMO)
        self.cache.stop()
        self.failureResultOf(self.cache.add_kind(GIZMO), RuntimeError)

    # -- removing ----------------------------------------------------------------------------

    def test_remove_with_open_watches(self):
        """
        Removing a kind: pending events go out, then every watcher hears kind_removed;
        informers stop (on_stop, nothing after); lists are 404; its events are ignored.
        """
        self.put(WIDGET, "a", "one")
        self.add(WIDGET)
        watcher, elsewhere = Watcher(), Watcher()
        self.reader.subscribe(WIDGET, "one", watcher)
        self.reader.subscribe(core.CONFIG_MAP, "", elsewhere)
        informer = self.informers.for_kind(WIDGET)
        recorder = Recorder()
        informer.add_handler(recorder.handlers)
        self.put(WIDGET, "b", "one")  # not yet fanned out (after this turn)
        self.put(WIDGET, "x", "two")  # another namespace: not this watcher's
        self.cache.remove_kind(WIDGET)
        self.assertEqual((watcher.seen(), watcher.removed), ([("ADDED", "b")], 1))
        self.assertEqual(elsewhere.removed, 0)
        self.assertEqual(recorder.seen, [("add", "a"), ("add", "b"), ("add", "x"), ("stop",)])
        self.assertTrue(informer.is_stopped())
        self.assertTrue(informer.has_synced())  # as upstream's stopped informer
        self.assertEqual(informer.lister.list(), [])
        self.assertIsNone(informer.lister.get("one", "a"))
        with self.assertRaises(InformerStoppedError):
            informer.add_handler(Recorder().handlers)
        self.assertRaises(UnknownKindError, self.informers.for_kind, WIDGET)
        self.assertEqual(self.status(self.reader.list(WIDGET, "", MOST_RECENT, None)).code, 404)
        self.reader.unsubscribe(WIDGET, "one", watcher)  # the stream's own close: nothing
        late = Watcher()
        self.reader.subscribe(WIDGET, "", late)  # a watch that started before: ends at once
        self.assertEqual(late.removed, 1)
        revision = self.put(WIDGET, "c", "one")
        self.clock.advance(0)
        self.assertEqual((self.cache.revision, len(watcher.events)), (revision, 1))
        self.assertNotIn(WIDGET, self.cache.served())
        self.assertNotIn(WIDGET, [kind for kind, _counts in self.cache.kind_counts()])
        self.assertEqual(recorder.seen[-1], ("stop",))

    def test_removed_by_its_own_handler(self):
        """A handler that removes the kind (a controller reacting to an object): the other
        handlers hear on_stop and not the rest of that event."""
        self.add(WIDGET)
        informer = self.informers.for_kind(WIDGET)
        informer.add_handler(EventHandlers(on_add=lambda new: self.cache.remove_kind(WIDGET)))
        recorder = Recorder()
        informer.add_handler(recorder.handlers)
        self.put(WIDGET, "a", "one")
        self.assertEqual(recorder.seen, [("stop",)])
        self.assertRaises(UnknownKindError, self.cache.for_kind, WIDGET)

    def test_added_by_a_handler(self):
        """add_kind from a handler of another kind (as a definition's controller will):
        loaded at that event's revision."""
        informer = self.informers.for_kind(core.CONFIG_MAP)
        added = []
        informer.add_handler(EventHandlers(
            on_add=lambda new: added.append(self.cache.add_kind(WIDGET))))
        self.put(WIDGET, "a", "one")
        revision = self.put(core.CONFIG_MAP, "definition", "one")
        self.successResultOf(added[0])
        self.assertEqual(self.cache.horizon_of(WIDGET), revision)
        self.put(WIDGET, "b", "one")
        self.assertEqual(names(self.listing(WIDGET).entries), ["a", "b"])

    def test_remove_releases_memory(self):
        """Once removed, no object of the kind is held: not by the cache, its history,
        its informer's lister, nor the snapshots of paged lists."""
        # A namespace no other test uses: objects other tests leave to the collector
        # (their servers' caches) are not counted.
        namespace = "releases-memory"
        for n in range(20):
            self.put(WIDGET, f"w{n}", namespace, v="x" * 100)
        self.add(WIDGET)
        self.put(WIDGET, "w0", namespace, v="changed")  # one event in the history
        informer = self.informers.for_kind(WIDGET)
        informer.add_handler(EventHandlers())
        self.listing(WIDGET, namespace, limit=5)  # a snapshot kept for the next pages
        self.assertEqual(len(self.snapshots), 1)
        self.assertEqual(self.held_objects(WIDGET, namespace), 21)
        kind_cache = self.cache.for_kind(WIDGET)
        self.cache.remove_kind(WIDGET)
        self.assertEqual((len(kind_cache), len(kind_cache.history), kind_cache.watchers),
                         (0, 0, {}))
        self.assertEqual(kind_cache.current(WIDGET.storage_prefix), [])
        self.assertEqual(len(self.snapshots), 0)
        self.assertEqual(self.held_objects(WIDGET, namespace), 0)

    def held_objects(self, kind, namespace: str) -> int:
        """Live ``CachedObject``s of ``kind`` in ``namespace`` anywhere in the process."""
        gc.collect()
        prefix = f"{kind.storage_prefix}{namespace}/"
        return sum(1 for o in gc.get_objects()
                   if isinstance(o, CachedObject) and o.key.startswith(prefix))

    def test_remove_while_loading(self):
        """A kind removed before its load is in: add_kind fails, the late read is ignored."""
        self.held.holding = True
        loaded = self.cache.add_kind(WIDGET)
        informer = self.informers.for_kind(WIDGET)
        recorder = Recorder()
        informer.add_handler(recorder.handlers)
        self.put(WIDGET, "a", "one")
        self.cache.remove_kind(WIDGET)
        error = self.failureResultOf(loaded, UnknownKindError).value
        self.assertEqual(str(error), "widgets.example.com v1 was removed before it loaded")
        self.assertEqual(recorder.seen, [("stop",)])
        self.assertFalse(informer.has_synced())
        self.held.release()
        self.assertRaises(UnknownKindError, self.cache.for_kind, WIDGET)

    def test_added_again_clean(self):
        """Removed and added again: a fresh load, a new informer, history from the new load."""
        first = self.put(WIDGET, "a", "one")
        self.add(WIDGET)
        old = self.informers.for_kind(WIDGET)
        self.cache.remove_kind(WIDGET)
        self.delete(WIDGET, "a", "one")  # while not served
        self.put(WIDGET, "b", "one")
        self.add(WIDGET)
        informer = self.informers.for_kind(WIDGET)
        self.assertIsNot(informer, old)
        self.assertTrue(old.is_stopped())
        self.assertTrue(informer.has_synced())
        self.assertFalse(informer.is_stopped())
        self.assertEqual(names(informer.lister.list()), ["b"])
        self.assertEqual(names(self.listing(WIDGET).entries), ["b"])
        self.assertEqual(self.status(self.reader.watch_start(
            WIDGET, "", watch_options(first))).code, 410)
        self.assertEqual(list(self.cache.for_kind(WIDGET).history), [])
        self.put(WIDGET, "c", "one")
        self.assert_consistent(self.successResultOf(self.storage.range(WIDGET.storage_prefix)),
                               WIDGET)


class FakeInformerStopTests(SynchronousTestCase):
    def test_stop(self):
        """The fake stops as a removed kind's informer does."""
        fake = FakeInformer([{"metadata": {"name": "a", "namespace": "n"}}])
        recorder = Recorder()
        fake.add_handler(recorder.handlers)
        fake.stop()
        fake.stop()
        self.assertEqual(recorder.seen, [("add", "a"), ("stop",)])
        self.assertTrue(fake.is_stopped())
        self.assertEqual(fake.lister.list(), [])
        self.assertRaises(InformerStoppedError, fake.add_handler, Recorder().handlers)


class CatalogTests(SynchronousTestCase):
    def test_builtin_kinds_are_fixed(self):
        """The built-in catalog's kinds cannot be removed; a kind added later can."""
        catalog = builtin()
        self.assertTrue(catalog.fixed(core.CONFIG_MAP))
        with self.assertRaises(ValueError):
            catalog.remove(core.CONFIG_MAP)
        self.assertIs(catalog.lookup("", "v1", "configmaps"), core.CONFIG_MAP)
        catalog.add(WIDGET)
        self.assertFalse(catalog.fixed(WIDGET))
        catalog.remove(WIDGET)
        self.assertIsNone(catalog.lookup("example.com", "v1", "widgets"))
        self.assertFalse(Catalog([WIDGET]).fixed(WIDGET))


class SQLiteTests(Harness, TestCase):
    """Over SQLite on the reactor: its reads and watch deliveries are really concurrent."""

    timeout = 30

    async def asyncSetUp(self):
        storage = SQLiteStorage(reactor, self.mktemp())
        await storage.start()
        self.addCleanup(storage.stop)
        self.make(storage, reactor)
        await self.cache.start()
        self.addCleanup(self.cache.stop)

    def setUp(self):
        return Deferred.fromCoroutine(self.asyncSetUp())

    async def test_add_while_writes_are_in_flight(self):
        """Writes of the kind issued around and during its load: the cache ends as stored."""
        for n in range(30):
            await self.storage.create(WIDGET.storage_key("one", f"w{n:02}"), body(f"w{n:02}"))
        writes = [self.storage.update(WIDGET.storage_key("one", f"w{n:02}"), body("x", v=str(n)))
                  for n in range(0, 30, 2)]
        loaded = self.cache.add_kind(WIDGET)
        writes += [self.storage.delete(WIDGET.storage_key("one", f"w{n:02}"))
                   for n in range(1, 30, 4)]
        writes += [self.storage.create(WIDGET.storage_key("two", f"n{n}"), body(f"n{n}"))
                   for n in range(10)]
        await loaded
        await gatherResults(writes)  # SQLite's watch delivers each before its answer
        stored = await self.storage.range(WIDGET.storage_prefix, self.cache.revision)
        self.assert_consistent(stored, WIDGET)
        listing = await self.reader.list(WIDGET, "two", MOST_RECENT, None)
        self.assertEqual(names(listing.entries), [f"n{n}" for n in range(10)])

    async def test_held_load_then_remove_with_a_watch(self):
        """A load held while writes commit, then served; removed with a watcher open."""
        await self.storage.create(WIDGET.storage_key("one", "a"), body("a"))
        self.held.holding = True
        loaded = self.cache.add_kind(WIDGET)
        informer = self.informers.for_kind(WIDGET)
        recorder = Recorder()
        informer.add_handler(recorder.handlers)
        await self.storage.create(WIDGET.storage_key("one", "b"), body("b"))
        await self.storage.delete(WIDGET.storage_key("one", "a"))
        self.held.release()
        await loaded
        self.assertEqual(recorder.seen, [("add", "b")])
        watcher = Watcher()
        self.reader.subscribe(WIDGET, "", watcher)
        await self.storage.create(WIDGET.storage_key("one", "c"), body("c"))
        self.cache.remove_kind(WIDGET)
        self.assertEqual((watcher.seen(), watcher.removed), ([("ADDED", "c")], 1))
        self.assertEqual(recorder.seen[-2:], [("add", "c"), ("stop",)])
        await self.storage.create(WIDGET.storage_key("one", "d"), body("d"))
        await self.cache.add_kind(WIDGET)
        listing = await self.reader.list(WIDGET, "", MOST_RECENT, None)
        self.assertEqual(names(listing.entries), ["b", "c", "d"])


class ServedTests(SynchronousTestCase):
    """
    The seam end to end on the in-memory server: a kind loaded, given a store and
    routed at run time is written, listed and watched over HTTP; removed, its open
    watch's response ends and its path is 404.
    """

    def setUp(self):
        self.stub = StubServer()
        self.addCleanup(self.stub.stop)
        components = self.stub.components
        self.assertIsNone(self.successResultOf(components.cache.add_kind(WIDGET)))
        components.stores[WIDGET.gvr] = GenericStore(
            WIDGET, components.storage, components.cache, components.clock,
            components.admission)
        components.catalog.add(WIDGET)
        self.client = self.stub.client()

    def test_served_then_removed(self):
        path = "/apis/example.com/v1/namespaces/default/widgets"
        created = self.client.post(path, {"metadata": {"name": "w", "labels": {"a": "b"}},
                                          "data": {"k": "v"}})
        self.assertEqual(created.code, 201, created.body)
        rv = created.json()["metadata"]["resourceVersion"]
        listed = self.client.get(path + "?labelSelector=a%3Db")
        self.assertEqual([i["metadata"]["name"] for i in listed.json()["items"]], ["w"])
        watch = self.client.watch(f"{path}?watch=1&allowWatchBookmarks=true&resourceVersion={rv}")
        self.client.delete(path + "/w")
        self.assertEqual(watch.types(), ["DELETED"])
        components = self.stub.components
        components.catalog.remove(WIDGET)
        del components.stores[WIDGET.gvr]
        components.cache.remove_kind(WIDGET)
        self.stub.flush()
        self.assertTrue(watch.ended)
        self.assertEqual(watch.types(), ["DELETED"])  # and no bookmark
        self.assertEqual(self.client.get(path).code, 404)
