"""The watch cache: loading, following the storage watch, relisting after a lost watch."""

import orjson
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.cache.watchcache import ADDED, DELETED, MODIFIED, CorruptObjectError, WatchCache
from platformd.registry import core
from platformd.registry.catalog import builtin
from platformd.storage.memory import MemoryStorage

KEY = core.CONFIG_MAP.storage_key("default", "c")


class CacheTestCase(SynchronousTestCase):
    """A cache over memory storage, not started; ``kind`` is its ConfigMap cache."""

    def setUp(self):
        self.storage = MemoryStorage(Clock())
        self.successResultOf(self.storage.start())
        self.cache = WatchCache(self.storage, builtin(), Clock())
        self.kind = self.cache.for_kind(core.CONFIG_MAP)


class WatchCacheTests(CacheTestCase):

    def test_load_then_follow(self):
        """Objects present at start are loaded; later writes arrive before their ack."""
        self.successResultOf(self.storage.create(KEY, b'{"metadata":{"name":"c"}}'))
        self.successResultOf(self.cache.start())
        self.assertEqual(self.kind.get(KEY).obj["metadata"]["name"], "c")
        seen = []
        self.kind.add_listener(lambda t, new, old, rev: seen.append(t))
        other = core.CONFIG_MAP.storage_key("default", "d")
        d = self.storage.create(other, b'{"metadata":{"name":"d"}}')
        self.assertEqual(seen, [ADDED])
        kv = self.successResultOf(d)
        self.assertEqual(self.kind.get(other).obj["metadata"]["resourceVersion"],
                         str(kv.mod_revision))
        self.assertEqual([e.key for e in self.kind.current(
            core.CONFIG_MAP.namespace_prefix("default"))], [KEY, other])

    def test_listener_of_some_types(self):
        """A listener named for some change types is called for those alone."""
        self.successResultOf(self.cache.start())
        seen = []
        self.kind.add_listener(lambda t, new, old, rev: seen.append(t), frozenset([DELETED]))
        self.successResultOf(self.storage.create(KEY, b'{"metadata":{"name":"c"}}'))
        current = self.successResultOf(self.storage.get(KEY))
        self.successResultOf(self.storage.update(
            KEY, b'{"metadata":{"name":"c","labels":{"a":"b"}}}', current.mod_revision))
        self.assertEqual(seen, [])
        self.successResultOf(self.storage.delete(KEY))
        self.assertEqual(seen, [DELETED])

    def test_encoded_once(self):
        """An object version's JSON bytes are computed once and shared."""
        self.successResultOf(self.cache.start())
        self.successResultOf(self.storage.create(KEY, b'{"metadata":{"name":"c"}}'))
        entry = self.kind.get(KEY)
        self.assertIs(entry.json, entry.json)

    def test_one_byte_form_per_version(self):
        """
        An object version holds its stored bytes until its JSON is asked for, then the
        JSON alone: ``raw`` is still the stored bytes, ``obj`` and a deletion's copy
        (``at``) carry the right resourceVersion.
        """
        stored = b'{"metadata":{"name":"c","uid":"u"},"data":{"k":"v"}}'
        self.successResultOf(self.cache.start())
        kv = self.successResultOf(self.storage.create(KEY, stored))
        entry = self.kind.get(KEY)
        self.assertEqual(entry.raw, stored)
        body = entry.json
        self.assertEqual(orjson.loads(body)["metadata"]["resourceVersion"], str(kv.mod_revision))
        self.assertIs(entry._data, body)  # the stored bytes are let go
        self.assertIs(entry.json, body)
        self.assertEqual(entry.raw, stored)
        self.assertEqual(entry.obj["metadata"]["resourceVersion"], str(kv.mod_revision))
        gone = entry.at(kv.mod_revision + 5)
        self.assertEqual(gone.raw, stored)
        self.assertEqual(orjson.loads(gone.json)["metadata"]["resourceVersion"],
                         str(kv.mod_revision + 5))
        self.assertEqual(gone.obj["metadata"]["resourceVersion"], str(kv.mod_revision + 5))
        self.assertEqual(gone.obj["data"], {"k": "v"})
        self.assertEqual(entry.mutable(), orjson.loads(body))

    def test_frames_made_on_demand(self):
        """An event holds no frames until one is asked for; each is made once."""
        self.successResultOf(self.cache.start())
        self.successResultOf(self.storage.create(KEY, b'{"metadata":{"name":"c"}}'))
        [event] = self.kind.history
        self.assertIsNone(event._frames)
        calls = []

        def encode(type_, entry):
            calls.append(type_)
            return b"frame"
        self.assertEqual(event.frame(ADDED, "json", encode), b"frame")
        self.assertEqual(event.frame(ADDED, "json", encode), b"frame")
        self.assertEqual(calls, [ADDED])

    def test_relist_after_lost_watch(self):
        """When the backend ends the watch, the cache lists again and reports the gap."""
        self.successResultOf(self.storage.create(KEY, b'{"metadata":{"name":"c"}}'))
        self.successResultOf(self.cache.start())
        seen = []
        self.kind.add_listener(lambda t, new, old, rev: seen.append(t))
        watch = self.cache._watch
        # The watch is lost (the backend drops it): writes happen that it never delivers.
        self.storage._watchers.discard(watch)
        current = self.successResultOf(self.storage.get(KEY))
        self.successResultOf(self.storage.update(KEY, b'{"metadata":{"name":"c","labels":{"a":"b"}}}',
                                                 current.mod_revision))
        added = core.CONFIG_MAP.storage_key("default", "e")
        self.successResultOf(self.storage.create(added, b'{"metadata":{"name":"e"}}'))
        self.assertEqual(seen, [])
        watch.fail(RuntimeError("connection lost"))
        self.assertEqual(sorted(seen), sorted([MODIFIED, ADDED]))
        self.assertEqual(self.kind.get(KEY).obj["metadata"]["labels"], {"a": "b"})
        self.assertEqual(self.cache.revision, self.storage.revision)
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)
        d = self.storage.delete(added)
        self.successResultOf(d)
        self.assertEqual(seen[-1], DELETED)


class FieldOrderTests(CacheTestCase):
    """Objects come out of the cache in upstream's field order (encoding/json's)."""

    def test_resource_version_after_uid(self):
        """resourceVersion is put at ObjectMeta's place for it (after uid), not at the end."""
        self.successResultOf(self.cache.start())
        kv = self.successResultOf(self.storage.create(
            KEY, b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c",'
                 b'"namespace":"default","uid":"u","creationTimestamp":"2024-01-02T03:04:05Z"}}'))
        self.assertEqual(self.kind.get(KEY).json,
                         b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"c",'
                         b'"namespace":"default","uid":"u","resourceVersion":"%d",'
                         b'"creationTimestamp":"2024-01-02T03:04:05Z"}}' % kv.mod_revision)

    def test_store_of_a_previous_version(self):
        """
        An object a previous version stored (apiVersion first, fields and map keys in
        the client's order) is served in upstream's order: loaded at start, or arriving
        through the watch.
        """
        old = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"b":"1","a":"2"},'
               b'"creationTimestamp":"2024-01-02T03:04:05Z","uid":"u","namespace":"default",'
               b'"name":"c"},"data":{"y":"1","x":"2"},"immutable":false}')
        first = self.successResultOf(self.storage.create(KEY, old))
        self.successResultOf(self.cache.start())
        other = core.CONFIG_MAP.storage_key("default", "d")
        second = self.successResultOf(self.storage.create(other, old.replace(b'"c"', b'"d"')))
        for key, name, kv in ((KEY, b"c", first), (other, b"d", second)):
            self.assertEqual(self.kind.get(key).json,
                             b'{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"%s",'
                             b'"namespace":"default","uid":"u","resourceVersion":"%d",'
                             b'"creationTimestamp":"2024-01-02T03:04:05Z",'
                             b'"labels":{"a":"2","b":"1"}},"immutable":false,'
                             b'"data":{"x":"2","y":"1"}}' % (name, kv.mod_revision))

    def test_undecodable_old_bytes_still_reported(self):
        """Bytes that only look like an old object are left for the cache to report."""
        self.successResultOf(self.storage.create(KEY, b'{"apiVersion":'))
        self.successResultOf(self.cache.start())
        self.assertRaises(CorruptObjectError, lambda: self.kind.get(KEY).obj)


class _Offered:
    """A watcher that takes events one at a time (``offer``) only."""

    def __init__(self):
        self.calls: list = []

    def offer(self, event):
        self.calls.append(("offer", [event.revision]))


class _Batched(_Offered):
    """A watcher that also takes a turn's events at once (``offer_many``)."""

    def offer_many(self, events):
        self.calls.append(("offer_many", [e.revision for e in events]))


class FanOutTests(SynchronousTestCase):
    """A turn's events reach each watcher once per turn, in order, none lost."""

    def setUp(self):
        self.clock = Clock()
        self.storage = MemoryStorage(Clock())
        self.successResultOf(self.storage.start())
        self.cache = WatchCache(self.storage, builtin(), self.clock)
        self.successResultOf(self.cache.start())
        self.kind = self.cache.for_kind(core.CONFIG_MAP)

    def create(self, namespace: str, name: str) -> int:
        kv = self.successResultOf(self.storage.create(
            core.CONFIG_MAP.storage_key(namespace, name),
            b'{"metadata":{"name":"%s","namespace":"%s"}}' % (name.encode(), namespace.encode())))
        return kv.mod_revision

    def test_one_turn_several_events(self):
        """
        Several events of one turn: a watcher with ``offer_many`` is given its own (its
        namespace's, or every namespace's) in one call, in revision order; one without it
        is offered them one by one, in order; another namespace's watcher hears nothing
        of them.
        """
        batched, every, single, elsewhere = _Batched(), _Batched(), _Offered(), _Batched()
        self.kind.add_watcher("a", batched)
        self.kind.add_watcher("", every)
        self.kind.add_watcher("a", single)
        self.kind.add_watcher("c", elsewhere)
        revisions = [self.create("a", "x"), self.create("b", "y"), self.create("a", "z")]
        self.assertEqual(batched.calls + every.calls + single.calls, [])  # after the turn
        self.clock.advance(0)
        in_a = [revisions[0], revisions[2]]
        self.assertEqual(batched.calls, [("offer_many", in_a)])
        self.assertEqual(every.calls, [("offer_many", revisions)])
        self.assertEqual(single.calls, [("offer", [r]) for r in in_a])
        self.assertEqual(elsewhere.calls, [])

    def test_one_event(self):
        """A turn's one event is offered as itself."""
        batched = _Batched()
        self.kind.add_watcher("a", batched)
        revision = self.create("a", "x")
        self.clock.advance(0)
        self.assertEqual(batched.calls, [("offer", [revision])])
