"""
The cache reader (cache/reads.py): spec 4.9's list and watch tables answered from the
watch cache on a Clock — which revision each plan means, waiting for a version not yet
seen (504), versions gone (410), continuation scoped to its collection.
"""

from types import SimpleNamespace

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd import errors
from platformd.cache.continuetokens import Snapshots
from platformd.cache.reads import (
    ANY, CONTINUATION, EXACTLY, MOST_RECENT, NOT_OLDER, CacheReader,
)
from platformd.cache.watchcache import WatchCache
from platformd.featuregates import FeatureGates
from platformd.registry import core
from platformd.registry.catalog import builtin
from platformd.storage.memory import MemoryStorage

CM = core.CONFIG_MAP


def watch_options(rv=None, initial=None, bookmarks=False):
    return SimpleNamespace(resource_version=rv, send_initial_events=initial,
                           allow_bookmarks=bookmarks)


class CacheReaderTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.storage = MemoryStorage(self.clock)
        self.successResultOf(self.storage.start())
        self.cache = WatchCache(self.storage, builtin(), self.clock, history_ttl=60)
        self.successResultOf(self.cache.start())
        self.reader = CacheReader(self.cache, Snapshots(self.clock, 300), self.storage,
                                  FeatureGates.parse(""), wait=3.0)
        self.revisions = [self.put("a", "one"), self.put("b", "one"), self.put("c", "two")]

    def put(self, name, namespace):
        kv = self.successResultOf(self.storage.create(
            CM.storage_key(namespace, name),
            b'{"metadata":{"name":"%s","namespace":"%s"}}' % (name.encode(), namespace.encode())))
        return kv.mod_revision

    def names(self, listing):
        return [e.name for e in listing.entries]

    def listing(self, namespace, plan, rv=None, token="", limit=None):
        return self.successResultOf(self.reader.list(CM, namespace, plan, rv, token, limit))

    def failure(self, d):
        return self.failureResultOf(d, errors.StatusError).value

    def test_most_recent_and_any(self):
        for plan in (MOST_RECENT, ANY):
            listing = self.listing("one", plan)
            self.assertEqual((self.names(listing), listing.revision),
                             (["a", "b"], self.revisions[-1]))
        self.assertEqual(self.names(self.listing("", MOST_RECENT)), ["a", "b", "c"])

    def test_exact_rebuilds_the_past(self):
        self.successResultOf(self.storage.delete(CM.storage_key("one", "a")))
        listing = self.listing("one", EXACTLY, self.revisions[0])
        self.assertEqual((self.names(listing), listing.revision), (["a"], self.revisions[0]))
        self.assertEqual(self.names(self.listing("one", MOST_RECENT)), ["b"])

    def test_not_older_waits_then_504(self):
        future = self.revisions[-1] + 1
        d = self.reader.list(CM, "one", NOT_OLDER, future)
        self.assertNoResult(d)
        self.put("d", "one")  # the version arrives within the wait
        self.assertEqual(self.names(self.successResultOf(d)), ["a", "b", "d"])
        d = self.reader.list(CM, "one", NOT_OLDER, future + 5)
        self.clock.advance(3.0)
        error = self.failure(d)
        self.assertEqual((error.code, error.message),
                         (504, f"Timeout: Too large resource version: {future + 5}, "
                               f"current: {future}"))

    def test_gone_below_the_horizon(self):
        self.clock.advance(61)
        self.put("later", "one")
        self.cache.expire()
        error = self.failure(self.reader.list(CM, "one", EXACTLY, self.revisions[0]))
        self.assertEqual((error.code, error.reason), (410, "Expired"))

    def test_continuation_is_scoped_to_its_collection(self):
        first = self.listing("one", MOST_RECENT, limit=1)
        token = self.reader.continue_token(first, first.entries[0].key + "\x00")
        self.successResultOf(self.storage.delete(CM.storage_key("one", "b")))
        page = self.listing("one", CONTINUATION, token=token)
        # The snapshot of the first page's revision: b is still there.
        self.assertEqual((page.revision, page.start), (first.revision, first.entries[0].key + "\x00"))
        self.assertIn("b", self.names(page))
        # The token's key is relative to its collection: used on another collection it
        # cannot reach outside that one (upstream's continue.go).
        other = self.listing("two", CONTINUATION, token=token)
        self.assertTrue(other.start.startswith(CM.namespace_prefix("two")))
        self.assertEqual(self.names(other), ["c"])

    def test_watch_starts(self):
        start = self.successResultOf(self.reader.watch_start(CM, "one", watch_options()))
        self.assertEqual(([e.name for e in start.initial], start.revision, start.end_bookmark),
                         (["a", "b"], self.revisions[-1], None))
        start = self.successResultOf(self.reader.watch_start(
            CM, "", watch_options(self.revisions[0])))
        self.assertEqual(([e.new.name for e in start.replay], start.initial),
                         (["b", "c"], []))
        start = self.successResultOf(self.reader.watch_start(
            CM, "", watch_options(self.revisions[0], initial=True, bookmarks=True)))
        self.assertEqual((len(start.initial), start.end_bookmark), (3, self.revisions[-1]))
        start = self.successResultOf(self.reader.watch_start(CM, "", watch_options(initial=False)))
        self.assertEqual((start.initial, list(start.replay)), ([], []))

    def test_watch_from_a_future_version_times_out(self):
        d = self.reader.watch_start(CM, "", watch_options(self.revisions[-1] + 10))
        self.clock.advance(3.0)
        self.assertEqual(self.failure(d).code, 504)

    def test_subscriptions(self):
        seen = []

        class Watcher:
            offer = staticmethod(seen.append)

        watcher = Watcher()
        self.reader.subscribe(CM, "one", watcher)
        self.put("x", "one")
        self.put("y", "two")
        self.clock.advance(0)
        self.reader.unsubscribe(CM, "one", watcher)
        self.put("z", "one")
        self.clock.advance(0)
        self.assertEqual([e.new.name for e in seen], ["x"])
