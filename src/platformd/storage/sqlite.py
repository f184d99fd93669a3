"""
``SQLiteStorage``: the durable backend, on the standard library's sqlite3.

Layout, etcd's MVCC in one table: ``revisions`` has a row per change, keyed by its
revision (key, create_revision, mod_revision, value, deleted).  Read by key it is the
current state and the state at any retained revision (the newest row of each key at or
below it, unless a tombstone); read by revision it is the ordered event log a watch
catches up from.  ``meta`` holds the compacted revision.  The database runs in WAL mode
with ``synchronous=FULL``: a commit is on disk before it is acknowledged, and readers
never wait for the writer.

Threads: all writes go through one writer thread, with group commit.  The reactor hands
it the writes of a reactor turn together, once the turn's other work is done (a
``callLater(0)`` scheduled by the turn's first write): one wake-up of the writer per
turn, not per write, and the writes a turn's requests make share one commit instead of
the first committing alone while the writer competes with the reactor for the GIL
(``docs/performance.md``).  The writer takes every pending write (up to ``_BATCH``),
applies them in order in one transaction, each with its own compare-and-swap check and
the next revision, commits once, and hands the outcome to the reactor in one
``callFromThread``: the reactor sets ``revision``, publishes the events to the watches,
then fires the writes' Deferreds.  For its checks the writer reads
each key's current row inside its transaction (one index lookup), which also sees the
batch's earlier writes; a rollback then leaves nothing to undo.  Measured against a copy
of every key kept in memory by the writer, the throughput was the same within noise, and
the lookup needs neither the memory nor a full scan at start.  Reads run on a small pool
of reader threads with connections of their own.  Nothing touches the disk on the
reactor thread.

Values: each is stored as the store's transformer makes it (``transformers.py``; the
writer thread transforms it as it inserts the row, once the transformer has been
``prepare``d on the reactor, which is where a KMS plugin is asked) and read back in the
reader thread that reads it, so the reactor sees only plaintext.  A tombstone's value is empty and
never transformed.  A value is refused as etcd with its default limits refuses it
(``etcd3/txn.py``), so that what one backend stores the other does.

A commit (``IStorage.commit``: several keys, all or none) is one request: its writes are
checked, then inserted, inside the batch's transaction.  They take consecutive revisions,
not one as in etcd (``mod_revision`` is the table's key): nothing this server runs reads
between them (the services' allocation writes its bitmaps behind over a storage of its
own, ``registry/serviceallocation.py``), and a watch hears of them in order either way.

Reads see no half-done compaction: ``compact()`` marks the revision compacted at once (so
later reads and watches below it are refused) but queues the deletion only after the
reads already under way have finished.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from contextlib import suppress
from typing import Optional

import attrs
from twisted.internet.defer import Deferred, DeferredList, fail
from twisted.internet.interfaces import IDelayedCall, IReactorFromThreads
from twisted.internet.threads import deferToThreadPool
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool
from zope.interface import implementer

from platformd import errors
from platformd.files import privatefiles
from platformd.storage.etcd3 import txn
from platformd.storage.interface import (
    DELETE,
    PUT,
    Event,
    IStorage,
    KeyValue,
    RangeResult,
    StorageError,
)
from platformd.storage import mvcc
from platformd.storage.transformers import IDENTITY, IValueTransformer, Transformed

#: Once a batch has this many writes, it takes no more hand-offs.
_BATCH = 1000

#: Each connection's page cache, in KiB (SQLite's default is 2,000 KiB, filled by any
#: connection that reads or writes that much: the writer after a few thousand writes,
#: a reader after one full range).  The writer's work is an append to the table and an
#: insert into the key index, whose interior pages fit in far less; a reader's ranges
#: are scans, read once; the operating system's page cache holds the file either way.
#: 512 KiB keeps ~1.5 MiB per connection out of the server's memory (docs/performance.md).
_CACHE_KIB = 512
_CACHE_SIZE = f"PRAGMA cache_size=-{_CACHE_KIB}"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS revisions (
    mod_revision INTEGER PRIMARY KEY,
    key TEXT NOT NULL,
    create_revision INTEGER NOT NULL,
    value BLOB NOT NULL,
    deleted INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS revisions_by_key ON revisions (key, mod_revision);
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT OR IGNORE INTO meta VALUES ('compacted_revision', 0);
"""

_INSERT = "INSERT INTO revisions VALUES (?, ?, ?, ?, ?)"

#: Rows at or below :revision that another row of their key at or below it supersedes,
#: and tombstones at or below it.  What stays is exactly the state at :revision.
_COMPACT = """
DELETE FROM revisions WHERE mod_revision <= :revision AND (deleted OR EXISTS (
    SELECT 1 FROM revisions AS newer WHERE newer.key = revisions.key
    AND newer.mod_revision > revisions.mod_revision AND newer.mod_revision <= :revision))
"""

#: Each change after ? up to ? of a key starting with ?, with the version it replaced
#: (the key's previous row, unless the change is a create).
_EVENTS = """
SELECT r.key, r.value, r.create_revision, r.mod_revision, r.deleted,
       p.value, p.create_revision, p.mod_revision
FROM revisions AS r LEFT JOIN revisions AS p
    ON r.create_revision < r.mod_revision AND p.mod_revision = (
        SELECT max(mod_revision) FROM revisions
        WHERE key = r.key AND mod_revision < r.mod_revision)
WHERE r.mod_revision > ? AND r.mod_revision <= ? AND substr(r.key, 1, ?) = ?
ORDER BY r.mod_revision
"""


def _select_kvs(db, values: Transformed, low: str, high: Optional[str], revision: int) -> list:
    """The version at ``revision`` of every live key in [low, high), in key order."""
    bounds: tuple[str, ...]
    bound, bounds = "key >= ?", (low,)
    if high is not None:
        bound, bounds = "key >= ? AND key < ?", (low, high)
    # The newest revision of each key comes from the index alone; then one row per key.
    rows = db.execute(f"""
        SELECT r.key, r.value, r.create_revision, r.mod_revision
        FROM (SELECT max(mod_revision) AS newest FROM revisions
              WHERE {bound} AND mod_revision <= ? GROUP BY key) AS latest
        JOIN revisions AS r ON r.mod_revision = latest.newest
        WHERE NOT r.deleted ORDER BY r.key""", bounds + (revision,))
    if values.identity:
        return [KeyValue(*row) for row in rows]
    read = values.value
    return [KeyValue(key, read(key, data), create, mod) for key, data, create, mod in rows]


def _select_kv(db, values: Transformed, key: str, revision: int) -> Optional[KeyValue]:
    """The version of ``key`` at ``revision``, or None."""
    row = db.execute("""
        SELECT value, create_revision, mod_revision, deleted FROM revisions
        WHERE key = ? AND mod_revision <= ? ORDER BY mod_revision DESC LIMIT 1""",
                     (key, revision)).fetchone()
    if row is None or row[3]:
        return None
    data, create, mod, _ = row
    return KeyValue(key, values.value(key, data), create, mod)


def _select_events(db, values: Transformed, prefix: str, after: int, upto: int) -> list:
    """The events of keys under ``prefix`` in (after, upto], in revision order."""
    events = []
    read = values.value
    for key, data, create, mod, deleted, *old in db.execute(
            _EVENTS, (after, upto, len(prefix), prefix)):
        prev = None if old[2] is None else KeyValue(key, read(key, old[0]), old[1], old[2])
        if deleted:
            assert prev is not None, f"{key}: a tombstone at {mod} with no version before it"
            events.append(Event(DELETE, attrs.evolve(prev, mod_revision=mod), prev))
        else:
            events.append(Event(PUT, KeyValue(key, read(key, data), create, mod), prev))
    return events


def _prefix_end(prefix: str) -> Optional[str]:
    """The least string above every string that starts with ``prefix``; None: no bound."""
    for i in reversed(range(len(prefix))):
        code = ord(prefix[i]) + 1
        if code == 0xD800:  # surrogates cannot be encoded: skip them
            code = 0xE000
        if code <= 0x10FFFF:
            return prefix[:i] + chr(code)
    return None


@attrs.frozen
class _Compact:
    """The writer's part of a compaction."""

    revision: int


#: Tells the writer to finish what is queued before it and exit.
_STOP = object()


class _Writer:
    """
    The writer thread and its connection.

    A plain class rather than attrs: every field belongs to the thread, which sets them
    up itself in ``run``; the reactor only ever hears from it through ``callFromThread``.
    """

    def __init__(self, reactor, path: str, values: Transformed, requests: queue.SimpleQueue,
                 committed):
        self._reactor = reactor
        self._path = path
        self._values = values
        self._requests = requests
        self._committed = committed

    def run(self, started: Deferred, stopped: Deferred):
        try:
            compacted = self._open()
        except Exception:
            self._reactor.callFromThread(started.errback, Failure())
        else:
            self._reactor.callFromThread(started.callback, (self._revision, compacted))
            self._serve()
        self._reactor.callFromThread(stopped.callback, None)

    def _serve(self):
        """Commit batch after batch until told to stop; then close."""
        while True:
            batch = self._take()
            stopping = batch[-1] is _STOP
            if stopping:
                batch.pop()
            if batch:
                self._commit(batch)
            if stopping:
                break
        self._db.close()

    def _open(self) -> int:
        """
        Open and recover the database; the compacted revision.  The database is made
        0600 before SQLite opens it, which then makes its WAL and shared-memory files
        with the same mode; existing ones are narrowed (``privatefiles``).
        """
        privatefiles.file(self._path)
        for companion in ("-wal", "-shm"):
            privatefiles.file(self._path + companion, create=False)
        self._db = sqlite3.connect(self._path, isolation_level=None)
        self._db.execute(_CACHE_SIZE)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        [(compacted,)] = self._db.execute(
            "SELECT value FROM meta WHERE name = 'compacted_revision'")
        [(newest,)] = self._db.execute("SELECT coalesce(max(mod_revision), 0) FROM revisions")
        # A compaction may have removed the newest row, a tombstone; its revision stays used.
        self._revision = max(newest, compacted)
        return compacted

    def _take(self) -> list:
        """
        Wait for a hand-off (a turn's list of requests, or ``_STOP``), then take every
        one pending while the batch is under ``_BATCH`` requests (a turn's are never
        split); ``_STOP``, if taken, last.
        """
        batch: list = []
        handed = self._requests.get()
        while True:
            if handed is _STOP:
                batch.append(handed)
                break
            batch.extend(handed)
            if len(batch) >= _BATCH:
                break
            try:
                handed = self._requests.get_nowait()
            except queue.Empty:
                break
        return batch

    def _commit(self, batch: list):
        """Apply ``batch`` ((request, Deferred) pairs) in one transaction; report it."""
        revision = self._revision
        outcomes = []
        try:
            self._db.execute("BEGIN")
            for request, acknowledged in batch:
                outcome, revision = self._apply(request, revision)
                outcomes.append((acknowledged, outcome))
            self._db.execute("COMMIT")
        except Exception as error:
            with suppress(sqlite3.Error):  # the batch has failed either way
                self._db.execute("ROLLBACK")
            failed = [(acknowledged, error) for _, acknowledged in batch]
            self._reactor.callFromThread(self._committed, self._revision, failed, False)
            return
        self._revision = revision
        self._reactor.callFromThread(self._committed, revision, outcomes, True)

    def _apply(self, request, revision: int):
        """
        Apply one request in the open transaction: (its outcome, the newest revision).
        The transaction sees the batch's earlier writes, and a rollback forgets them.
        A commit's writes (a single write is a commit of one) are all checked before
        any is inserted, so one whose condition fails leaves none behind; they take
        consecutive revisions (a row per revision is this layout).
        """
        if isinstance(request, _Compact):
            self._db.execute(_COMPACT, {"revision": request.revision})
            self._db.execute("UPDATE meta SET value = ? WHERE name = 'compacted_revision'",
                             (request.revision,))
            return None, revision
        try:
            events = [op.apply(_select_kv(self._db, self._values, op.key, revision),
                               revision + 1 + i) for i, op in enumerate(request)]
            stored = self._stored(request, events)
        except (StorageError, errors.StatusError) as error:
            return error, revision
        for event, value in zip(events, stored):
            self._db.execute(_INSERT, (event.revision, event.kv.key, event.kv.create_revision,
                                       value, event.type == DELETE))
        return events, events[-1].revision

    def _stored(self, ops: list, events: list) -> list:
        """
        The values as stored of ``ops`` (whose ``events`` they make; a tombstone's is
        empty), or the refusal etcd (with its default limits) or clientv3 makes of a
        transaction that large (``etcd3/txn.py``): the database takes what the other
        backend takes, and a too-large write fails alone, not its batch.
        """
        stored = [b"" if event.type == DELETE else self._values.stored(op.key, event.kv.value)
                  for op, event in zip(ops, events)]
        keys = [op.key.encode() for op in ops]
        if txn.may_be_refused(list(zip(keys, stored))):
            refusal = txn.refusal(txn.transaction([
                (key, op, None if event.type == DELETE else value)
                for key, op, event, value in zip(keys, ops, events, stored)]))
            if refusal is not None:
                raise refusal
        return stored


def _acknowledge(outcomes: list):
    for acknowledged, outcome in outcomes:
        if isinstance(outcome, list):  # a commit's events
            acknowledged.callback([event.kv for event in outcome])
        elif isinstance(outcome, Exception):
            acknowledged.errback(outcome)
        else:  # a compaction
            acknowledged.callback(None)


@implementer(IStorage)
@attrs.define(eq=False)
class SQLiteStorage:
    """
    The durable IStorage (see module docstring).  Its fields are the reactor's side.

    attrs for the declared state; ``eq=False`` because a store is an identity, not a
    value.  Writes issued before ``start()`` wait in the queue and are applied, in order,
    once the store has recovered; reads and watches need ``start()`` to have finished.
    """

    reactor: IReactorFromThreads
    path: str
    #: How many reader threads (and connections) serve reads.
    readers: int = 4
    #: What values go through on their way to disk and back (default: stored as they are).
    transformer: IValueTransformer = IDENTITY
    revision: int = attrs.field(default=0, init=False)
    compacted_revision: int = attrs.field(default=0, init=False)
    #: Transactions committed so far (a batch of writes is one).
    commits: int = attrs.field(default=0, init=False)
    #: What the writer takes: lists of (request, Deferred), each a turn's, then _STOP.
    _requests: queue.SimpleQueue = attrs.field(factory=queue.SimpleQueue, init=False)
    #: This turn's writes, handed to the writer at its end (``_hand_off``).
    _pending: list = attrs.field(factory=list, init=False)
    _hand_off_call: Optional[IDelayedCall] = attrs.field(default=None, init=False)
    _watchers: mvcc.Watchers = attrs.field(factory=mvcc.Watchers, init=False)
    _pool: ThreadPool = attrs.field(init=False)
    #: Idle reader connections, shared by the reader threads.
    _connections: queue.SimpleQueue = attrs.field(factory=queue.SimpleQueue, init=False)
    #: One Deferred per read under way, fired when it ends.
    _reads: set = attrs.field(factory=set, init=False)
    _serving: bool = attrs.field(default=False, init=False)
    _stopping: bool = attrs.field(default=False, init=False)
    _stopped: Deferred = attrs.field(factory=Deferred, init=False)
    _values: Transformed = attrs.field(
        default=attrs.Factory(lambda self: Transformed(self.transformer), takes_self=True),
        init=False)

    @_pool.default
    def _make_pool(self):
        return ThreadPool(0, self.readers, "platformd-sqlite-reader")

    def start(self):
        started: Deferred[tuple[int, int]] = Deferred()
        writer = _Writer(self.reactor, self.path, self._values, self._requests,
                         self._committed)
        threading.Thread(target=writer.run, args=(started, self._stopped),
                         name="platformd-sqlite-writer", daemon=True).start()
        return started.addCallback(self._recovered)

    def _recovered(self, state):
        self.revision, self.compacted_revision = state
        self._pool.start()
        self._serving = True

    def stop(self):
        self._serving, self._stopping = False, True
        done = DeferredList(list(self._reads))
        done.addCallback(lambda _: self._hand_off())
        done.addCallback(lambda _: self._requests.put(_STOP))
        done.addCallback(lambda _: self._stopped)
        return done.addCallback(self._close_readers)

    def _close_readers(self, _):
        self._pool.stop()  # its threads are idle: every read has finished
        while not self._connections.empty():
            self._connections.get().close()

    def get(self, key):
        return self._read(_select_kv, self._values, key, self.revision)

    def range(self, prefix, revision=None):
        try:
            at = mvcc.read_revision(self, revision)
        except StorageError as error:
            return fail(error)
        kvs = self._read(_select_kvs, self._values, prefix, _prefix_end(prefix), at)
        return kvs.addCallback(RangeResult, at)

    def create(self, key, value):
        return self._submit([mvcc.Create(key, value)]).addCallback(mvcc.only)

    def update(self, key, value, expected_revision=None):
        return self._submit([mvcc.Update(key, value, expected_revision)]).addCallback(
            mvcc.only)

    def delete(self, key, expected_revision=None):
        return self._submit([mvcc.Delete(key, expected_revision)]).addCallback(mvcc.only)

    def commit(self, ops):
        mvcc.check_commit(ops)
        return self._submit(list(ops))

    def watch(self, prefix, from_revision, sink):
        mvcc.check_watchable(self, from_revision)
        watch = self._watchers.add(prefix, from_revision, sink)
        if from_revision >= self.revision:
            watch.catch_up([])
        else:
            # Events up to self.revision are on disk; later ones are still to be
            # published, so the watch hears of them live.
            history = self._read(_select_events, self._values, prefix, from_revision,
                                 self.revision)
            history.addCallbacks(watch.catch_up, watch.fail)
        return watch

    def sync(self):
        return None  # the only writer: every write has reached the watches

    def needs_rewrite(self, key):
        return key in self._values.stale_keys

    def compact(self, revision):
        self._check_serving()
        try:
            mvcc.check_compactable(self, revision)
        except StorageError as error:
            return fail(error)
        self.compacted_revision = revision
        reads = DeferredList(list(self._reads))
        return reads.addCallback(lambda _: self._enqueue(_Compact(revision)))

    def _committed(self, revision: int, outcomes: list, committed: bool):
        """On the reactor: a batch's outcome, committed or not."""
        self.revision = revision
        if committed:
            self.commits += 1
        events = [event for _, outcome in outcomes if isinstance(outcome, list)
                  for event in outcome]
        self._watchers.publish(events, lambda: _acknowledge(outcomes))

    def _submit(self, ops: list):
        """
        Queue the writes ``ops`` (a commit) for the writer once their values can be
        transformed without waiting (``Transformed.then_all_prepared``: a KMS plugin is
        asked here, on the reactor, never in the writer, which would hold back every
        write behind it).
        """
        return self._values.then_all_prepared(ops, self.reactor, lambda: self._queue(ops))

    def _queue(self, ops: list):
        if self._stopping:  # also a write that waited on a KMS plugin meanwhile
            raise RuntimeError("SQLiteStorage is stopped: it takes no more writes")
        return self._enqueue(ops)

    def _enqueue(self, request):
        """
        Queue ``request`` for the writer with this turn's other writes (module
        docstring): the turn's first write schedules their hand-off.
        """
        acknowledged: Deferred[Optional[KeyValue]] = Deferred()
        if not self._pending:
            self._hand_off_call = self.reactor.callLater(  # type: ignore[attr-defined]
                0, self._hand_off)
        self._pending.append((request, acknowledged))
        return acknowledged

    def _hand_off(self) -> None:
        """Give the writer the writes queued since the last hand-off, in one put."""
        call, self._hand_off_call = self._hand_off_call, None
        if call is not None and call.active():
            call.cancel()  # (stop() hands off at once)
        if self._pending:
            pending, self._pending = self._pending, []
            self._requests.put(pending)

    def _check_serving(self):
        if not self._serving:
            raise RuntimeError("SQLiteStorage serves reads between start() and stop()")

    def _read(self, query, *args):
        """Deferred: ``query(connection, *args)`` in a reader thread."""
        self._check_serving()
        finished: Deferred[None] = Deferred()
        self._reads.add(finished)

        def ended(result):
            self._reads.remove(finished)
            finished.callback(None)
            return result

        result = deferToThreadPool(self.reactor, self._pool, self._query, query, *args)
        return result.addBoth(ended)

    def _query(self, query, *args):
        try:
            db = self._connections.get_nowait()
        except queue.Empty:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            db.execute(_CACHE_SIZE)
        try:
            return query(db, *args)
        finally:
            self._connections.put(db)
