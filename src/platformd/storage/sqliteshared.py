"""
``SQLiteStorage(shared=True)``: several processes (or several stores in one process)
write and watch one database and see one revision order (``docs/storage.md``, "Several
processes on one database").  Three pieces:

- ``SharedWriter``, the writer thread's shared half.  Around each batch it takes the
  writers' lock (``sharedrevision.py``); inside, in the batch's transaction, it reads
  the database's newest revision, reads the rows other processes committed since it
  last looked (with their previous versions, as a watch's history is read), applies its
  batch at the revisions that follow, commits, publishes its newest revision and lets go
  of the lock.  Then one ``callFromThread`` hands the reactor the others' events and its
  own, in revision order.  On request it also *tails*: reads, without the lock, the rows
  up to the published revision (committed, since publishing follows COMMIT), in the same
  thread as its commits, so the two stay in order.
- ``Follower``, the reactor's shared half: it asks the writer to tail when another
  process rings the bell (``inotify`` on the revision file, coalesced: one request at a
  time, none when this process has seen the published revision already) and at a slow
  poll on the reactor's clock (for a platform without inotify, and as a safety net);
  and it answers ``sync()``, from the mapped revision when this process is there.
- ``checked``: a read in one SQLite snapshot that first checks the snapshot's compacted
  revision, since another process may compact while this one still reads below it.

History lost to another process's compaction (this process fell that far behind) is
not skipped over silently: every watch ends with ``CompactedError``, so the watch cache
relists, as over etcd.
"""

from __future__ import annotations

import sqlite3
from contextlib import suppress
from typing import Callable, Optional

import attrs
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorFDSet
from twisted.python.failure import Failure
from twisted.python.filepath import FilePath

from platformd.storage import sqlitequeries as queries
from platformd.storage.interface import CompactedError
from platformd.storage.sharedrevision import SharedRevision
from platformd.storage.sqlitewriter import BATCH, Compact, Writer

try:
    from twisted.internet import inotify
except ImportError:  # not Linux: the poll alone
    inotify = None  # type: ignore[assignment]

#: A request for the writer to tail (with a None Deferred, in a hand-off of its own).
TAIL = object()

#: The database's newest revision (its newest row, or the compacted revision when a
#: compaction removed that row, a tombstone) and its compacted revision.
_STATE = """
SELECT max(coalesce((SELECT max(mod_revision) FROM revisions), 0), value), value
FROM meta WHERE name = 'compacted_revision'
"""

#: Another process's revisions read in one go at most: a process far behind catches up
#: in steps, each handed to the reactor alone, not in one list of unbounded size.
_STEP = BATCH


def checked(db, revision: int, query, *args):
    """
    ``query(db, *args)`` in one read transaction whose snapshot still holds the state
    at ``revision``; CompactedError if another process compacted past it.
    """
    db.execute("BEGIN")
    try:
        [(_, compacted)] = db.execute(_STATE)
        if revision < compacted:
            raise CompactedError(revision, compacted)
        return query(db, *args)
    finally:
        db.execute("COMMIT")


class SharedWriter(Writer):
    """
    The writer thread over a database other processes write too (module docstring).
    It reports to the reactor's ``committed(revision, compacted, others, lost,
    outcomes, committed)``: the newest revision it has seen, the compacted one, the
    events others committed, the CompactedError that ended the watches' history (or
    None), its batch's outcomes, and whether they were committed.
    """

    def _open(self) -> int:
        """Open the revision file and the database; publish their state, under the lock."""
        self.shared = SharedRevision(self._path + ".revision")
        with self.shared.locked():
            compacted = super()._open()
            self._compacted = compacted
            # From the table, not from the file: it may be older than the database.
            self.shared.publish(self._revision, compacted)
        return compacted

    def _serve(self):
        super()._serve()
        self.shared.close()

    @property
    def seen(self) -> int:
        """The newest revision this thread has read or written (read by the reactor)."""
        return self._revision

    def _commit(self, batch: list):
        writes = [request for request in batch if request[0] is not TAIL]
        if not writes:
            return self._tail()
        with self.shared.locked():
            self._others: list = []
            self._lost: Optional[Exception] = None
            super()._commit(writes)

    def _begin(self) -> int:
        """The newest revision of any process: this batch's writes follow it."""
        self._db.execute("BEGIN IMMEDIATE")
        [(newest, self._compacted)] = self._db.execute(_STATE)
        newest = max(newest, self.shared.newest)
        self._others, self._lost = self._catch_up(newest)
        return newest

    def _apply(self, request, revision: int):
        if isinstance(request, Compact):
            if request.revision <= self._compacted:  # another process went as far
                return None, revision
            self._compacted = request.revision
        return super()._apply(request, revision)

    def _report(self, revision: int, outcomes: list):
        self.shared.publish(revision, self._compacted)
        self._reactor.callFromThread(self._committed, revision, self._compacted,
                                     self._others, self._lost, outcomes, True)

    def _failed(self, failed: list):
        """The others' events read before the failure are committed: they go too."""
        self._reactor.callFromThread(self._committed, self._revision, self._compacted,
                                     self._others, self._lost, failed, False)

    def _tail(self):
        """Read what the other processes committed up to the published revision."""
        newest, others, lost = self.shared.newest, [], None
        if newest > self._revision:
            self._db.execute("BEGIN")  # the snapshot starts after newest was read
            try:
                [(_, self._compacted)] = self._db.execute(_STATE)
                others, lost = self._catch_up(newest)
            except Exception:
                others, lost = [], Failure()  # the watches cannot go on: relist
            finally:
                with suppress(sqlite3.Error):
                    self._db.execute("COMMIT")
            self._revision = max(self._revision, newest)
        self._reactor.callFromThread(self._committed, self._revision, self._compacted,
                                     others, lost, [], False)

    def _catch_up(self, newest: int):
        """
        In the open transaction: the events others committed after ``_revision`` up to
        ``newest`` (all but the last ``_STEP`` of them handed to the reactor already),
        or the CompactedError that says they are gone.
        """
        if newest <= self._revision:
            return [], None
        if self._compacted > self._revision:
            lost = CompactedError(self._revision, self._compacted)
            self._revision = newest
            return [], lost
        while newest - self._revision > _STEP:
            upto = self._revision + _STEP
            events = queries.select_events(self._db, self._values, "", self._revision, upto)
            self._reactor.callFromThread(self._committed, upto, self._compacted, events, None,
                                         [], False)
            self._revision = upto
        events = queries.select_events(self._db, self._values, "", self._revision, newest)
        self._revision = newest
        return events, None


@attrs.define(eq=False)
class Follower:
    """
    The reactor's side of a shared store (module docstring): when to ask the writer
    to tail, and ``sync()``.  Started once the writer has opened the revision file.
    """

    reactor: object
    shared: SharedRevision
    #: The newest revision this process has seen (its writer's, or the reactor's).
    seen: Callable[[], int]
    #: Puts a tail request on the writer's queue.
    request_tail: Callable[[], None]
    #: Seconds between two looks at the published revision without a bell.
    poll_interval: float = 1.0
    #: Whether a tail request is on its way (one at a time).
    _requested: bool = attrs.field(default=False, init=False)
    #: (revision, Deferred) of the syncs waiting for the reactor to reach revision.
    _syncs: list = attrs.field(factory=list, init=False)
    _notifier: Optional[object] = attrs.field(default=None, init=False)
    _poll: Optional[IDelayedCall] = attrs.field(default=None, init=False)

    def start(self) -> None:
        """Listen for the bell (on a reactor that reads descriptors), and poll."""
        if inotify is not None and IReactorFDSet.providedBy(self.reactor):
            notifier = inotify.INotify(self.reactor)
            notifier.startReading()
            notifier.watch(FilePath(self.shared.path), mask=inotify.IN_MODIFY,
                           callbacks=[lambda *_: self.look()])
            self._notifier = notifier
        self._schedule()

    def stop(self) -> None:
        if self._notifier is not None:
            self._notifier.loseConnection()  # type: ignore[attr-defined]
            self._notifier = None
        if self._poll is not None and self._poll.active():
            self._poll.cancel()
        self._poll = None
        syncs, self._syncs = self._syncs, []
        for _, waiting in syncs:
            waiting.errback(RuntimeError("SQLiteStorage stopped before it caught up"))

    def _schedule(self) -> None:
        self._poll = self.reactor.callLater(  # type: ignore[attr-defined]
            self.poll_interval, self._polled)

    def _polled(self) -> None:
        self.look()
        self._schedule()

    def look(self) -> None:
        """Ask the writer to tail if another process committed what this one has not seen."""
        if self.shared.newest > self.seen():
            self.tail()

    def tail(self) -> None:
        if not self._requested:
            self._requested = True
            self.request_tail()

    def sync(self, revision: int) -> Optional[Deferred]:
        """None if ``revision`` (the reactor's) is the newest published, else a Deferred
        firing once the reactor has reached the newest published now."""
        newest = self.shared.newest
        if newest <= revision:
            return None
        waiting: Deferred[None] = Deferred()
        self._syncs.append((newest, waiting))
        self.tail()
        return waiting

    def reached(self, revision: int) -> None:
        """
        The writer reported: the reactor is at ``revision``.  A bell heard while the
        tail was under way was not acted on (one request at a time), so look again.
        """
        self._requested = False
        if self._syncs:
            ready = [waiting for wanted, waiting in self._syncs if wanted <= revision]
            self._syncs = [(wanted, waiting) for wanted, waiting in self._syncs
                           if wanted > revision]
            for waiting in ready:
                waiting.callback(None)
        self.look()
