"""
EtcdStorage against a real etcd: the storage contract (the conformance suite), key
mapping, and what only etcd shows (revisions shared by two stores, compaction by
another replica, history read back by a watch of its own).

The suite wants an empty store with no compacted history per test, and etcd compacts
the whole cluster, so each conformance test gets a fresh one-member etcd (about 0.1 s
to start, fsync off).
"""

from __future__ import annotations

import threading

import grpc
from twisted.internet import reactor
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.task import Clock, deferLater
from twisted.trial.unittest import TestCase

from platformd.protos.etcd.api.etcdserverpb import rpc_pb2, rpc_pb2_grpc
from platformd.storage.etcd3.client import Client
from platformd.storage.etcd3.compactor import Compactor
from platformd.storage.etcd3.store import EtcdStorage, prefix_end
from platformd.storage.interface import (
    DELETE,
    PUT,
    CompactedError,
    CorruptValue,
    KeyValue,
    RevisionMismatchError,
)
from tests.etcd.cluster import Cluster
from tests.storage.conformance import (
    PrepareConformance,
    SealedConformance,
    SizeLimitConformance,
    SealingTransformer,
    Sink,
    StorageConformance,
    TransformerConformance,
    created,
    write_history,
)

#: The etcd prefix the conformance stores use for the interface's keys.
PREFIX = "/registry"


def raw_kv(urls: list):
    """A blocking KV stub of the cluster, as an outside tool (etcdctl) would use it."""
    channel = grpc.insecure_channel(urls[0].removeprefix("http://"))
    return channel, rpc_pb2_grpc.KVStub(channel), rpc_pb2_grpc.WatchStub(channel)


class EtcdTestCase(TestCase):
    """A fresh etcd per test, and the conformance hooks."""

    timeout = 30

    def setUp(self):
        self.cluster = Cluster.start(1)
        self.addCleanup(self.cluster.stop)
        self.channel, self.kv, self.watch_stub = raw_kv(self.cluster.urls)
        self.addCleanup(self.channel.close)

    async def make_storage(self, **options):
        store = EtcdStorage(reactor, Client(reactor, self.cluster.urls, timeout=10),
                            prefix=PREFIX, root="", **options)
        await store.start()
        self.addCleanup(store.stop)
        return store

    def stored_values(self, store) -> list:
        """Every PUT's value under the prefix, read from etcd's history with a watch."""
        key = PREFIX.encode()
        newest = self.kv.Range(rpc_pb2.RangeRequest(key=key, range_end=prefix_end(key)))\
            .header.revision
        create = rpc_pb2.WatchRequest(create_request=rpc_pb2.WatchCreateRequest(
            key=key, range_end=prefix_end(key), start_revision=1))
        done = threading.Event()
        values, call = [], self.watch_stub.Watch(_then_wait(create, done), timeout=5)
        try:
            for response in call:
                for event in response.events:
                    if event.type == 0 and event.kv.key.startswith(key + b"/"):  # a PUT
                        values.append(event.kv.value)
                if response.events and response.events[-1].kv.mod_revision >= newest:
                    return values
        finally:
            done.set()
            call.cancel()
        raise AssertionError("the history ended early")

    def put_stored(self, store, key: str, data: bytes):
        """Write ``data`` under ``key`` directly (a new revision: etcd keeps history)."""
        self.kv.Put(rpc_pb2.PutRequest(key=(PREFIX + key).encode(), value=data))


def _then_wait(create, done: threading.Event):
    """The request iterator of a watch: ``create``, then nothing until ``done``."""
    yield create
    done.wait()


class EtcdConformanceTests(StorageConformance, EtcdTestCase):
    pass


class EtcdSealedConformanceTests(SealedConformance, EtcdTestCase):
    pass


class EtcdPrepareTests(PrepareConformance, EtcdTestCase):
    pass


class EtcdSizeLimitTests(SizeLimitConformance, EtcdTestCase):
    ROOT = ""  # the stores' keys are under PREFIX


class EtcdTransformerTests(TransformerConformance, EtcdTestCase):
    """
    The seam; the two tests that edit a stored value in place are etcd-shaped: etcd
    cannot change a version without making a new one, so the edited value has a revision
    of its own (as if written by another tool).
    """

    async def _moved(self, store, key: str, data: bytes) -> KeyValue:
        """Write ``data`` under ``key`` outside the store; its version once delivered."""
        sink = Sink()
        store.watch("", store.revision, sink)
        self.put_stored(store, key, data)
        await sink.wait(1)
        return sink.events[0].kv

    async def test_key_is_authenticated(self):
        """A value moved to another key does not read back: it is a CorruptValue there."""
        store = await self.make_storage(transformer=SealingTransformer())
        a = await store.create("/a", b"A")
        b = await store.create("/b", b"B")
        [sealed_a, _] = self.stored_values(store)
        moved_event = await self._moved(store, "/b", sealed_a)
        self.assertIsInstance(moved_event.value, CorruptValue)
        moved = await store.get("/b")
        self.assertIsInstance(moved.value, CorruptValue)
        self.assertEqual(moved, KeyValue("/b", moved.value, b.create_revision,
                                         moved_event.mod_revision))
        self.assertEqual((await store.range("/")).kvs, [a, moved])
        self.assertEqual(await store.get("/a"), a)

    async def test_corrupt_value_still_written(self):
        """A key whose value does not read back can be updated and deleted."""
        store = await self.make_storage(transformer=SealingTransformer())
        await store.create("/b", b"B")
        garbage = await self._moved(store, "/b", b"garbage")
        error = await self.assertFailure(store.update("/b", b"x", expected_revision=1),
                                         RevisionMismatchError)
        self.assertIsInstance(error.current.value, CorruptValue)
        again = await store.update("/b", b"again", expected_revision=garbage.mod_revision)
        self.assertEqual(await store.get("/b"), again)
        await self._moved(store, "/b", b"garbage")
        gone = await store.delete("/b")
        self.assertIsInstance(gone.value, CorruptValue)


class SharedClusterTests(EtcdTestCase):
    """Two stores over one etcd and prefix, as two replicas: one history, one revision."""

    async def test_writes_reach_the_other_store(self):
        """A write through A reaches B's watch with the same version; B then reads it."""
        a, b = await self.make_storage(), await self.make_storage()
        sink = Sink()
        b.watch("/", b.revision, sink)
        kv = await a.create("/k", b"v")
        await sink.wait(1)
        self.assertEqual(sink.events[0].kv, kv)
        self.assertEqual(await b.get("/k"), kv)
        self.assertGreaterEqual(b.revision, kv.mod_revision)

    async def test_sync_after_writes_elsewhere(self):
        """sync() on B fires once B's watch passed every earlier write, even outside the prefix."""
        a, b = await self.make_storage(), await self.make_storage()
        kv = await a.create("/k", b"v")
        outside = self.kv.Put(rpc_pb2.PutRequest(key=b"/elsewhere", value=b"x")).header.revision
        self.assertGreater(outside, kv.mod_revision)
        await b.sync()
        self.assertGreaterEqual(b.revision, outside)
        before = b.revision
        await b.sync()  # nothing new: a quorum read, no marker write
        self.assertEqual(b.revision, before)

    async def test_history_read_from_etcd(self):
        """A store started after the writes serves a watch from before them."""
        a = await self.make_storage()
        one, two, uno, bee, gone = await write_history(a)
        b = await self.make_storage()
        sink = Sink()
        b.watch("/a/", 0, sink)
        await sink.wait(4)
        self.assertEqual([(e.type, e.kv) for e in sink.events],
                         [(PUT, one), (PUT, two), (PUT, uno), (DELETE, gone)])
        later = await a.create("/a/3", b"3")
        await sink.wait(5)
        self.assertEqual(sink.events[4].kv, later)

    async def test_compaction_by_another_replica(self):
        """The compactors of two replicas compact once per interval; both stores learn it."""
        a, b = await self.make_storage(), await self.make_storage()
        first, second = Compactor(a.client, 60), Compactor(b.client, 60)
        await first.tick()  # bootstrap: records the revision, compacts nothing
        await second.tick()  # loses the race: learns the count
        self.assertEqual((first.count, second.count), (1, 1))
        seen = first.revision
        await a.create("/k", b"1")
        await first.tick()  # compacts at the revision it saw an interval ago
        await second.tick()
        self.assertEqual((first.count, second.count), (2, 2))
        for store in (a, b):
            await _until(lambda store=store: store.compacted_revision == seen)
            await self.assertFailure(store.range("/", seen - 1), CompactedError)
            self.assertRaises(CompactedError, store.watch, "/", seen - 1, Sink())

    async def test_compactor_ticks_on_its_clock(self):
        """The compactor runs every interval of its clock, not before."""
        store = await self.make_storage()
        clock = Clock()
        compactor = Compactor(store.client, 300, clock)
        compactor.start()
        self.addCleanup(compactor.stop)
        clock.advance(299)
        self.assertEqual(compactor.count, 0)
        clock.advance(1)
        await _until(lambda: compactor.count == 1)


class _HeldStore(EtcdStorage):
    """An EtcdStorage whose watch's deliveries wait for ``release()``."""

    held: list = []

    def __attrs_post_init__(self):
        self.held = []

    def _delivered(self, revision, events):
        self.held.append((revision, events))

    def release(self):
        for revision, events in self.held:
            EtcdStorage._delivered(self, revision, events)
        self.held.clear()


class WriteDeliveryTests(EtcdTestCase):
    """
    A store's own writes are delivered from their transactions' replies when every
    earlier revision has been, rather than when its etcd watch brings them; never out of
    order, never twice.  The tests hold back what the store's watch delivers.
    """

    async def held_store(self):
        """A store whose watch's deliveries are held until ``release()``."""
        store = _HeldStore(reactor, Client(reactor, self.cluster.urls, timeout=10),
                           prefix=PREFIX, root="")
        await store.start()
        self.addCleanup(store.stop)
        return store, store.held, store.release

    async def test_own_writes_delivered_from_replies(self):
        """
        With the watch held, writes are acknowledged and reach watches in order; the
        watch's copies of them are not delivered again.
        """
        store, held, release = await self.held_store()
        sink = Sink()
        store.watch("/", store.revision, sink)
        one = await store.create("/a", b"1")
        two = await store.update("/a", b"2", one.mod_revision)
        await store.delete("/a", two.mod_revision)
        self.assertEqual([(e.type, e.kv.mod_revision) for e in sink.events],
                         [(PUT, one.mod_revision), (PUT, two.mod_revision),
                          (DELETE, two.mod_revision + 1)])
        self.assertEqual(sink.events[1].prev, one)
        self.assertEqual(store.revision, two.mod_revision + 1)
        other = self.kv.Put(rpc_pb2.PutRequest(key=b"/registry/o", value=b"x")).header.revision
        await _until(lambda: held and held[-1][0] >= other)
        release()
        self.assertEqual([e.kv.mod_revision for e in sink.events],
                         [one.mod_revision, two.mod_revision, other - 1, other])
        self.assertEqual(store.revision, other)

    async def test_prefixes_kept_on_both_paths(self):
        """
        Each watch gets only its prefix's events, whether delivered from a write's reply
        (this store's writes) or by the watch (another writer's).
        """
        store, held, release = await self.held_store()
        a_sink, b_sink = Sink(), Sink()
        store.watch("/a/", store.revision, a_sink)
        store.watch("/b/", store.revision, b_sink)
        bx = await store.create("/b/x", b"1")
        ay = await store.create("/a/y", b"2")
        other = self.kv.Put(rpc_pb2.PutRequest(key=b"/registry/b/o", value=b"3")).header.revision
        await _until(lambda: held and held[-1][0] >= other)
        release()
        self.assertEqual([e.kv for e in a_sink.events], [ay])
        self.assertEqual([(e.kv.key, e.kv.mod_revision) for e in b_sink.events],
                         [("/b/x", bx.mod_revision), ("/b/o", other)])

    async def test_gap_waits_for_the_watch(self):
        """
        A write committed after another writer's is not delivered (nor acknowledged)
        before the other's, which only the watch brings; then both, in order.
        """
        store, held, release = await self.held_store()
        sink = Sink()
        store.watch("/", store.revision, sink)
        other = self.kv.Put(rpc_pb2.PutRequest(key=b"/registry/o", value=b"x")).header.revision
        acknowledged: list = []
        mine = store.create("/m", b"y").addCallback(lambda kv: acknowledged.append(kv) or kv)
        await _until(lambda: held and held[-1][0] > other)  # the watch brought both
        self.assertEqual(acknowledged, [])
        self.assertEqual(sink.events, [])
        release()
        kv = await mine
        self.assertEqual([(e.kv.key, e.kv.mod_revision) for e in sink.events],
                         [("/o", other), ("/m", kv.mod_revision)])
        self.assertEqual(kv.mod_revision, other + 1)

    async def test_watch_copy_of_delivered_write_dropped(self):
        """
        The watch thread may hand over a write already delivered from its reply (it read
        an older revision); watches still get it once (the store drops it, and each
        watch ignores what it has had).
        """
        store, held, release = await self.held_store()
        sink = Sink()
        store.watch("/", store.revision, sink)
        mine = await store.create("/m", b"y")
        other = self.kv.Put(rpc_pb2.PutRequest(key=b"/registry/o", value=b"x")).header.revision
        await _until(lambda: held and held[-1][0] >= other)
        revision, events = held[-1]
        held[-1] = (revision, [created(mine), *events])  # as if read before the reply
        release()
        self.assertEqual([(e.kv.key, e.kv.mod_revision) for e in sink.events],
                         [("/m", mine.mod_revision), ("/o", other)])

    async def test_cancelled_wait_forgotten(self):
        """A write whose wait is cancelled (its request's deadline) leaves nothing behind."""
        store, held, release = await self.held_store()
        other = self.kv.Put(rpc_pb2.PutRequest(key=b"/registry/o", value=b"x")).header.revision
        mine = store.create("/m", b"y")
        await _until(lambda: len(store._ahead) == 1)  # committed, waiting for /o
        mine.cancel()
        self.failureResultOf(mine, CancelledError)
        self.assertEqual(store._waiting, [])
        await _until(lambda: held and held[0][0] >= other)
        release()
        self.assertEqual((store._ahead, store.revision), ({}, other + 1))


class SyncTests(EtcdTestCase):
    """
    ``sync`` calls share quorum reads: one under way at a time, the calls made during
    it served by the next, which starts after them.  The tests hold the replies of the
    store's quorum reads until they say.
    """

    async def held_reads(self):
        """A store, the quorum reads it started so far, and ``release()`` for them."""
        store = await self.make_storage()
        started, held = [], []
        hedged = store.client.hedged

        def counted(method, request):
            reply = hedged(method, request)
            if method != "Range" or not request.count_only:
                return reply
            started.append(request)
            waiting = Deferred()
            held.append(lambda: reply.chainDeferred(waiting))
            return waiting
        store.client.hedged = counted

        def release():
            while held:
                held.pop(0)()
        return store, started, release

    async def test_calls_share_reads(self):
        """Six calls, two quorum reads: the first call's, and one for the five after it."""
        store, started, release = await self.held_reads()
        first = store.sync()
        later = [store.sync() for _ in range(5)]
        self.assertEqual(len(started), 1)
        release()
        await first
        self.assertEqual(len(started), 2)
        self.assertFalse(any(d.called for d in later))
        release()
        for d in later:
            await d
        self.assertEqual(len(started), 2)

    async def test_later_call_sees_later_write(self):
        """A call made after a write another server committed sees it, although a read
        started before the write was still under way."""
        store, started, release = await self.held_reads()
        first = store.sync()
        written = self.kv.Put(rpc_pb2.PutRequest(key=(PREFIX + "/w").encode(), value=b"x"))
        later = store.sync()
        release()
        await first
        release()
        await later
        self.assertGreaterEqual(store.revision, written.header.revision)

    async def test_cancelled_call_forgotten(self):
        """A call cancelled while it waits for the next read is not answered again."""
        store, started, release = await self.held_reads()
        first = store.sync()
        later = store.sync()
        later.cancel()
        self.failureResultOf(later, CancelledError)
        release()
        await first
        self.assertEqual(len(started), 1)  # nobody waits for another read


async def _until(condition, timeout: float = 10.0):
    """Wait (on the real reactor) until ``condition()`` holds."""
    deadline = reactor.seconds() + timeout
    while not condition():
        if reactor.seconds() > deadline:
            raise AssertionError("condition never held")
        await deferLater(reactor, 0.01, lambda: None)


class UnreachableTests(EtcdTestCase):
    async def test_cancelled_calls_end(self):
        """
        With etcd down, reads wait for it; cancelling them (a health check's timeout)
        ends their calls (many more than the client's pool has threads), and a read once
        etcd is back answers at once rather than after the waiting reads' deadline.
        """
        store = EtcdStorage(reactor, Client(reactor, self.cluster.urls, timeout=60),
                            prefix=PREFIX, root="")
        await store.start()
        self.addCleanup(store.stop)
        kv = await store.create("/k", b"v")
        [member] = self.cluster.members
        member.kill()
        waiting = [store.get("/k") for _ in range(40)]
        await deferLater(reactor, 0.2, lambda: None)
        self.assertFalse(any(d.called for d in waiting))
        for d in waiting:
            d.cancel()
        for d in waiting:
            self.failureResultOf(d, CancelledError)
        member.start()
        member.wait_ready()
        started = reactor.seconds()
        self.assertEqual(await store.get("/k"), kv)
        self.assertLess(reactor.seconds() - started, 10)
