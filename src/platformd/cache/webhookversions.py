"""
A version view whose objects a conversion webhook makes: a custom resource's served
version under ``spec.conversion.strategy: Webhook`` (``WatchCache.add_converted_version``
for a version other than the storage version; ``WatchCache.add_kind(converter=...)`` for
the storage version itself, whose objects stored under an earlier storage version are
converted to it).

Upstream gives each served version its own cacher, whose storage codec converts every
object read from etcd into that version (one webhook call per object decoded), so a
version's cache holds objects already converted and lags etcd by the calls.  Here the
view is a ``KindCache`` of the served version (its own objects, history, watchers and
informers, so gets, lists, selectors, watches and informers work as for any kind) fed
the storage kind's events *asynchronously*, in order, because the reactor must never
wait on a webhook:

- events of the storage prefix queue up (``apply``); one round at a time converts
  every queued object in one ``ConversionReview`` (at most ``MAX_PER_REVIEW`` objects a
  review) and applies the events, in their order, once the answer is in;
- the first round, and a *resync*, convert every current object of the storage kind
  (a load, or ``KindCache.replace`` telling watchers and informers the difference);
- reads wait for the view to hold what the watch cache holds (``ready_at``: None when it
  does, else a Deferred), and are answered at the revision the view is consistent at
  (``state_revision``), so read-your-writes holds through the lag;
- a failed conversion is upstream's cacher losing its storage watch: every watcher of
  the view is ended (``terminateAllWatchers``; clients watch again, from a relist once
  their version is older than the resync), the queue is dropped, reads are answered
  with the conversion's error (upstream's reads go to etcd and convert per request
  meanwhile, failing alike) and the view is converted again wholesale: at once when a
  read asks (as upstream's next read calls the webhook), else after a backoff (0.8 s
  doubling to 30 s, upstream's reflector's);
- the queue is bounded (``MAX_PENDING`` events): past it, conversion has fallen behind
  and the view does the same as on a failure, without the error: its watchers end
  rather than the queue growing without limit (upstream would lag behind its etcd
  watch, whose server buffers it), and a resync catches up;
- an event that needs no conversion (a deletion, or an object stored in the view's
  version: ``stored_in``) offered while nothing waits before it is applied at once, as
  an unconverted kind's: the storage version's view, whose objects are nearly all
  stored in it, lags only behind the objects that need the webhook.

The view's history begins at each resync (``horizon``): a watch or exact list from an
older version is 410 Gone.
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache
from typing import Callable, Optional

import orjson
from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger

from platformd import errors
from platformd.storage.interface import PUT, Event, KeyValue

log = Logger()

#: Storage events a view may hold waiting for conversion before it resyncs instead.
MAX_PENDING = 10_000
#: Objects sent in one ConversionReview (a resync of many objects sends several).
MAX_PER_REVIEW = 500
#: Backoff between conversion attempts of a failing view (upstream's reflector's).
RETRY_MIN, RETRY_MAX = 0.8, 30.0


def stored_in(raw: bytes, api_version: str) -> bool:
    """Whether the stored bytes ``raw`` are of ``api_version`` (read off the bytes: an
    object is stored kind and apiVersion first; False when that cannot be told so)."""
    at = raw.find(b'"apiVersion":', 0, 512)
    return at >= 0 and raw.startswith(_api_version_field(api_version), at)


@lru_cache(maxsize=256)
def _api_version_field(api_version: str) -> bytes:
    """``"apiVersion":"<api_version>"`` as stored: made once per version, not per read."""
    return orjson.dumps({"apiVersion": api_version})[1:-1]


def converted_kvs(convert, api_version: str, kvs: list):
    """Deferred[list of KeyValue]: ``kvs`` (stored bytes) in ``api_version`` through
    ``convert(objects, api_version)``, ``MAX_PER_REVIEW`` objects a review, in order;
    bytes that do not decode are kept (reported as corrupt when read)."""
    decoded = []
    for kv in kvs:
        try:
            obj = orjson.loads(kv.value)
        except orjson.JSONDecodeError:
            obj = None
        decoded.append(obj if isinstance(obj, dict) else None)
    sendable = [i for i, obj in enumerate(decoded) if obj is not None]
    out = list(kvs)

    def chunk(start: int):
        if start >= len(sendable):
            return succeed(out)
        indexes = sendable[start:start + MAX_PER_REVIEW]
        d = convert([decoded[i] for i in indexes], api_version)

        def place(objects):
            for i, obj in zip(indexes, objects):
                kv = kvs[i]
                out[i] = KeyValue(kv.key, orjson.dumps(obj), kv.create_revision,
                                  kv.mod_revision)
            return chunk(start + MAX_PER_REVIEW)
        return d.addCallback(place)
    return chunk(0)


class ConvertingFeed:
    """
    The asynchronous feed of one converted version view (module docstring): ``view``
    is the view's ``KindCache``, ``source`` the storage kind's, ``convert(objects,
    api_version)`` the webhook (Deferred of the objects, or a ``StatusError``),
    ``revision()`` the watch cache's revision.
    """

    def __init__(self, view, source, convert: Callable, revision: Callable[[], int], clock,
                 max_pending: int = MAX_PENDING):
        self.view = view
        self.source = source
        self.convert = convert
        self.revision = revision
        self.clock = clock
        self.max_pending = max_pending
        self.queue: deque = deque()
        #: Every current object must be converted again (the first load too).
        self.resync = True
        self.busy = False
        #: The last conversion's error (a ``StatusError``) until one succeeds.
        self.failure: Optional[errors.StatusError] = None
        #: The storage revision the view's objects are consistent at.
        self.applied = 0
        self._waiters: list = []
        self._retry = None
        self._delay = RETRY_MIN
        self._soon = None
        self.stopped = False
        #: Rounds run and resyncs made (tests and figures).
        self.rounds = 0
        self.resyncs = 0

    # -- fed by the watch cache --------------------------------------------------------

    def offer(self, event) -> None:
        """A storage event of the prefix: applied now when it needs no conversion and
        nothing waits before it, else queued (or a resync, past ``max_pending``)."""
        if self.resync and not self.busy:
            return  # the coming resync reads the current state, this event included
        if not (self.busy or self.queue or self.failure is not None) and (
                event.type != PUT or stored_in(event.kv.value, self.view.kind.api_version)):
            self.view.apply(event)
            self.applied = max(self.applied, event.revision)
            return
        if len(self.queue) >= self.max_pending:
            log.info("conversion of {kind} fell {n} events behind: its watches end and "
                     "it is converted again", kind=self.view.kind.qualified_resource,
                     n=len(self.queue))
            self.queue.clear()
            self.resync = True
            self._end_watchers()
        else:
            self.queue.append(event)
        if self._soon is None:
            # The events of one reactor turn go in one review.
            self._soon = self.clock.callLater(0, self._start_soon)

    def _start_soon(self) -> None:
        self._soon = None
        self.start()

    def relisted(self) -> None:
        """The watch cache listed everything again: so does the view."""
        self.queue.clear()
        self.resync = True
        self.start()

    def stop(self) -> None:
        """The view is removed: nothing more is converted; waiting reads go on (to 404)."""
        self.stopped = True
        self.queue.clear()
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        if self._soon is not None and self._soon.active():
            self._soon.cancel()
        self._soon = None
        self._settle(None)

    # -- what reads wait for -----------------------------------------------------------

    @property
    def caught_up(self) -> bool:
        return not (self.busy or self.queue or self.resync)

    def ready_at(self, revision: int, key: Optional[str] = None) -> Optional[Deferred]:
        """None when the view holds everything up to ``revision`` (and its last
        conversion worked); else a Deferred firing once it does, or failing with the
        conversion's error.  A failed view is converted again now.  ``key``: a read
        of that one object only (``ready_for``)."""
        if self.failure is None and (self.caught_up or
                                     (self.applied >= revision and not self.resync)):
            return None
        d: Deferred = Deferred()
        self._waiters.append((revision, d, key))
        if self.failure is not None and not self.busy:
            self.start()
        return d

    def ready_for(self, key: str, revision: int) -> Optional[Deferred]:
        """``ready_at`` for a read of the one object at ``key``: while conversion
        fails, None for an object stored in the view's version or absent (upstream reads
        it from etcd, needing no conversion: ``while_failing`` gives it), else the
        failure (and a conversion again); a read waiting when conversion fails goes on
        likewise."""
        if self.failure is not None and not self.stored_elsewise(key):
            return None
        return self.ready_at(revision, key)

    def while_failing(self, key: str, shown):
        """What the view reads at ``key`` while conversion fails: the object as stored
        (or None) when it needs no conversion, else ``shown`` (the view's copy, whose
        read ``ready_for`` refuses)."""
        stored = self.source.get(key)
        if stored is None or stored_in(stored.raw, self.view.kind.api_version):
            return stored
        return shown

    def state_revision(self, current: int) -> int:
        return current if self.caught_up else self.applied

    def stored_elsewise(self, key: str) -> bool:
        """Whether the object at ``key`` is stored in another apiVersion than the
        view's (``KindCache.stored_elsewise``)."""
        stored = self.source.get(key)
        return stored is not None and not stored_in(stored.raw, self.view.kind.api_version)

    # -- rounds --------------------------------------------------------------------------

    def start(self) -> None:
        """Run a round now unless one runs or the view is stopped."""
        if self.busy or self.stopped or self.caught_up:
            return
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        self.busy = True
        self.rounds += 1
        if self.resync:
            self.resync = False
            self.queue.clear()  # all older than the state read now
            revision = self.revision()
            kvs = [KeyValue(e.key, e.raw, e.create_revision, e.revision)
                   for e in self.source.current(self.view.kind.storage_prefix)]
            d = converted_kvs(self.convert, self.view.kind.api_version, kvs)
            d.addCallback(self._resynced, revision)
        else:
            events = list(self.queue)
            self.queue.clear()
            d = converted_kvs(self.convert, self.view.kind.api_version,
                              [e.kv for e in events if e.type == PUT])
            d.addCallback(self._apply, events)
        d.addErrback(self._failed)
        d.addBoth(self._round_done)

    def _resynced(self, kvs: list, revision: int) -> None:
        if self.stopped:
            return
        self.resyncs += 1
        view = self.view
        if not view.loaded:
            for kv in kvs:
                view.load(kv)
            view.mark_loaded(revision)
        else:
            view.replace(kvs, revision)
            view.horizon = revision
        self._converted(revision)

    def _apply(self, kvs: list, events: list) -> None:
        if self.stopped:
            return
        converted = iter(kvs)
        for event in events:
            kv = next(converted) if event.type == PUT else event.kv
            self.view.apply(Event(event.type, kv, event.prev))
        self._converted(events[-1].revision)

    def _converted(self, revision: int) -> None:
        self.applied = max(self.applied, revision)
        self.failure = None
        self._delay = RETRY_MIN

    def _failed(self, failure) -> None:
        if self.stopped:
            return
        if failure.check(errors.StatusError):
            self.failure = failure.value
        else:
            log.failure("converting {kind} failed", failure,
                        kind=self.view.kind.qualified_resource)
            self.failure = errors.internal(failure.getErrorMessage())
        self.queue.clear()
        self.resync = True
        self._end_watchers()
        if not self.view.loaded:
            self.view.mark_loaded(self.revision())  # served: its reads say why they fail
        self._retry = self.clock.callLater(self._delay, self._retried)
        self._delay = min(self._delay * 2, RETRY_MAX)

    def _retried(self) -> None:
        self._retry = None
        self.start()

    def _round_done(self, _) -> None:
        self.busy = False
        if self.stopped:
            return
        if self.failure is not None:
            self._settle(self.failure)
            return
        self._settle(None)
        if self.queue or self.resync:
            self.start()

    def _settle(self, failure) -> None:
        """Tell the reads waiting for what the view now holds (or its failure, but a
        read of one object needing no conversion: ``ready_for``)."""
        waiting, self._waiters = self._waiters, []
        for revision, d, key in waiting:
            if failure is not None:
                if key is not None and not self.stored_elsewise(key):
                    d.callback(None)
                else:
                    d.errback(failure)
            elif self.caught_up or self.applied >= revision or self.stopped:
                d.callback(None)
            else:
                self._waiters.append((revision, d, key))

    def _end_watchers(self) -> None:
        """Every watch of the view ends (upstream's ``terminateAllWatchers``)."""
        view = self.view
        watchers = list(view.all_watchers())
        view.watchers.clear()
        for watcher in watchers:
            watcher.kind_removed()
