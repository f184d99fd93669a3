"""The watch cache: loading, following the storage watch, relisting after a lost watch."""

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd.cache.watchcache import ADDED, DELETED, MODIFIED, WatchCache
from platformd.registry import core
from platformd.registry.catalog import builtin
from platformd.storage.memory import MemoryStorage

KEY = core.CONFIG_MAP.storage_key("default", "c")


class WatchCacheTests(SynchronousTestCase):
    def setUp(self):
        self.storage = MemoryStorage(Clock())
        self.successResultOf(self.storage.start())
        self.cache = WatchCache(self.storage, builtin(), Clock())
        self.kind = self.cache.for_kind(core.CONFIG_MAP)

    def test_load_then_follow(self):
        """Objects present at start are loaded; later writes arrive before their ack."""
        self.successResultOf(self.storage.create(KEY, b'{"metadata":{"name":"c"}}'))
        self.successResultOf(self.cache.start())
        self.assertEqual(self.kind.get(KEY).obj["metadata"]["name"], "c")
        seen = []
        self.kind.listeners.append(lambda t, new, old, rev: seen.append(t))
        other = core.CONFIG_MAP.storage_key("default", "d")
        d = self.storage.create(other, b'{"metadata":{"name":"d"}}')
        self.assertEqual(seen, [ADDED])
        kv = self.successResultOf(d)
        self.assertEqual(self.kind.get(other).obj["metadata"]["resourceVersion"],
                         str(kv.mod_revision))
        self.assertEqual(list(self.kind.keys_from(core.CONFIG_MAP.namespace_prefix("default"))),
                         [KEY, other])

    def test_encoded_once(self):
        """An object version's JSON bytes are computed once and shared."""
        self.successResultOf(self.cache.start())
        self.successResultOf(self.storage.create(KEY, b'{"metadata":{"name":"c"}}'))
        entry = self.kind.get(KEY)
        self.assertIs(entry.json, entry.json)

    def test_relist_after_lost_watch(self):
        """When the backend ends the watch, the cache lists again and reports the gap."""
        self.successResultOf(self.storage.create(KEY, b'{"metadata":{"name":"c"}}'))
        self.successResultOf(self.cache.start())
        seen = []
        self.kind.listeners.append(lambda t, new, old, rev: seen.append(t))
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
