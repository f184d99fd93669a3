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
(``docs/performance.md``).  The writer takes every pending write (up to
``sqlitewriter.BATCH``), applies them in order in one transaction, each with its own
compare-and-swap check and the next revision, commits once (bulk writes, Events, in
commits of their own after the others: ``sqlitewriter.split``, ``bulklane.py``), and
hands each commit's outcome to the reactor in one ``callFromThread``: the reactor sets
``revision``, publishes the events to the watches, then fires the writes' Deferreds.
For its checks the writer reads each key's current row inside its transaction (one index
lookup), which also sees the batch's earlier writes; a rollback then leaves nothing to
undo.  Measured against a copy of every key kept in memory by the writer, the throughput
was the same within noise, and the lookup needs neither the memory nor a full scan at
start.  Reads run on a small pool of reader threads with connections of their own.
Nothing touches the disk on the reactor thread.

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

Modules: this one is the reactor's side; the writer thread is ``sqlitewriter.py``, the
SQL ``sqlitequeries.py``.  ``shared=True`` (``--shared-data-dir``) lets several
processes serve one database in one revision order: ``sqliteshared.py``.
"""

from __future__ import annotations

import queue
import threading
from typing import Optional

import attrs
from twisted.internet.defer import Deferred, DeferredList, fail, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorFromThreads
from twisted.internet.threads import deferToThreadPool
from twisted.python.threadpool import ThreadPool
from zope.interface import implementer

from platformd.bulklane import BulkLane, is_bulk
from platformd.storage import mvcc
from platformd.storage import sqlitequeries as queries
from platformd.storage.interface import IStorage, KeyValue, RangeResult, StorageError
from platformd.storage.sqliteshared import TAIL, Follower, SharedWriter, checked
from platformd.storage.sqlitewriter import STOP, Compact, Writer, acknowledge
from platformd.storage.transformers import IDENTITY, IValueTransformer, Transformed

#: Above every revision: a read of the newest version.
_NEWEST = 2**63 - 1


def _nothing():
    """What publishing the others' events acknowledges."""


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
    #: Whether other stores (other processes) write and watch the same file
    #: (``sqliteshared.py``); ``compose`` then allocates Services by compare-and-swap.
    shared: bool = False
    #: Shared: seconds between two looks at what the others committed, for when no
    #: ``inotify`` bell is heard (``sqliteshared.Follower``).
    poll_interval: float = 1.0
    #: The bulk lane (``bulklane.py``; None: no write is bulk): its bulk writes (Events)
    #: are committed after the others, a few at a time (``sqlitewriter.split``), and
    #: acknowledged in its turns; while another write is with the writer, it waits.
    lane: Optional[BulkLane] = None
    revision: int = attrs.field(default=0, init=False)
    compacted_revision: int = attrs.field(default=0, init=False)
    #: Transactions committed so far (a batch of writes is one).
    commits: int = attrs.field(default=0, init=False)
    #: What the writer takes: lists of (request, Deferred), each a turn's, then STOP.
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
    _writer: Optional[Writer] = attrs.field(default=None, init=False)
    #: Shared: the reactor's side of following the others (``sqliteshared.Follower``).
    _follower: Optional[Follower] = attrs.field(default=None, init=False)
    _values: Transformed = attrs.field(
        default=attrs.Factory(lambda self: Transformed(self.transformer), takes_self=True),
        init=False)

    @_pool.default
    def _make_pool(self):
        return ThreadPool(0, self.readers, "platformd-sqlite-reader")

    def start(self):
        started: Deferred[tuple[int, int]] = Deferred()
        writer = self._writer = (
            SharedWriter(self.reactor, self.path, self._values, self._requests,
                         self._caught_up, self._bulk) if self.shared else
            Writer(self.reactor, self.path, self._values, self._requests, self._committed,
                   self._bulk))
        threading.Thread(target=writer.run, args=(started, self._stopped),
                         name="platformd-sqlite-writer", daemon=True).start()
        return started.addCallback(self._recovered)

    def _recovered(self, state):
        self.revision, self.compacted_revision = state
        if isinstance(self._writer, SharedWriter):
            writer = self._writer
            self._follower = Follower(self.reactor, writer.shared,
                                      lambda: max(self.revision, writer.seen),
                                      lambda: self._requests.put([(TAIL, None)]),
                                      self.poll_interval)
            self._follower.start()
        self._pool.start()
        self._serving = True

    def stop(self):
        self._serving, self._stopping = False, True
        follower, self._follower = self._follower, None
        if follower is not None:  # (its file is closed once the writer stops)
            follower.stop()
        done = DeferredList(list(self._reads))
        done.addCallback(lambda _: self._hand_off())
        done.addCallback(lambda _: self._requests.put(STOP))
        done.addCallback(lambda _: self._stopped)
        return done.addCallback(self._close_readers)

    def _close_readers(self, _):
        self._pool.stop()  # its threads are idle: every read has finished
        while not self._connections.empty():
            self._connections.get().close()

    def get(self, key):
        # Shared: the newest version any process committed (as etcd's get), which no
        # compaction can have removed.
        return self._read(queries.select_kv, self._values, key,
                          _NEWEST if self.shared else self.revision)

    def range(self, prefix, revision=None):
        try:
            self._follow_compaction()
            at = mvcc.read_revision(self, revision)
        except StorageError as error:
            return fail(error)
        kvs = self._read_history(at, queries.select_kvs, self._values, prefix,
                                 queries.prefix_end(prefix), at)
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
        self._follow_compaction()
        mvcc.check_watchable(self, from_revision)
        watch = self._watchers.add(prefix, from_revision, sink)
        if from_revision >= self.revision:
            watch.catch_up([])
        else:
            # Events up to self.revision are on disk; later ones are still to be
            # published, so the watch hears of them live.
            history = self._read_history(from_revision, queries.select_events, self._values,
                                         prefix, from_revision, self.revision)
            history.addCallbacks(watch.catch_up, watch.fail)
        return watch

    def sync(self):
        if self._follower is None:
            return None  # the only writer: every write has reached the watches
        return self._follower.sync(self.revision)

    def needs_rewrite(self, key):
        return key in self._values.stale_keys

    def compact(self, revision):
        self._check_serving()
        if self._follower is not None:
            shared = self._follower.shared.compacted
            if self.compacted_revision < revision <= shared:
                # Another process compacted as far: the history is gone, as wished.
                self.compacted_revision = shared
                return succeed(None)
        try:
            mvcc.check_compactable(self, revision)
        except StorageError as error:
            return fail(error)
        self.compacted_revision = revision
        reads = DeferredList(list(self._reads))
        return reads.addCallback(lambda _: self._enqueue(Compact(revision)))

    def _committed(self, revision: int, outcomes: list, committed: bool):
        """On the reactor: a batch's outcome, committed or not."""
        self.revision = revision
        if committed:
            self.commits += 1
        events = [event for _, outcome in outcomes if isinstance(outcome, list)
                  for event in outcome]
        self._watchers.publish(events, lambda: acknowledge(outcomes))

    def _caught_up(self, revision: int, compacted: int, others: list, lost, outcomes: list,
                   committed: bool):
        """
        On the reactor, shared: what the writer read of the others' commits (``others``,
        or ``lost`` when they were compacted away: every watch ends and relists), then
        its own batch's outcome (``sqliteshared.SharedWriter``).
        """
        self.revision = max(self.revision, revision)
        self.compacted_revision = max(self.compacted_revision, compacted)
        if lost is not None:
            self._watchers.fail(lost)
        if others:
            self._watchers.publish(others, _nothing)
        self._committed(self.revision, outcomes, committed)
        if self._follower is not None:  # (a batch committed as the store stops)
            self._follower.reached(self.revision)

    def _follow_compaction(self):
        """Shared: take up a compaction another process made (the mapped revision)."""
        if self._follower is not None:
            self.compacted_revision = max(self.compacted_revision,
                                          self._follower.shared.compacted)

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
        docstring): the turn's first write schedules their hand-off.  With a bulk lane,
        a bulk write is acknowledged in a turn of the lane, and another holds the lane
        until it is acknowledged.
        """
        acknowledged: Deferred[Optional[KeyValue]] = Deferred()
        if not self._pending:
            self._hand_off_call = self.reactor.callLater(  # type: ignore[attr-defined]
                0, self._hand_off)
        self._pending.append((request, acknowledged))
        lane = self.lane
        if lane is not None and isinstance(request, list):
            if is_bulk(request, lane.prefixes):
                acknowledged.addBoth(lane.passing)
            else:
                lane.hold()
                acknowledged.addBoth(lane.release)
        return acknowledged

    def _hand_off(self) -> None:
        """Give the writer the writes queued since the last hand-off, in one put."""
        call, self._hand_off_call = self._hand_off_call, None
        if call is not None and call.active():
            call.cancel()  # (stop() hands off at once)
        if self._pending:
            pending, self._pending = self._pending, []
            self._requests.put(pending)

    @property
    def _bulk(self) -> tuple:
        return self.lane.prefixes if self.lane is not None else ()

    def _check_serving(self):
        if not self._serving:
            raise RuntimeError("SQLiteStorage serves reads between start() and stop()")

    def _read_history(self, revision: int, query, *args):
        """``_read``, shared: in a snapshot still holding ``revision`` (``checked``)."""
        if self._follower is not None:
            return self._read(checked, revision, query, *args)
        return self._read(query, *args)

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
            db = queries.connect(self.path, check_same_thread=False)
        try:
            return query(db, *args)
        finally:
            self._connections.put(db)
