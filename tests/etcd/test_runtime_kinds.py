"""
A kind added to the watch cache at run time over etcd (``WatchCache.add_kind``), while
another replica writes objects of it: the load is read at the cache's revision and the
events of the kind that arrive meanwhile are applied on top, so the cache ends exactly
as etcd holds the kind; removed with a watcher open, then added again.  One etcd member
of its own per test (a fraction of a second).
"""

from __future__ import annotations

from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.trial.unittest import TestCase

from platformd.cache.continuetokens import Snapshots
from platformd.cache.informers import Informers
from platformd.cache.reads import MOST_RECENT, CacheReader
from platformd.cache.watchcache import WatchCache
from platformd.featuregates import FeatureGates
from platformd.registry.catalog import builtin
from platformd.storage.etcd3.client import Client
from platformd.storage.etcd3.store import EtcdStorage
from tests.cache.test_runtime_kinds import WIDGET, HeldRanges, Recorder, Watcher, body, names
from tests.etcd.cluster import Cluster


class EtcdRuntimeKindTests(TestCase):
    timeout = 30

    def setUp(self):
        self.cluster = Cluster.start(1)
        self.addCleanup(self.cluster.stop)
        return Deferred.fromCoroutine(self.started())

    async def store(self) -> EtcdStorage:
        store = EtcdStorage(reactor, Client(reactor, self.cluster.urls, timeout=10))
        await store.start()
        self.addCleanup(store.stop)
        return store

    async def started(self):
        #: This server's store (and cache), and another replica's, which writes.
        self.mine, self.other = await self.store(), await self.store()
        self.held = HeldRanges(self.mine)
        self.cache = WatchCache(self.held, builtin(), reactor)
        await self.cache.start()
        self.addCleanup(self.cache.stop)
        self.reader = CacheReader(self.cache, Snapshots(reactor, 300), self.held,
                                  FeatureGates.parse(""))

    async def test_added_while_another_replica_writes(self):
        other = self.other
        for n in range(20):
            await other.create(WIDGET.storage_key("one", f"w{n:02}"), body(f"w{n:02}"))
        writes = [other.update(WIDGET.storage_key("one", f"w{n:02}"), body("x", v=str(n)))
                  for n in range(0, 20, 2)]
        # The load's read is held until every write has reached this cache: they all
        # arrive while the kind loads.
        self.held.holding = True
        loaded = self.cache.add_kind(WIDGET)
        informer = Informers(self.cache).for_kind(WIDGET)
        recorder = Recorder()
        informer.add_handler(recorder.handlers)
        writes += [other.delete(WIDGET.storage_key("one", f"w{n:02}")) for n in range(1, 20, 4)]
        writes += [other.create(WIDGET.storage_key("two", f"n{n}"), body(f"n{n}"))
                   for n in range(5)]
        await gatherResults(writes)
        await self.cache.sync()  # every write of the other replica has reached this cache
        self.assertFalse(loaded.called)
        self.held.release()
        await loaded
        stored = await self.mine.range(WIDGET.storage_prefix, self.cache.revision)
        kind_cache = self.cache.for_kind(WIDGET)
        self.assertEqual(
            [(e.key, e.revision, e.raw) for e in kind_cache.current(WIDGET.storage_prefix)],
            [(kv.key, kv.mod_revision, kv.value) for kv in stored.kvs])
        revisions = [e.revision for e in kind_cache.history]
        self.assertEqual(revisions, sorted(set(revisions)))
        self.assertGreaterEqual(len(revisions), 10)  # the loaded kind's history: the writes
        # The informer saw each object added once, and the changes after its adds.
        present = {kv.key.rsplit("/", 1)[1] for kv in stored.kvs}
        added = [s[1] for s in recorder.seen if s[0] == "add"]
        self.assertEqual(len(added), len(set(added)))
        self.assertLessEqual(present, set(added))
        self.assertTrue(informer.has_synced())

        watcher = Watcher()
        self.reader.subscribe(WIDGET, "", watcher)
        await other.create(WIDGET.storage_key("one", "last"), body("last"))
        await self.cache.sync()
        self.cache.remove_kind(WIDGET)
        self.assertEqual((watcher.seen(), watcher.removed), ([("ADDED", "last")], 1))
        self.assertEqual(recorder.seen[-1], ("stop",))
        self.assertEqual(len(kind_cache), 0)
        await self.cache.add_kind(WIDGET)
        listing = await self.reader.list(WIDGET, "two", MOST_RECENT, None)
        self.assertEqual(names(listing.entries), [f"n{n}" for n in range(5)])
