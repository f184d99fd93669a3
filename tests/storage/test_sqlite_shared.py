"""SQLiteStorage(shared=True): the contract, and several stores on one file keeping one order."""

from __future__ import annotations

import os
import stat
import threading

from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import Clock
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase

from platformd.storage.interface import (
    CompactedError,
    KeyExistsError,
    RevisionMismatchError,
)
from platformd.storage.mvcc import Create, Update
from platformd.storage.sharedrevision import SharedRevision
from platformd.storage.sqlite import SQLiteStorage
from platformd.storage.sqliteshared import Follower
from platformd.storage.transformers import IdentityTransformer
from tests.storage.conformance import (
    SealedConformance,
    Sink,
    StorageConformance,
    TransformerConformance,
    write_history,
)
from tests.storage.test_sqlite import (
    BulkWrites,
    SQLiteTestCase,
    acknowledged_until_killed,
    spawn_crashwriter,
)


class SharedTestCase(SQLiteTestCase):
    """Shared stores; ``pair()`` two of them on one file."""

    async def make_storage(self, **options):
        return await self.started(shared=True, **options)

    async def pair(self, **options) -> tuple[SQLiteStorage, SQLiteStorage]:
        path = self.mktemp()
        return (await self.started(path, shared=True, **options),
                await self.started(path, shared=True, **options))


class SharedConformanceTests(StorageConformance, SharedTestCase):
    COMMIT_AT_ONE_REVISION = False


class SharedSealedConformanceTests(SealedConformance, SharedTestCase):
    COMMIT_AT_ONE_REVISION = False


class SharedTransformerTests(TransformerConformance, SharedTestCase):
    pass


class SharedBulkWriteTests(BulkWrites, SharedTestCase):
    options = {"shared": True}


def order(sink: Sink) -> list:
    return [(event.type, event.kv.key, event.revision) for event in sink.events]


class TwoStoresTests(SharedTestCase):
    async def test_flag(self):
        """``shared`` is what the store was made with; the revision file is 0600."""
        one, two = await self.pair()
        alone = await self.started()
        self.assertEqual((one.shared, alone.shared), (True, False))
        mode = stat.S_IMODE(os.stat(one.path + ".revision").st_mode)
        self.assertEqual(mode, 0o600)
        self.assertFalse(os.path.exists(alone.path + ".revision"))

    async def test_interleaved_writes_one_order(self):
        """Writes through both stores at once: both watches see revisions 1..N once each, alike."""
        one, two = await self.pair()
        sinks = [Sink(), Sink()]
        one.watch("/", 0, sinks[0])
        two.watch("/", 0, sinks[1])
        writes = []
        for n in range(100):
            writes.append(one.create(f"/one/{n}", b"1"))
            writes.append(two.create(f"/two/{n}", b"2"))
        kvs = await gatherResults(writes)
        self.assertEqual(sorted(kv.mod_revision for kv in kvs), list(range(1, 201)))
        await gatherResults([sinks[0].wait(200), sinks[1].wait(200)])
        self.assertEqual([event.revision for event in sinks[0].events], list(range(1, 201)))
        self.assertEqual(order(sinks[0]), order(sinks[1]))
        self.assertEqual({(kv.key, kv.mod_revision) for kv in kvs},
                         {(key, revision) for _, key, revision in order(sinks[0])})
        await one.update("/two/0", b"changed")  # prev of another process's version
        await gatherResults([sinks[0].wait(201), sinks[1].wait(201)])
        self.assertEqual(sinks[1].events[-1].prev, sinks[0].events[-1].prev)
        self.assertEqual(sinks[1].events[-1].prev.value, b"2")

    async def test_compare_and_swap_across(self):
        """A write stale against the other store's version fails with that version."""
        one, two = await self.pair()
        created = await one.create("/k", b"v1")
        updated = await two.update("/k", b"v2", expected_revision=created.mod_revision)
        error = await self.assertFailure(
            one.update("/k", b"v3", expected_revision=created.mod_revision),
            RevisionMismatchError)
        self.assertEqual(error.current, updated)
        await self.assertFailure(two.create("/k", b"again"), KeyExistsError)

    async def test_commit_atomic_across(self):
        """A commit one of whose keys the other store wrote writes none of them."""
        one, two = await self.pair()
        taken = await one.create("/b", b"taken")
        await self.assertFailure(two.commit([Create("/a", b"1"), Create("/b", b"2")]),
                                 KeyExistsError)
        self.assertIsNone(await one.get("/a"))
        sink = Sink()
        one.watch("/", one.revision, sink)
        kvs = await two.commit([Create("/a", b"1"), Update("/b", b"2", taken.mod_revision)])
        self.assertEqual([kv.mod_revision for kv in kvs], [2, 3])
        await sink.wait(2)
        self.assertEqual([(e.kv.key, e.revision) for e in sink.events], [("/a", 2), ("/b", 3)])

    async def test_sync_after_the_others_write(self):
        """
        Right after the other store acknowledged a write, ``sync()`` is None only if this
        store has seen it already, else a Deferred that fires once it has.
        """
        one, two = await self.pair()
        waited = 0
        for n in range(20):
            kv = await one.create(f"/k/{n}", b"v")
            before = two.revision
            synced = two.sync()
            if before >= kv.mod_revision:
                self.assertIsNone(synced)
                continue
            self.assertIsInstance(synced, Deferred)
            await synced
            self.assertGreaterEqual(two.revision, kv.mod_revision)
            waited += 1
            self.assertIsNone(two.sync())
        self.assertGreater(waited, 0)

    async def test_follows_without_writing(self):
        """A store that never writes hears of the other's writes by itself (no sync, no poll)."""
        path = self.mktemp()
        one = await self.started(path, shared=True)
        two = await self.started(path, shared=True, poll_interval=3600)
        sink = Sink()
        two.watch("/", 0, sink)
        await write_history(one)
        await sink.wait(5)
        self.assertEqual(two.revision, one.revision)
        self.assertEqual((await two.range("/")).kvs, (await one.range("/")).kvs)

    async def test_compaction_seen_across(self):
        """
        Once one store compacted, the other refuses reads and watches below it, and its
        own compaction at or below it is no error (the history is gone as wished).
        """
        one, two = await self.pair()
        versions = await write_history(one)
        await one.compact(versions[3].mod_revision)
        self.assertIsNone(await two.compact(versions[2].mod_revision))
        self.assertEqual(two.compacted_revision, versions[3].mod_revision)
        await self.assertFailure(two.compact(versions[3].mod_revision), CompactedError)
        self.assertRaises(CompactedError, two.watch, "/", 1, Sink())
        await self.assertFailure(two.range("/", 2), CompactedError)
        self.assertEqual(len((await two.range("/", versions[3].mod_revision)).kvs), 3)

    async def test_lost_history_ends_watches(self):
        """
        A store that fell behind another's compaction does not skip the lost events: its
        watches end with CompactedError, and it then serves the state after it.
        """
        path = self.mktemp()
        one = await self.started(path, shared=True)
        gate = ReadGate()
        two = await self.started(path, shared=True, transformer=gate)
        sink = Sink()
        watch = two.watch("/", 0, sink)
        gate.close()
        await one.create("/a", b"1")  # two's writer stops reading this, in its tail
        await gate.reached.wait_async()
        await one.update("/a", b"2")
        await one.create("/b", b"3")
        await one.compact(one.revision)
        gate.open()
        error = await self.assertFailure(watch.done, CompactedError)
        self.assertEqual((error.requested, error.compacted), (1, 3))
        self.assertEqual([event.revision for event in sink.events], [1])
        await one.create("/c", b"4")
        if two.sync() is not None:
            await two.sync()
        self.assertEqual([(kv.key, kv.value) for kv in (await two.range("/")).kvs],
                         [("/a", b"2"), ("/b", b"3"), ("/c", b"4")])

    async def test_stopped_store_refuses_calls(self):
        """After stop(), a shared store refuses reads and writes as a single one does."""
        store = SQLiteStorage(reactor, self.mktemp(), shared=True)
        await store.start()
        await store.create("/k", b"v")
        await store.stop()
        self.assertRaises(RuntimeError, store.range, "/")
        self.assertRaises(RuntimeError, store.create, "/k", b"v")

    async def test_reopen_over_a_newer_revision_file(self):
        """A store opened over a revision file newer than its database (the database
        replaced) takes the database's revision, not the file's."""
        path = self.mktemp()
        store = SQLiteStorage(reactor, path, shared=True)
        await store.start()
        await write_history(store)
        await store.stop()
        os.remove(path)
        again = await self.started(path, shared=True)
        self.assertEqual(again.revision, 0)
        self.assertIsNone(again.sync())
        self.assertEqual((await again.create("/k", b"v")).mod_revision, 1)


class OtherProcessTests(SharedTestCase):
    timeout = 30

    async def test_other_process_writes_then_is_killed(self):
        """
        Another process writes while this one watches and writes too: the watch sees
        revisions 1..N once each, the other's acknowledged writes at their revisions;
        killed with SIGKILL mid-stream, it leaves this one writing, nothing it
        acknowledged lost.
        """
        path = self.mktemp()
        store = await self.started(path, shared=True)
        sink = Sink()
        store.watch("/", 0, sink)
        child = spawn_crashwriter(path, "--shared")
        own = {}
        while not child.ended.called:
            kv = await store.create(f"/own/{len(own)}", b"")
            own[kv.key] = kv.mod_revision
        theirs = await acknowledged_until_killed(self, child)
        after = await store.create("/after", b"")
        own[after.key] = after.mod_revision
        self.assertGreater(len(theirs), 100)
        self.assertGreater(len(own), 10)

        self.assertEqual([event.revision for event in sink.events],
                         list(range(1, after.mod_revision + 1)))
        seen = {event.kv.key: event.revision for event in sink.events}
        self.assertEqual({key: seen.get(key) for key in theirs}, theirs)
        self.assertEqual({key: seen.get(key) for key in own}, own)
        stored = {kv.key: kv.mod_revision for kv in (await store.range("/")).kvs}
        self.assertEqual(stored, seen)


class _Flag:
    """A threading.Event the reactor can wait for without blocking."""

    def __init__(self):
        self.event = threading.Event()

    def wait_async(self) -> Deferred:
        return deferToThread(self.event.wait, 10)


class ReadGate(IdentityTransformer):
    """Identity, except that while closed a value read back holds its thread (the writer's tail)."""

    def __init__(self):
        self._open = threading.Event()
        self._open.set()
        self.reached = _Flag()

    def close(self):
        self._open.clear()

    def open(self):
        self._open.set()

    def from_storage(self, key: str, data: bytes) -> bytes:
        if not self._open.is_set():
            self.reached.event.set()
            self._open.wait(10)
        return data


class FollowerTests(SynchronousTestCase):
    """The reactor's side alone, on a Clock: no bell is heard, the poll looks."""

    def setUp(self):
        self.shared = SharedRevision(self.mktemp())
        self.addCleanup(self.shared.close)
        self.clock = Clock()
        self.seen = 0
        self.requests: list = []
        self.follower = Follower(self.clock, self.shared, lambda: self.seen,
                                 lambda: self.requests.append("tail"), poll_interval=1.0)
        self.follower.start()

    def test_poll_asks_for_one_tail_at_a_time(self):
        """Behind the published revision, each poll asks the writer to tail, one request
        at a time; once it reported and nothing is newer, the polls ask nothing."""
        self.clock.advance(1)
        self.assertEqual(self.requests, [])
        with self.shared.locked():
            self.shared.publish(5, 0)
        self.clock.advance(1)
        self.clock.advance(1)
        self.assertEqual(self.requests, ["tail"])
        self.seen = 5
        self.follower.reached(5)
        self.clock.advance(1)
        self.assertEqual(self.requests, ["tail"])

    def test_sync(self):
        """sync() is None when at the published revision, else fires once reached."""
        self.assertIsNone(self.follower.sync(0))
        with self.shared.locked():
            self.shared.publish(7, 0)
        synced = self.follower.sync(3)
        self.assertEqual(self.requests, ["tail"])
        self.follower.reached(6)
        self.assertNoResult(synced)
        self.assertEqual(self.requests, ["tail", "tail"])  # still behind: asked again
        self.seen = 7
        self.follower.reached(7)
        self.assertIsNone(self.successResultOf(synced))

    def test_stop(self):
        """stop() ends the poll (no call left on the clock) and fails the syncs waiting."""
        with self.shared.locked():
            self.shared.publish(2, 0)
        synced = self.follower.sync(1)
        self.follower.stop()
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.failureResultOf(synced, RuntimeError)
