"""
The writer thread of ``SQLiteStorage`` (``sqlite.py``, whose docstring tells the design):
it takes the reactor's hand-offs, applies each batch in one transaction with group
commit, and reports the outcome to the reactor in one ``callFromThread``.
"""

from __future__ import annotations

import queue
import sqlite3
from contextlib import suppress

import attrs
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from platformd import errors
from platformd.bulklane import is_bulk
from platformd.files import privatefiles
from platformd.storage import sqlitequeries as queries
from platformd.storage.etcd3 import txn
from platformd.storage.interface import DELETE, StorageError
from platformd.storage.transformers import Transformed

#: Once a batch has this many writes, it takes no more hand-offs.
BATCH = 1000

#: At most this many bulk writes (``split``) go in one commit; between two, the writes
#: handed meanwhile are committed first.
BULK_COMMIT = 16


@attrs.frozen
class Compact:
    """The writer's part of a compaction."""

    revision: int


#: Tells the writer to finish what is queued before it and exit.
STOP = object()


class Writer:
    """
    The writer thread and its connection.

    A plain class rather than attrs: every field belongs to the thread, which sets them
    up itself in ``run``; the reactor only ever hears from it through ``callFromThread``.
    """

    def __init__(self, reactor, path: str, values: Transformed, requests: queue.SimpleQueue,
                 committed, bulk: tuple = ()):
        self._reactor = reactor
        self._bulk = bulk
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
        """
        Commit until told to stop; then close.  Each round takes what was handed (waiting
        for it only when nothing is held), commits its writes other than bulk ones, then
        at most ``BULK_COMMIT`` of the bulk writes held (``split``).
        """
        held: list = []
        stopping = False
        while not stopping or held:
            batch = (self._take(wait=not held) if not stopping and len(held) < BATCH
                     else [])
            if batch and batch[-1] is STOP:
                stopping = True
                batch.pop()
            others, bulk = split(batch, self._bulk)
            held.extend(bulk)
            if others:
                self._commit(others)
            if held:
                self._commit(held[:BULK_COMMIT])
                del held[:BULK_COMMIT]
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
        self._db = queries.connect(self._path)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(queries.SCHEMA)
        [(compacted,)] = self._db.execute(
            "SELECT value FROM meta WHERE name = 'compacted_revision'")
        [(newest,)] = self._db.execute("SELECT coalesce(max(mod_revision), 0) FROM revisions")
        # A compaction may have removed the newest row, a tombstone; its revision stays used.
        self._revision = max(newest, compacted)
        return compacted

    def _take(self, wait: bool = True) -> list:
        """
        Wait for a hand-off (a turn's list of requests, or ``STOP``; not ``wait``: none
        is an empty batch), then take every one pending while the batch is under
        ``BATCH`` requests (a turn's are never split); ``STOP``, if taken, last.
        """
        batch: list = []
        try:
            handed = self._requests.get(block=wait)
        except queue.Empty:
            return batch
        while True:
            if handed is STOP:
                batch.append(handed)
                break
            batch.extend(handed)
            if len(batch) >= BATCH:
                break
            try:
                handed = self._requests.get_nowait()
            except queue.Empty:
                break
        return batch

    def _commit(self, batch: list):
        """Apply ``batch`` ((request, Deferred) pairs) in one transaction; report it."""
        outcomes = []
        try:
            revision = self._begin()
            for request, acknowledged in batch:
                outcome, revision = self._apply(request, revision)
                outcomes.append((acknowledged, outcome))
            self._db.execute("COMMIT")
        except Exception as error:
            with suppress(sqlite3.Error):  # the batch has failed either way
                self._db.execute("ROLLBACK")
            self._failed([(acknowledged, error) for _, acknowledged in batch])
            return
        self._revision = revision
        self._report(revision, outcomes)

    def _begin(self) -> int:
        """Begin the batch's transaction; the revision its first write follows."""
        self._db.execute("BEGIN")
        return self._revision

    def _report(self, revision: int, outcomes: list):
        """Hand the reactor a committed batch's outcomes, ``revision`` its newest."""
        self._reactor.callFromThread(self._committed, revision, outcomes, True)

    def _failed(self, failed: list):
        """Hand the reactor the failures of a batch whose transaction failed."""
        self._reactor.callFromThread(self._committed, self._revision, failed, False)

    def _apply(self, request, revision: int):
        """
        Apply one request in the open transaction: (its outcome, the newest revision).
        The transaction sees the batch's earlier writes, and a rollback forgets them.
        A commit's writes (a single write is a commit of one) are all checked before
        any is inserted, so one whose condition fails leaves none behind; they take
        consecutive revisions (a row per revision is this layout).
        """
        if isinstance(request, Compact):
            self._db.execute(queries.COMPACT, {"revision": request.revision})
            self._db.execute("UPDATE meta SET value = ? WHERE name = 'compacted_revision'",
                             (request.revision,))
            return None, revision
        try:
            events = [op.apply(queries.select_kv(self._db, self._values, op.key, revision),
                               revision + 1 + i) for i, op in enumerate(request)]
            stored = self._stored(request, events)
        except (StorageError, errors.StatusError) as error:
            return error, revision
        for event, value in zip(events, stored):
            self._db.execute(queries.INSERT, (event.revision, event.kv.key,
                                              event.kv.create_revision, value,
                                              event.type == DELETE))
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


def split(batch: list, bulk: tuple) -> tuple[list, list]:
    """
    ``batch`` as (its writes of keys under none of the ``bulk`` prefixes, those whose
    every key is under one).  The writer commits bulk writes (Events: written often,
    waited on by few) after the others and a few at a time, so that another write never
    waits for a long commit of theirs, and the reactor hears of it first
    (``docs/performance.md``, "Events beside other writes").  Reordering is safe: none
    of the writes waiting has been acknowledged, so no client can have seen one come
    before another; a key is bulk or not, so one key's writes keep their order.
    """
    if not bulk:
        return batch, []
    others: list = []
    bulked: list = []
    for pair in batch:
        (bulked if is_bulk(pair[0], bulk) else others).append(pair)
    return others, bulked


def acknowledge(outcomes: list):
    for acknowledged, outcome in outcomes:
        if isinstance(outcome, list):  # a commit's events
            acknowledged.callback([event.kv for event in outcome])
        elif isinstance(outcome, Exception):
            acknowledged.errback(outcome)
        else:  # a compaction
            acknowledged.callback(None)
