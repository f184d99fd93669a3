"""SQLiteStorage: the contract, group commit, recovery and durability across a crash."""

from __future__ import annotations

import os
import signal
import sqlite3
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

from twisted.internet import reactor
from twisted.internet.defer import Deferred, DeferredList, gatherResults
from twisted.internet.error import ProcessTerminated
from twisted.internet.protocol import ProcessProtocol
from twisted.trial.unittest import TestCase

from platformd.storage.interface import (
    DELETE,
    PUT,
    CompactedError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    RevisionMismatchError,
)
from platformd.bulklane import BulkLane
from platformd.process.startup import StartupError
from platformd.storage.mvcc import Create
from platformd.storage.sqlitewriter import BULK_COMMIT
from platformd.storage.sqlite import SQLiteStorage
from tests.storage.conformance import (
    GatedTransformer,
    PrepareConformance,
    SealedConformance,
    SealingTransformer,
    SizeLimitConformance,
    Sink,
    StorageConformance,
    TransformerConformance,
    write_history,
)

ROOT = Path(__file__).resolve().parents[2]


class SQLiteTestCase(TestCase):
    """Started stores, and the conformance hooks (see tests/storage/conformance.py)."""

    timeout = 15

    async def started(self, path=None, **options) -> SQLiteStorage:
        """A started store on ``path`` (default: a new file), stopped at cleanup."""
        store = SQLiteStorage(reactor, path or self.mktemp(), **options)
        await store.start()
        self.addCleanup(store.stop)
        return store

    async def make_storage(self, **options):
        return await self.started(**options)

    def stored_values(self, store: SQLiteStorage) -> list:
        with closing(sqlite3.connect(store.path)) as db:
            return [value for (value,) in db.execute(
                "SELECT value FROM revisions WHERE NOT deleted ORDER BY mod_revision")]

    def put_stored(self, store: SQLiteStorage, key: str, data: bytes):
        with closing(sqlite3.connect(store.path, isolation_level=None)) as db:
            db.execute("UPDATE revisions SET value = ? WHERE mod_revision = ("
                       "SELECT max(mod_revision) FROM revisions WHERE key = ?)", (data, key))


class SQLiteConformanceTests(StorageConformance, SQLiteTestCase):
    COMMIT_AT_ONE_REVISION = False  # a row per revision


class SQLiteSealedConformanceTests(SealedConformance, SQLiteTestCase):
    COMMIT_AT_ONE_REVISION = False


class SQLitePrepareTests(PrepareConformance, SQLiteTestCase):
    async def test_stopped_while_preparing(self):
        """A write still being prepared when the store stops fails; stop does not wait."""
        gated = GatedTransformer()
        store = SQLiteStorage(reactor, self.mktemp(), transformer=gated)
        await store.start()
        waiting = store.create("/gated/a", b"A")
        await store.stop()
        gated.ready = True
        gated.gates.pop().callback(None)
        error = await self.assertFailure(waiting, RuntimeError)
        self.assertEqual(str(error), "SQLiteStorage is stopped: it takes no more writes")


class SQLiteSizeLimitTests(SizeLimitConformance, SQLiteTestCase):
    async def test_to_the_byte(self):
        """
        The limit is etcd's to the byte with a 10-byte request ID (etcd's is 9 or 10
        bytes, by its member's ID, so etcd may take one byte more); a write refused in
        a batch fails alone.
        """
        store = SQLiteStorage(reactor, self.mktemp())
        writes = [store.create(self.key("a"), b"x" * self.LARGEST),
                  store.create(self.key("b"), b"x" * (self.LARGEST + 1)),
                  store.create(self.key("c"), b"small")]
        await store.start()
        self.addCleanup(store.stop)
        await writes[0]
        await self.assert_refused(writes[1], "etcdserver: request is too large")
        self.assertEqual((await writes[2]).mod_revision, 2)
        self.assertEqual(store.commits, 1)


class SQLiteTransformerTests(TransformerConformance, SQLiteTestCase):
    async def test_file_holds_no_plaintext(self):
        """Neither the database nor its log holds a sealed value's plaintext; unsealed, they do."""
        secret = b'{"data":{"password":"hunter2-plaintext"}}'
        for transformer, found in ((SealingTransformer(), False), (None, True)):
            path = self.mktemp()
            options = {} if transformer is None else {"transformer": transformer}
            store = SQLiteStorage(reactor, path, **options)
            await store.start()
            kv = await store.create("/registry/secrets/default/s", secret)
            await store.update(kv.key, secret + b" ", expected_revision=kv.mod_revision)
            on_disk = b"".join(Path(name).read_bytes()
                               for name in (path, path + "-wal") if os.path.exists(name))
            await store.stop()
            self.assertEqual(b"hunter2-plaintext" in on_disk, found)


class GroupCommitTests(SQLiteTestCase):
    async def test_concurrent_creates_share_commits(self):
        """500 concurrent creates get consecutive revisions in issue order, in far fewer commits."""
        store = await self.started()
        kvs = await gatherResults([store.create(f"/k/{n:03}", b"v") for n in range(500)])
        self.assertEqual([kv.mod_revision for kv in kvs], list(range(1, 501)))
        self.assertEqual(len((await store.range("/k/")).kvs), 500)
        self.assertLess(store.commits, 50)

    async def test_writes_of_one_turn_share_a_commit(self):
        """
        The writes a reactor turn issues are handed to the writer together at its end:
        one commit, however fast the writer would have taken the first alone.
        """
        store = await self.started()
        for turn in range(1, 4):
            writes = []
            for n in range(5):
                writes.append(store.create(f"/t/{turn}/{n}", b"v"))
                time.sleep(0.01)  # the GIL let go: a writer handed the write would take it
            kvs = await gatherResults(writes)
            self.assertEqual([kv.mod_revision for kv in kvs],
                             list(range(5 * turn - 4, 5 * turn + 1)))
            self.assertEqual(store.commits, turn)

    async def test_stop_hands_off_the_turns_writes(self):
        """Writes issued in the turn that stops the store are committed before it stops."""
        path = self.mktemp()
        store = SQLiteStorage(reactor, path)
        await store.start()
        writes = [store.create(f"/s/{n}", b"v") for n in range(3)]
        await store.stop()
        self.assertEqual([kv.mod_revision for kv in await gatherResults(writes)], [1, 2, 3])
        again = await self.started(path)
        self.assertEqual(len((await again.range("/s/")).kvs), 3)

    async def test_failed_check_fails_only_its_write(self):
        """In one batch a failed check fails its own write; the others commit, in order."""
        store = SQLiteStorage(reactor, self.mktemp())
        # Queued before start(), the writes all wait for the writer's first batch.
        writes = [store.create("/a", b"1"), store.update("/a", b"x", expected_revision=7),
                  store.update("/a", b"2", expected_revision=1), store.create("/a", b"y"),
                  store.delete("/b"), store.create("/b", b"3")]
        await store.start()
        self.addCleanup(store.stop)
        results = await DeferredList(writes, consumeErrors=True)
        self.assertEqual([result for ok, result in results if ok], [
            KeyValue("/a", b"1", 1, 1), KeyValue("/a", b"2", 1, 2), KeyValue("/b", b"3", 3, 3)])
        failed = [result for ok, result in results if not ok]
        self.assertEqual([f.type for f in failed],
                         [RevisionMismatchError, KeyExistsError, KeyNotFoundError])
        self.assertEqual(failed[0].value.current, KeyValue("/a", b"1", 1, 1))
        self.assertEqual((store.commits, store.revision), (1, 3))

    async def test_failed_transaction_fails_its_batch(self):
        """When a batch's transaction fails, each of its writes fails with the error."""
        path = self.mktemp()
        schema = SQLiteStorage(reactor, path)
        await schema.start()
        await schema.stop()
        with closing(sqlite3.connect(path)) as db:
            db.execute("CREATE TRIGGER refuse BEFORE INSERT ON revisions"
                       " WHEN NEW.key = '/refused' BEGIN SELECT RAISE(ABORT, 'disk on fire'); END")
        store = SQLiteStorage(reactor, path)
        writes = [store.create("/a", b"1"), store.create("/refused", b"2"),
                  store.create("/b", b"3")]
        await store.start()
        self.addCleanup(store.stop)
        for write in writes:
            error = await self.assertFailure(write, sqlite3.IntegrityError)
            self.assertEqual(str(error), "disk on fire")
        self.assertEqual((store.commits, store.revision), (0, 0))
        again = await store.create("/a", b"1")
        self.assertEqual(again, KeyValue("/a", b"1", 1, 1))
        self.assertEqual((await store.range("")).kvs, [again])


class BulkWrites:
    """
    Bulk writes (a bulk lane's prefixes: Events in the server) are committed after the
    batch's other writes, in transactions of their own, and acknowledged in the lane's
    turns; a mixin, run alone and shared.
    """

    options: dict = {}

    def queued_store(self, path=None) -> SQLiteStorage:
        """A store not yet started: writes queue for its writer's first batch."""
        return SQLiteStorage(reactor, path or self.mktemp(),
                             lane=BulkLane(reactor, ("/events/",)), **self.options)

    async def test_bulk_writes_commit_after_the_others(self):
        """
        A batch's writes of keys outside the bulk prefixes take the first revisions and
        are acknowledged first, a commit with any other key among them included; the
        bulk ones follow in a second commit, in their order (a key's create then its
        delete); a watch hears every write once, in revision order.
        """
        store = self.queued_store()
        fired: list = []
        writes = {
            "e1": store.create("/events/ns/e1", b"1"),
            "r1": store.create("/roles/ns/r1", b"2"),
            "gone": store.delete("/events/ns/e1"),
            "mixed": store.commit([Create("/events/ns/e3", b"3"), Create("/roles/ns/r3", b"4")]),
            "e2": store.create("/events/ns/e2", b"5"),
            "r2": store.create("/roles/ns/r2", b"6"),
        }
        for name, write in writes.items():
            write.addCallback(lambda result, name=name: fired.append(name) or result)
        await store.start()
        self.addCleanup(store.stop)
        sink = Sink()
        store.watch("/", 0, sink)
        results = {name: await write for name, write in writes.items()}
        self.assertEqual(fired, ["r1", "mixed", "r2", "e1", "gone", "e2"])
        self.assertEqual(
            (results["r1"].mod_revision, [kv.mod_revision for kv in results["mixed"]],
             results["r2"].mod_revision, results["e1"].mod_revision,
             results["gone"].mod_revision, results["e2"].mod_revision),
            (1, [2, 3], 4, 5, 6, 7))
        self.assertEqual(store.commits, 2)
        await sink.wait(7)
        self.assertEqual([(event.type, event.kv.key, event.revision) for event in sink.events], [
            (PUT, "/roles/ns/r1", 1), (PUT, "/events/ns/e3", 2), (PUT, "/roles/ns/r3", 3),
            (PUT, "/roles/ns/r2", 4), (PUT, "/events/ns/e1", 5), (DELETE, "/events/ns/e1", 6),
            (PUT, "/events/ns/e2", 7)])

    async def test_bulk_writes_a_few_per_commit(self):
        """
        Bulk writes go ``BULK_COMMIT`` to a commit (the writes handed in between would
        go first), in order.
        """
        store = self.queued_store()
        bulk = [store.create(f"/events/ns/e{n:02}", b"v") for n in range(2 * BULK_COMMIT + 3)]
        other = store.create("/roles/ns/r", b"v")
        await store.start()
        self.addCleanup(store.stop)
        self.assertEqual((await other).mod_revision, 1)
        self.assertEqual([kv.mod_revision for kv in await gatherResults(bulk)],
                         list(range(2, 2 * BULK_COMMIT + 5)))
        self.assertEqual(store.commits, 4)

    async def test_without_bulk_writes_one_commit(self):
        """A batch of other writes only is one commit, as without bulk prefixes."""
        store = self.queued_store()
        writes = [store.create(f"/roles/ns/r{n}", b"v") for n in range(3)]
        await store.start()
        self.addCleanup(store.stop)
        self.assertEqual([kv.mod_revision for kv in await gatherResults(writes)], [1, 2, 3])
        self.assertEqual(store.commits, 1)

    async def test_failed_bulk_commit_fails_only_the_bulk_writes(self):
        """When the bulk writes' transaction fails, the others of the batch stay committed."""
        path = self.mktemp()
        schema = SQLiteStorage(reactor, path, **self.options)
        await schema.start()
        await schema.stop()
        with closing(sqlite3.connect(path)) as db:
            db.execute("CREATE TRIGGER refuse BEFORE INSERT ON revisions WHEN NEW.key ="
                       " '/events/ns/refused' BEGIN SELECT RAISE(ABORT, 'disk on fire'); END")
        store = self.queued_store(path)
        bulk = [store.create("/events/ns/a", b"1"), store.create("/events/ns/refused", b"2")]
        other = store.create("/roles/ns/r", b"3")
        await store.start()
        self.addCleanup(store.stop)
        self.assertEqual(await other, KeyValue("/roles/ns/r", b"3", 1, 1))
        for write in bulk:
            error = await self.assertFailure(write, sqlite3.IntegrityError)
            self.assertEqual(str(error), "disk on fire")
        self.assertEqual((store.commits, store.revision), (1, 1))
        self.assertEqual([kv.key for kv in (await store.range("/")).kvs], ["/roles/ns/r"])


class BulkWriteTests(BulkWrites, SQLiteTestCase):
    pass


class RecoveryTests(SQLiteTestCase):
    async def test_restart(self):
        """A store reopened on its file has the same data, revision and compacted revision."""
        path = self.mktemp()
        store = SQLiteStorage(reactor, path)
        await store.start()
        one, two, uno, bee, gone = await write_history(store)
        await store.compact(gone.mod_revision)  # removes the newest row, the tombstone
        before = await store.range("/")
        await store.stop()

        again = await self.started(path)
        self.assertEqual((again.revision, again.compacted_revision),
                         (gone.mod_revision, gone.mod_revision))
        self.assertEqual(await again.range("/"), before)
        await self.assertFailure(again.range("/", gone.mod_revision - 1), CompactedError)
        updated = await again.update("/a/1", b"one more", expected_revision=uno.mod_revision)
        self.assertEqual(updated.mod_revision, gone.mod_revision + 1)
        await self.assertFailure(again.create("/b/1", b"x"), KeyExistsError)

    async def test_unopenable_file(self):
        """A store whose file cannot be opened fails start() with the error, and still stops."""
        store = SQLiteStorage(reactor, os.path.join(self.mktemp(), "missing", "store.db"))
        error = await self.assertFailure(store.start(), StartupError)
        self.assertEqual(str(error), f"cannot create {store.path}: no such directory")
        self.assertIsNone(await store.stop())

    async def test_stopped_store_refuses_calls(self):
        """After stop(), writes and reads are refused with a message saying why."""
        store = SQLiteStorage(reactor, self.mktemp())
        await store.start()
        await store.stop()
        self.assertRaises(RuntimeError, store.create, "/k", b"v")
        self.assertRaises(RuntimeError, store.get, "/k")


class PageCacheTests(SQLiteTestCase):
    async def test_readers_cache_is_bounded(self):
        """A reader's connection caches at most 512 KiB of pages (SQLite's default is
        2,000 KiB per connection), as the writer's does."""
        store = await self.started()
        await store.create("/k", b"v")
        size = await store._read(lambda db: db.execute("PRAGMA cache_size").fetchone()[0])
        self.assertEqual(size, -512)


class ThreadedWatchTests(SQLiteTestCase):
    async def test_catch_up_while_writes_commit(self):
        """A watch catching up on history while writes commit gets every event once, in order."""
        store = SQLiteStorage(reactor, self.mktemp(), readers=1)
        await store.start()
        self.addCleanup(store.stop)
        await gatherResults([store.create(f"/k/{n}", b"old") for n in range(200)])
        gate = threading.Event()
        self.addCleanup(gate.set)
        # The only reader thread waits, so the history read waits behind it.
        store._pool.callInThread(gate.wait)
        sink = Sink()
        store.watch("/", 0, sink)
        await gatherResults([store.create(f"/k/{n}", b"new") for n in range(200, 400)])
        self.assertEqual(sink.events, [])
        gate.set()
        await store.create("/last", b"")
        await sink.wait(401)
        self.assertEqual([event.revision for event in sink.events], list(range(1, 402)))

    async def test_cancel_during_catch_up(self):
        """A watch its sink cancels in the middle of the history gets nothing more."""
        store = await self.started()
        await write_history(store)
        events = []

        def sink(event):
            events.append(event)
            watch.cancel()

        watch = store.watch("/", 0, sink)
        await watch.done
        await store.create("/later", b"")
        self.assertEqual([event.revision for event in events], [1])

    async def test_failed_catch_up_ends_watch(self):
        """A watch whose history cannot be read ends: its done Deferred fails with the error."""
        path = self.mktemp()
        store = await self.started(path)
        await store.create("/k", b"v")
        with closing(sqlite3.connect(path)) as db:
            db.execute("ALTER TABLE revisions RENAME TO elsewhere")
        sink = Sink()
        watch = store.watch("/", 0, sink)
        await self.assertFailure(watch.done, sqlite3.OperationalError)
        self.assertEqual(sink.events, [])

    async def test_compaction_lets_earlier_reads_finish(self):
        """A range accepted before a compaction gets its state; one after is refused at once."""
        store = await self.started()
        one, two, uno, bee, gone = await write_history(store)
        earlier = store.range("/", two.mod_revision)
        compaction = store.compact(store.revision)
        self.assertEqual(store.compacted_revision, store.revision)
        later = store.range("/", two.mod_revision)
        self.assertEqual((await earlier).kvs, [one, two])
        await self.assertFailure(later, CompactedError)
        await compaction


class KilledWriter(ProcessProtocol):
    """Runs crashwriter.py and kills it with SIGKILL a second after its first acknowledgement."""

    def __init__(self):
        self.output = b""
        self.errors = b""
        self.ended = Deferred()
        self._kill = None

    def outReceived(self, data):
        self.output += data
        if self._kill is None:
            self._kill = reactor.callLater(1.0, self.transport.signalProcess, "KILL")

    def errReceived(self, data):
        self.errors += data

    def processEnded(self, reason):
        if self._kill is not None and self._kill.active():
            self._kill.cancel()
        self.ended.callback(reason.value)


def spawn_crashwriter(path: str, *options: str) -> KilledWriter:
    """crashwriter.py writing to ``path`` (with ``options``), killed a second after its first
    acknowledgement."""
    child = KilledWriter()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    reactor.spawnProcess(child, sys.executable,
                         [sys.executable, str(ROOT / "tests/storage/crashwriter.py"), path,
                          *options], env=env)
    return child


async def acknowledged_until_killed(case: TestCase, child: KilledWriter) -> dict:
    """Once ``child`` is killed: each key it printed as acknowledged, with its revision."""
    ended = await child.ended
    case.assertIsInstance(ended, ProcessTerminated, child.errors)
    case.assertEqual(ended.signal, signal.SIGKILL, child.errors)
    lines = child.output.decode().split("\n")[:-1]  # the last may be cut short
    return {key: int(revision) for key, revision in map(str.split, lines)}


class CrashTests(SQLiteTestCase):
    async def test_acknowledged_writes_survive_kill(self):
        """Every create acknowledged before a SIGKILL is on disk after it; revisions go on."""
        path = self.mktemp()
        acknowledged = await acknowledged_until_killed(self, spawn_crashwriter(path))
        self.assertGreater(len(acknowledged), 100)
        store = await self.started(path)
        stored = {kv.key: kv for kv in (await store.range("/crash/")).kvs}
        self.assertEqual({key: (stored[key].value, stored[key].mod_revision)
                          for key in acknowledged if key in stored},
                         {key: (key.encode(), revision)
                          for key, revision in acknowledged.items()})
        newest = max(acknowledged.values())
        self.assertGreaterEqual(store.revision, newest)
        kv = await store.create("/after/crash", b"")
        self.assertEqual(kv.mod_revision, store.revision)
        self.assertGreater(kv.mod_revision, newest)
