"""
``EtcdStorage``: IStorage over an etcd v3 cluster, as upstream's ``storage/etcd3/store.go``.

Keys: an interface key ``root + rest`` is the etcd key ``prefix + rest`` (the server uses
``root="/registry"`` and ``--etcd-prefix``, default ``/registry``, so keys are upstream's).

Writes are transactions, as upstream's: a create is
``Txn(CreateRevision(key) == 0) Put`` (failing, the key exists) and an update or delete
is ``Txn(CreateRevision(key) > 0 [and ModRevision(key) == expected]) Put/Delete`` with
``prev_kv`` and ``Get(key)`` as its else branch.  The outcome is read with ``mvcc``'s
operations: ``op.apply(previous version, revision)`` gives the event (and the result)
when the transaction succeeded, and raises the right error from the version the else
branch read when it did not.  ``txn.py`` builds them, and refuses one clientv3 would
not send (over 2 MiB); etcd refuses one over its ``--max-request-bytes`` itself.
``commit`` puts several such writes in one transaction (their conditions all compared,
their Puts and Deletes in order, every key read back in the else branch): one revision,
its events in op order in the watch, the reply holding each one's previous version.

Revisions are etcd's, so every replica over the cluster agrees on them.  One etcd watch
over the whole prefix (``watchstream.py``) feeds ``mvcc.Watchers``; ``revision`` is the
revision up to which every event has been delivered.  A write is acknowledged once its
revision has been (and no new watch is still reading its history), which keeps the
interface's promise that a watch hears of a write before it is acknowledged.  A new
watch from an older revision reads its history with a watch of its own from that
revision up to ``revision``.

A write's own event need not wait for the watch to bring it: the transaction's reply
holds everything the event does (the previous version from ``prev_kv``, the new one,
the revision), and a revision is one transaction.  So when the revision before it has
been delivered, the event is delivered from the reply at once; when it has not (a write
of another replica, or of this one, still on its way), the event waits in ``_ahead``
until it has.  The watch's later copy of a delivered revision is dropped.  This takes
the watch's lag (10-20 ms under load: grpcio's thread, the watch thread, the reactor)
out of every write's latency; other replicas' writes still come only by the watch, so
the order of events, and the absence of gaps, stay the watch's.

The marker key (``prefix + "#platformd-progress"``, inside the watched range, outside
every interface key) is how the store learns that a watch has reached a revision when no
event is due: it writes the marker and waits for the watch to deliver that write.
``sync`` (consistent reads from the cache, upstream's ``ConsistentListFromCache``) and
the end of a history read use it.  Upstream asks etcd for a progress notification
instead, on etcd releases that answer it correctly (3.4.31, 3.5.13 and later); Debian's
3.4.23 does not.  While the store waits on its watch so (or for an event behind another
replica's), a watch silent for ``STALL_AFTER`` is opened again on the next member: the
one it was on may hang with its connection open.

Compaction: ``compact(rev)`` compacts etcd.  The periodic compaction every replica
runs (``compactor.py``, upstream's ``compact.go``) records each compaction in the key
``compact_rev_key``; every store watches that key, so ``compacted_revision`` follows
compactions made by any replica.  Below it, reads and watches fail with
``CompactedError`` (410 Gone above).
"""

from __future__ import annotations

from typing import Any, Optional

import attrs
from twisted.internet.defer import Deferred, ensureDeferred, execute, fail, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from platformd import errors
from platformd.protos.etcd.api.etcdserverpb import rpc_pb2
from platformd.storage import mvcc
from platformd.storage.etcd3 import txn
from platformd.storage.etcd3.client import Client
from platformd.storage.etcd3.watchstream import Handlers, WatchStream
from platformd.storage.interface import (
    CompactedError,
    FutureRevisionError,
    IStorage,
    KeyExistsError,
    KeyValue,
    RangeResult,
    StorageError,
)
from platformd.storage.transformers import IDENTITY, IValueTransformer, Transformed

log = Logger()

#: Upstream's key (``storage/etcd3/compact.go``): its value is the revision last
#: compacted, its version counts compactions, so replicas compact once per interval.
COMPACT_REV_KEY = b"compact_rev_key"

#: The marker key's name after the prefix (see module docstring).
MARKER_SUFFIX = "#platformd-progress"

#: etcd's error messages for reads outside the history it holds.
_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"

#: The most writes whose events wait for earlier revisions (``_committed``).
_AHEAD = 10_000
#: Keys a Range reads per page: bounds one reply's size.
_PAGE = 10_000
#: How long ``stop`` waits for each watch thread (they end in milliseconds).
_JOIN = 5.0
#: A watch that delivers nothing this long (seconds) while the store waits on it (a
#: write's event behind another replica's, a sync's marker) is opened again, on the next
#: member: the one it was on may hang with the connection open, which keepalive notices
#: only after 40 s.  A live watch, however far behind, delivers something sooner.
STALL_AFTER = 3.0


def prefix_end(key: bytes) -> bytes:
    """etcd's range end of every key starting with ``key`` (clientv3.GetPrefixRangeEnd)."""
    end = bytearray(key)
    for i in reversed(range(len(end))):
        if end[i] < 0xFF:
            end[i] += 1
            return bytes(end[:i + 1])
    return b"\0"  # every key


@implementer(IStorage)
@attrs.define(eq=False)
class EtcdStorage:
    """
    The etcd IStorage (see module docstring).  Its fields are the reactor's side.

    attrs for the declared state; ``eq=False`` because a store is an identity.
    """

    reactor: Any  # IReactorTime, IReactorFromThreads
    client: Client
    #: etcd's key prefix (``--etcd-prefix``) and the interface key root it stands for.
    prefix: str = "/registry"
    root: str = "/registry"
    transformer: IValueTransformer = IDENTITY
    revision: int = attrs.field(default=0, init=False)
    compacted_revision: int = attrs.field(default=0, init=False)
    #: Several servers share it (as they share SQLite's with --shared-data-dir): what
    #: they allocate together (service addresses and ports) is changed by
    #: compare-and-swap (registry/serviceallocation).
    shared: bool = attrs.field(default=True, init=False)
    #: Whether the store's watch is connected to a member (for /readyz).
    connected: bool = attrs.field(default=False, init=False)
    _values: Transformed = attrs.field(
        default=attrs.Factory(lambda self: Transformed(self.transformer), takes_self=True),
        init=False)
    _watchers: mvcc.Watchers = attrs.field(factory=mvcc.Watchers, init=False)
    _stream: Optional[WatchStream] = attrs.field(default=None, init=False)
    #: (revision, Deferred) of writes and syncs waiting for the watch to reach revision.
    _waiting: list = attrs.field(factory=list, init=False)
    #: Catch-up watches under way, stopped with the store.
    _catching_up: set = attrs.field(factory=set, init=False)
    #: revision → events of this store's writes committed past a revision not yet
    #: delivered (``_committed``): at most one entry per write in flight.
    _ahead: dict = attrs.field(factory=dict, init=False)
    #: ``sync`` calls waiting for the next quorum read, and whether one is under way.
    _syncs_due: list = attrs.field(factory=list, init=False)
    _syncing: bool = attrs.field(default=False, init=False)
    #: How many times the watch has delivered, and the check that it goes on doing so
    #: while the store waits on it (``_await_watch``).
    _heard: int = attrs.field(default=0, init=False)
    _stall: Any = attrs.field(default=None, init=False)  # IDelayedCall

    # Keys between the interface and etcd.

    def _etcd_key(self, key: str) -> bytes:
        if not key.startswith(self.root):
            raise ValueError(f"{key!r} is not under {self.root!r}")
        return (self.prefix + key[len(self.root):]).encode()

    def _key(self, etcd_key: bytes) -> str:
        return self.root + etcd_key.decode()[len(self.prefix):]

    @property
    def _marker(self) -> bytes:
        return (self.prefix + MARKER_SUFFIX).encode()

    # Life.

    def start(self):
        """Read the current and compacted revisions, then follow the prefix."""
        self.client.start()
        return self.client.unary("Range", rpc_pb2.RangeRequest(
            key=COMPACT_REV_KEY), repeatable=True).addCallback(self._follow)

    def _follow(self, reply):
        self.revision = reply.header.revision
        self.compacted_revision = int(reply.kvs[0].value) if reply.kvs else 0
        self._stream = self._open_stream(self.revision + 1, self._handlers())
        self._stream.start()

    def _handlers(self) -> Handlers:
        return Handlers(on_events=self._delivered, on_compacted=self._stream_compacted,
                        on_key=self._compaction_seen, on_connection=self._connection)

    def _open_stream(self, start_revision: int, handlers: Handlers,
                     prefix: Optional[str] = None) -> WatchStream:
        catch_up = prefix is not None  # wants all of its history
        key = self._etcd_key(self.root if prefix is None else prefix)
        return WatchStream(self.reactor, lambda: self.client.endpoint().watch, key,
                           prefix_end(key), start_revision, self._key, self._values, handlers,
                           single_key=None if catch_up else COMPACT_REV_KEY,
                           marker=self._marker,
                           delivered=(lambda: 0) if catch_up else (lambda: self.revision))

    def stop(self):
        """
        End the watch streams, close the channel (which cancels the calls under way)
        and join the streams' threads and the call pool, so nothing of grpcio's is left
        running when the process exits.  The joins are short: every wait in those
        threads ends on the stop event or on the channel's close.
        """
        if self._stall is not None and self._stall.active():
            self._stall.cancel()
        streams = [s for s in [self._stream, *self._catching_up] if s is not None]
        for stream in streams:
            stream.stop()
        self.client.stop()
        for stream in streams:
            if not stream.join(_JOIN):
                log.warn("an etcd watch thread did not end within {s}s", s=_JOIN)
        waiting, self._waiting = self._waiting, []
        for _revision, d in waiting:
            d.errback(RuntimeError("EtcdStorage stopped"))
        return succeed(None)

    # Reads.

    def get(self, key):
        # One key (the health checks' read): small, so hedged, lest a hung member fail
        # the checks whose read went to it.
        read = self.client.hedged("Range", rpc_pb2.RangeRequest(key=self._etcd_key(key)))
        return read.addCallback(lambda reply: self._with_values(self._first, reply.kvs))

    def _first(self, kvs) -> Optional[KeyValue]:
        return self._kv(kvs[0]) if kvs else None

    def _kv(self, kv) -> KeyValue:
        """An etcd KeyValue, its value read back (see ``_with_values``)."""
        key = self._key(kv.key)
        return KeyValue(key, self._values.value(key, kv.value), kv.create_revision,
                        kv.mod_revision)

    def _with_values(self, work, *args) -> Deferred:
        """
        Deferred of ``work(*args)``, which transforms a value or two: at once on the
        reactor when values are stored as they are (a write then never leaves the
        reactor but for etcd's reply), else in the client's pool, since a transformer
        may wait on a KMS plugin.
        """
        if self._values.identity:
            return execute(work, *args)
        return self.client.in_pool(work, *args)

    def range(self, prefix, revision=None):
        try:
            at = None if revision is None else mvcc.read_revision(self, revision)
        except StorageError as error:
            return fail(error)
        if at == 0:  # before etcd's first revision: nothing, and nothing to ask
            return succeed(RangeResult([], 0))
        return ensureDeferred(self._range(prefix, at)).addErrback(self._history_error,
                                                                   revision)

    async def _range(self, prefix: str, at: Optional[int]) -> RangeResult:
        """
        Every key under ``prefix`` at ``at`` (None: now), paged; each page's values are
        read back in the pool (a page is up to ``_PAGE`` of them).
        """
        key = self._etcd_key(prefix)
        end = prefix_end(key)
        kvs: list = []
        while True:
            reply = await self.client.unary("Range", rpc_pb2.RangeRequest(
                key=key, range_end=end, revision=at or 0, limit=_PAGE), repeatable=True)
            at = at or reply.header.revision  # every page at the first page's revision
            kvs.extend(await self.client.in_pool(self._kvs, reply.kvs))
            if not reply.more:
                return RangeResult(kvs, at)
            key = reply.kvs[-1].key + b"\0"

    def _kvs(self, kvs) -> list:
        return [self._kv(kv) for kv in kvs]

    def _history_error(self, failure, requested):
        """etcd's "compacted" and "future revision" as the interface's errors."""
        failure.trap(errors.StatusError)
        details = failure.value.message  # a refusal's text is etcd's own
        if _COMPACTED in details:
            raise CompactedError(requested, max(self.compacted_revision, requested + 1))
        if _FUTURE in details:
            raise FutureRevisionError(requested, self.revision)
        return failure

    # Writes.

    def create(self, key, value):
        return self._write([mvcc.Create(key, value)]).addCallback(mvcc.only)

    def update(self, key, value, expected_revision=None):
        return self._write([mvcc.Update(key, value, expected_revision)]).addCallback(mvcc.only)

    def delete(self, key, expected_revision=None):
        return self._write([mvcc.Delete(key, expected_revision)]).addCallback(mvcc.only)

    def commit(self, ops):
        mvcc.check_commit(ops)
        return self._write(list(ops))

    def _write(self, ops: list):
        # A KMS plugin is asked on the reactor first (``then_prepared``), not in the pool,
        # where a hung one would hold a thread every other write needs.
        written = self._values.then_all_prepared(
            ops, self.reactor, lambda: self._with_values(self._transaction, ops))
        written.addCallback(lambda request: self.client.unary("Txn", request))
        written.addCallback(lambda reply: self._with_values(self._outcome, ops, reply))
        return written.addCallback(self._acknowledge)

    def _transaction(self, ops: list):
        """
        The writes' ``TxnRequest`` (``txn.transaction``), or clientv3's refusal to send
        one that large.
        """
        request = txn.transaction([
            (self._etcd_key(op.key), op,
             None if op.value is None else self._values.stored(op.key, op.value))
            for op in ops])
        refusal = txn.send_refusal(request)
        if refusal is not None:
            raise refusal
        return request

    def _outcome(self, ops: list, reply):
        """
        The transaction's (events, or None) and error, if any, from its reply: on
        success, each write's event from its response (the previous version); on
        failure, the error of the first write whose condition the version read back
        fails (``txn.transaction``: a lone create reads nothing back).
        """
        if not reply.succeeded:
            if not reply.responses:
                return None, KeyExistsError(ops[0].key)
            for op, response in zip(ops, reply.responses):
                kvs = response.response_range.kvs
                try:
                    op.apply(self._kv(kvs[0]) if kvs else None, 0)
                except StorageError as error:
                    return None, error
            raise AssertionError(f"{[op.key for op in ops]}: a failed transaction whose"
                                 " conditions hold")
        events = []
        for op, response in zip(ops, reply.responses):
            if response.HasField("response_delete_range"):
                prev = response.response_delete_range.prev_kvs
            else:
                prev = [response.response_put.prev_kv] if response.response_put.HasField(
                    "prev_kv") else []
            events.append(op.apply(self._kv(prev[0]) if prev else None,
                                   reply.header.revision))
        return events, None

    def _acknowledge(self, outcome):
        """On the reactor: the writes' versions once their events have been delivered."""
        events, error = outcome
        if error is not None:
            raise error
        revision = events[0].revision
        self._committed(revision, events)
        return self._reach(revision).addCallback(lambda _: [event.kv for event in events])

    def _committed(self, revision: int, events: list):
        """
        One of this store's writes committed at ``revision`` with ``events`` (none for a
        marker): delivered at once if every earlier revision has been, else kept until
        the revisions before it are (see module docstring).  Beyond ``_AHEAD`` kept
        (the watch long behind), the event is left to the watch.
        """
        if revision > self.revision and len(self._ahead) < _AHEAD:
            self._ahead[revision] = events
            self._deliver_ahead()
            if self._ahead:
                self._await_watch()

    def _deliver_ahead(self):
        ahead = self._ahead
        while self.revision + 1 in ahead:
            revision = self.revision + 1
            self._publish(revision, ahead.pop(revision))

    def _reach(self, revision: int) -> Deferred:
        """
        Fires once ``revision`` has been delivered and no new watch is still reading its
        history (which would hear of the write after its history).  Cancelling it (the
        request's deadline) stops the wait.
        """
        if self.revision >= revision and not self._catching_up:
            return succeed(None)
        def forget(cancelled):
            if entry in self._waiting:  # not after ``stop``
                self._waiting.remove(entry)
        reached: Deferred[None] = Deferred(forget)
        entry = (revision, reached)
        self._waiting.append(entry)
        self._await_watch()
        return reached

    def _await_watch(self):
        """The store waits on its watch: make sure it is heard from (``STALL_AFTER``)."""
        if self._stall is None or not self._stall.active():
            self._stall = self.reactor.callLater(STALL_AFTER, self._check_stall, self._heard)

    def _check_stall(self, heard: int):
        awaited = [revision for revision, _ in self._waiting if revision > self.revision]
        if not (awaited or self._ahead) or self._stream is None:
            return  # nothing waits on the watch any more (a new watch's history may)
        if self._heard == heard:
            log.warn("the etcd watch delivered nothing for {s}s while revision {rev} was"
                     " awaited; opening it again", s=STALL_AFTER,
                     rev=min(awaited + list(self._ahead)))
            self._stream.reopen()
        self._await_watch()

    # Watches.

    def watch(self, prefix, from_revision, sink):
        mvcc.check_watchable(self, from_revision)
        watch = self._watchers.add(prefix, from_revision, sink)
        upto = self.revision
        if from_revision >= upto:
            watch.catch_up([])
        else:
            self._catch_up(watch, prefix, from_revision, upto)
        return watch

    def _catch_up(self, watch, prefix: str, from_revision: int, upto: int):
        """
        Read the events after ``from_revision`` up to ``upto`` with a watch of their own,
        then hand them over.  A marker write after the watch is created makes sure an
        event at or past ``upto`` comes.  Events of keys outside ``prefix`` are read too
        and dropped by the watch.
        """
        history: list = []
        stream: Optional[WatchStream] = None

        def events(revision, batch):
            if stream not in self._catching_up:
                return  # finished; the stream is closing
            if watch.done.called:
                return finish()
            history.extend(e for e in batch if e.revision <= upto)
            if revision >= upto:  # an event at upto, or progress past it
                watch.catch_up(history)
                finish()

        def compacted(revision):
            finish()
            watch.fail(CompactedError(from_revision, revision))

        def finish():
            assert stream is not None
            if stream in self._catching_up:
                self._catching_up.discard(stream)
                stream.stop()
                self._release()

        stream = self._open_stream(from_revision + 1, Handlers(events, compacted),
                                   prefix=self.root)
        self._catching_up.add(stream)
        stream.start()
        self._mark().addErrback(watch.fail)

    def needs_rewrite(self, key):
        return key in self._values.stale_keys

    # Compaction.

    def compact(self, revision):
        try:
            mvcc.check_compactable(self, revision)
        except StorageError as error:
            return fail(error)
        self.compacted_revision = revision
        compacted = self.client.unary("Compact",
                                      rpc_pb2.CompactionRequest(revision=revision))
        return compacted.addCallbacks(lambda _: None, self._history_error,
                                      errbackArgs=(revision,))

    # What the store's watch reports.

    def _delivered(self, revision: int, events: list):
        """The store's watch delivered ``events`` up to ``revision`` (a response)."""
        self._heard += 1
        if revision <= self.revision:
            return
        if events and events[0].revision <= self.revision:
            # Delivered already from their writes' replies (the watch thread drops such
            # events too, but may have read an older ``revision``): not offered again.
            events = [e for e in events if e.revision > self.revision]
        if self._ahead:
            for delivered in [r for r in self._ahead if r <= revision]:
                del self._ahead[delivered]
        self._publish(revision, events)
        self._deliver_ahead()

    def _publish(self, revision: int, events: list):
        self.revision = revision
        self._watchers.publish(events, self._release)

    def _release(self):
        if self._catching_up:
            return  # a new watch first has its history (see module docstring)
        ready = [w for w in self._waiting if w[0] <= self.revision]
        for entry in ready:
            self._waiting.remove(entry)
            entry[1].callback(None)

    def _compaction_seen(self, value: bytes):
        self.compacted_revision = max(self.compacted_revision, int(value))

    def _stream_compacted(self, revision: int):
        """
        The store's watch fell behind a compaction at ``revision``.  If the store has
        delivered every revision up to it anyway (its own writes, from their replies),
        nothing is lost: the watch goes on from the next.  Else every watch ends, and the
        store's watch restarts at the compaction.
        """
        self.compacted_revision = max(self.compacted_revision, revision)
        if revision <= self.revision:
            start = self.revision + 1
        else:
            self._watchers.fail(CompactedError(self.revision, revision))
            start = revision
        self._stream = self._open_stream(start, self._handlers())
        self._stream.start()

    def _connection(self, connected: bool):
        self.connected = connected

    # Consistent reads.

    def sync(self):
        """
        Deferred firing once every write committed in the cluster before the call has
        reached the watches (upstream's ``ConsistentListFromCache``; also every GET and
        update that upstream reads from etcd, ``WatchCache.sync``): a quorum read of the
        current revision; if the watch is behind it, a marker write, delivered after
        every earlier write, and a wait for it.

        Calls share quorum reads: one is under way at a time, and the calls made while
        it is wait for the next, which starts when it ends, so each call's read still
        begins after the call (whatever was committed before the call, it sees).
        Under load that is one ``Range`` per round trip instead of one per request, as
        etcd batches its own linearizable reads (ReadIndex).  Cancelling a call (its
        request's deadline) only stops its wait.
        """
        def forget(cancelled):
            if cancelled in self._syncs_due:
                self._syncs_due.remove(cancelled)
        synced: Deferred[None] = Deferred(forget)
        self._syncs_due.append(synced)
        if not self._syncing:
            self._next_sync()
        return synced

    def _next_sync(self):
        """Start the quorum read every call waiting for one shares, if any wait."""
        batch, self._syncs_due = self._syncs_due, []
        self._syncing = bool(batch)
        if not batch:
            return

        def settle(result):
            self._next_sync()  # for the calls made meanwhile, before answering these
            for synced in batch:
                if synced.called:  # cancelled
                    continue
                if isinstance(result, Failure):
                    synced.errback(result)
                else:
                    synced.callback(None)
        self._sync_once().addBoth(settle)

    def _sync_once(self) -> Deferred:
        """One quorum read of the current revision, and the wait for the watch."""
        current = self.client.hedged("Range", rpc_pb2.RangeRequest(
            key=self._marker, count_only=True))

        def wait(reply):
            if self.revision >= reply.header.revision:
                return None
            return self._mark().addCallback(self._reach)
        return current.addCallback(wait)

    def _mark(self) -> Deferred:
        """Write the marker key; Deferred of the write's revision."""
        # Hedged (made again when slow): writing the marker twice is as good as once.
        return self.client.hedged("Put", rpc_pb2.PutRequest(key=self._marker)).addCallback(
            self._marked)

    def _marked(self, reply) -> int:
        self._committed(reply.header.revision, [])
        return reply.header.revision
