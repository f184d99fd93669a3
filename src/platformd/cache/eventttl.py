"""
``--event-ttl`` (default 1h, as upstream): a stored Event is removed that long after its
last write.  Upstream attaches every Event write to an etcd lease of that TTL; here the
expiry is the server's own, so it works over every backend (SQLite, etcd, memory) alike:

- ``EventExpiry`` follows the Event kind's cache (``KindCache.add_listener``): every
  create or update of an event schedules its removal at the write's time plus the TTL
  (a min-heap of deadlines; an entry made stale by a later write or a delete is skipped
  when it comes due);
- at start, every event already stored (loaded by the cache, for example after a
  restart) is scheduled from its own last write time: the newest of
  ``metadata.creationTimestamp`` and its ``managedFields`` times.  So events expire
  after a restart too, at the time they would have without one;
- one ``LoopingCall`` on the injected clock (every ``interval`` seconds, off the request
  path) deletes the due events, at most ``batch`` per tick and one tick's batch at a
  time: each a storage delete conditional on the revision that was scheduled (an event
  written again meanwhile is not removed; neither is one another server over the same
  etcd removed first), without admission, as an etcd lease expiry.  SQLite's writer
  commits a tick's deletes together; watchers see ``DELETED`` events.

Tests drive it with ``Clock``.
"""

from __future__ import annotations

import calendar
import heapq
import itertools
import time

from twisted.internet.defer import DeferredList
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from platformd.storage.interface import KeyNotFoundError, RevisionMismatchError

log = Logger()

#: Upstream's default ``--event-ttl``.
DEFAULT_TTL = 3600.0


def _seconds(stamp) -> float:
    try:
        return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))
    except (TypeError, ValueError):
        return 0.0


def last_write(obj: dict) -> float:
    """When ``obj`` was last written, as far as the object says (seconds)."""
    meta = obj.get("metadata") or {}
    times = [_seconds(meta.get("creationTimestamp"))]
    times.extend(_seconds(entry.get("time")) for entry in meta.get("managedFields") or ()
                 if isinstance(entry, dict))
    return max(times)


class EventExpiry:
    """Removes stored events ``ttl`` seconds after their last write (module doc)."""

    def __init__(self, clock, cache, storage, kind, ttl: float = DEFAULT_TTL,
                 interval: float = 1.0, batch: int = 5000):
        self.clock = clock
        self.cache = cache
        self.storage = storage
        self.kind = kind
        self.ttl = ttl
        self.interval = interval
        self.batch = batch
        self._heap: list = []
        self._order = itertools.count()
        self._busy = False
        self._loop = LoopingCall(self.run)
        self._loop.clock = clock
        #: Events removed so far (for tests and the benchmark).
        self.expired = 0

    def start(self) -> None:
        kind_cache = self.cache.for_kind(self.kind)
        kind_cache.add_listener(self._changed)
        for entry in kind_cache.everything():
            try:
                written = last_write(entry.obj)
            except Exception:  # noqa: BLE001 -- an undecodable object: expire it from now
                written = self.clock.seconds()
            self._schedule(written + self.ttl, entry)
        self._loop.start(self.interval, now=False).addErrback(
            lambda f: log.failure("event expiry stopped", f))

    def stop(self) -> None:
        self.cache.for_kind(self.kind).remove_listener(self._changed)
        if self._loop.running:
            self._loop.stop()
        self._heap = []

    def pending(self) -> int:
        """Scheduled removals (stale ones included)."""
        return len(self._heap)

    def _changed(self, type_, new, old, revision) -> None:
        if new is not None:  # a create or an update: its lease starts again
            self._schedule(self.clock.seconds() + self.ttl, new)

    def _schedule(self, deadline: float, entry) -> None:
        heapq.heappush(self._heap, (deadline, next(self._order), entry.key, entry.revision))

    def run(self):
        """Delete the events due now (at most ``batch``); a Deferred of the batch."""
        if self._busy:
            return None
        now = self.clock.seconds()
        kind_cache = self.cache.for_kind(self.kind)
        heap = self._heap
        due: list = []
        while heap and heap[0][0] <= now and len(due) < self.batch:
            _deadline, _order, key, revision = heapq.heappop(heap)
            current = kind_cache.get(key)
            if current is not None and current.revision == revision:
                due.append((key, revision))
        if not due:
            return None
        self._busy = True
        deletes = [self.storage.delete(key, revision).addCallbacks(
            self._deleted, self._failed, errbackArgs=(key, revision))
            for key, revision in due]
        return DeferredList(deletes).addBoth(self._done)

    def _deleted(self, _kv) -> None:
        self.expired += 1

    def _failed(self, failure, key: str, revision: int) -> None:
        if failure.check(KeyNotFoundError, RevisionMismatchError):
            return  # written again, or already removed (by another server): not ours
        log.failure("expiring event {key} failed; retrying", failure, key=key)
        heapq.heappush(self._heap, (self.clock.seconds() + self.interval,
                                    next(self._order), key, revision))

    def _done(self, result):
        self._busy = False
        return None
