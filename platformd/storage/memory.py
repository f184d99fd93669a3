"""
``MemoryStorage``: the in-memory reference implementation of IStorage.

It is the behaviour the other backends are held to (tests/storage/conformance.py runs the
same tests against each) and a fast store for tests of the layers above.  It is wholly
synchronous: a write has been applied, published to every matching watch and
acknowledged before its method returns, and every Deferred it returns has already fired.

History is kept as etcd's MVCC store keeps it: every change is an ``Event`` in a log
ordered by revision, holding the version it made and the one it replaced.  The state at
any retained revision is the current state with the later events undone, and a watch
starts from any retained revision by replaying the log.

The pieces every backend shares live here, written once: the write operations and their
compare-and-swap rules, the revision checks of reads, watches and compaction, and
``Watchers``, which hands events to watches in order.
"""

from __future__ import annotations

import bisect
from collections import deque
from operator import attrgetter
from typing import Callable, Optional

import attrs
from twisted.internet.defer import Deferred, fail, succeed
from twisted.logger import Logger
from zope.interface import implementer

from platformd.storage.interface import (
    DELETE,
    PUT,
    CompactedError,
    Event,
    FutureRevisionError,
    IStorage,
    IWatch,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    RangeResult,
    RevisionMismatchError,
    StorageError,
)

_log = Logger()


def _check_expected(key: str, current: Optional[KeyValue], expected_revision: Optional[int]):
    if current is None:
        raise KeyNotFoundError(key)
    if expected_revision is not None and expected_revision != current.mod_revision:
        raise RevisionMismatchError(key, current)


@attrs.frozen
class Create:
    """A write of a new key."""

    key: str
    value: bytes

    def apply(self, current: Optional[KeyValue], revision: int) -> Event:
        """The event this write makes at ``revision`` over ``current``, or raise why not."""
        if current is not None:
            raise KeyExistsError(self.key)
        return Event(PUT, KeyValue(self.key, self.value, revision, revision), None)


@attrs.frozen
class Update:
    """A replacement of a key's value, compare-and-swap unless ``expected_revision`` is None."""

    key: str
    value: bytes
    expected_revision: Optional[int]

    def apply(self, current: Optional[KeyValue], revision: int) -> Event:
        """The event this write makes at ``revision`` over ``current``, or raise why not."""
        _check_expected(self.key, current, self.expected_revision)
        kv = KeyValue(self.key, self.value, current.create_revision, revision)
        return Event(PUT, kv, current)


@attrs.frozen
class Delete:
    """A removal of a key, compare-and-swap unless ``expected_revision`` is None."""

    key: str
    expected_revision: Optional[int]

    def apply(self, current: Optional[KeyValue], revision: int) -> Event:
        """The event this write makes at ``revision`` over ``current``, or raise why not."""
        _check_expected(self.key, current, self.expected_revision)
        return Event(DELETE, attrs.evolve(current, mod_revision=revision), current)


def read_revision(store: IStorage, requested: Optional[int]) -> int:
    """The revision a range at ``requested`` reads at, or raise why it cannot."""
    if requested is None:
        return store.revision
    if requested < store.compacted_revision:
        raise CompactedError(requested, store.compacted_revision)
    if requested > store.revision:
        raise FutureRevisionError(requested, store.revision)
    return requested


def check_watchable(store: IStorage, from_revision: int):
    """Raise CompactedError unless every event after ``from_revision`` is retained."""
    if from_revision < store.compacted_revision:
        raise CompactedError(from_revision, store.compacted_revision)


def check_compactable(store: IStorage, revision: int):
    """Raise unless ``revision`` is above the compacted one and not above the newest."""
    if revision <= store.compacted_revision:
        raise CompactedError(revision, store.compacted_revision)
    if revision > store.revision:
        raise FutureRevisionError(revision, store.revision)


@implementer(IWatch)
class Watch:
    """
    One watch: it holds live events while it catches up on history, then follows them.

    A plain class rather than attrs: it is a small state machine (catching up, live,
    ended) whose fields only its own methods change.  Events reach the sink in strictly
    increasing revision order, each at most once: whatever is not newer than the last
    delivered is dropped, which also removes the overlap between history and live events.
    """

    def __init__(self, watchers: Watchers, prefix: str, from_revision: int,
                 sink: Callable[[Event], None]):
        self.prefix = prefix
        self.done = Deferred()
        self._watchers = watchers
        self._sink = sink
        self._last = from_revision
        #: Live events offered while catching up; None once live.
        self._held: Optional[deque] = deque()

    def offer(self, event: Event):
        """A live event, newly committed."""
        if self._held is None:
            self._send(event)
        else:
            self._held.append(event)

    def catch_up(self, history: list):
        """Deliver ``history`` (events in revision order), then the held events; go live."""
        for event in history:
            self._send(event)
        while self._held:
            self._send(self._held.popleft())
        self._held = None

    def cancel(self):
        self._end(None)

    def fail(self, reason):
        """End the watch because the backend cannot go on; ``done`` fails with ``reason``."""
        self._end(reason)

    def _end(self, reason):
        if self.done.called:
            return
        self._watchers.discard(self)
        if reason is None:
            self.done.callback(None)
        else:
            self.done.errback(reason)

    def _send(self, event: Event):
        if (self.done.called or event.revision <= self._last
                or not event.kv.key.startswith(self.prefix)):
            return
        self._last = event.revision
        try:
            self._sink(event)
        except Exception:
            _log.failure("Watch sink for {prefix!r} failed on revision {revision}",
                         prefix=self.prefix, revision=event.revision)


class Watchers:
    """
    The watches of one store, and the order in which they hear of events.

    ``publish`` offers events to every watch, then acknowledges the writes that made
    them.  A publish from inside a sink (a sink that writes to a synchronous store) waits
    behind the one in progress, so every watch still sees revisions in order and every
    write is acknowledged after its own events went out.
    """

    def __init__(self):
        self._watches: dict = {}  # insertion-ordered set
        self._queue: deque = deque()
        self._publishing = False

    def add(self, prefix: str, from_revision: int, sink: Callable[[Event], None]) -> Watch:
        """A new watch, catching up: the caller hands it its history with ``catch_up``."""
        watch = Watch(self, prefix, from_revision, sink)
        self._watches[watch] = None
        return watch

    def discard(self, watch: Watch):
        self._watches.pop(watch, None)

    def publish(self, events: list, acknowledge: Callable[[], None]):
        """Offer ``events`` (in revision order) to every watch, then call ``acknowledge``."""
        self._queue.append((events, acknowledge))
        if self._publishing:
            return
        self._publishing = True
        while self._queue:
            events, acknowledge = self._queue.popleft()
            for event in events:
                for watch in list(self._watches):
                    watch.offer(event)
            acknowledge()
        self._publishing = False


@implementer(IStorage)
@attrs.define(eq=False)
class MemoryStorage:
    """
    The reference IStorage (see module docstring).

    attrs for the declared state; ``eq=False`` because a store is an identity, not a
    value.  It takes the reactor only to be built like the other backends: it needs
    neither threads nor timers.
    """

    reactor: object
    revision: int = attrs.field(default=0, init=False)
    compacted_revision: int = attrs.field(default=0, init=False)
    #: key -> its current version.
    _current: dict = attrs.field(factory=dict, init=False)
    #: Every retained event, in revision order.
    _log: list = attrs.field(factory=list, init=False)
    _watchers: Watchers = attrs.field(factory=Watchers, init=False)

    def start(self):
        return succeed(None)

    def stop(self):
        return succeed(None)

    def get(self, key):
        return succeed(self._current.get(key))

    def range(self, prefix, revision=None):
        try:
            at = read_revision(self, revision)
        except StorageError as error:
            return fail(error)
        state = dict(self._current)
        for event in reversed(self._log[self._after(at):]):
            if event.prev is None:
                del state[event.kv.key]
            else:
                state[event.kv.key] = event.prev
        kvs = sorted((kv for key, kv in state.items() if key.startswith(prefix)),
                     key=attrgetter("key"))
        return succeed(RangeResult(kvs, at))

    def create(self, key, value):
        return self._write(Create(key, value))

    def update(self, key, value, expected_revision=None):
        return self._write(Update(key, value, expected_revision))

    def delete(self, key, expected_revision=None):
        return self._write(Delete(key, expected_revision))

    def watch(self, prefix, from_revision, sink):
        check_watchable(self, from_revision)
        watch = self._watchers.add(prefix, from_revision, sink)
        watch.catch_up(self._log[self._after(from_revision):])
        return watch

    def compact(self, revision):
        try:
            check_compactable(self, revision)
        except StorageError as error:
            return fail(error)
        del self._log[:self._after(revision)]
        self.compacted_revision = revision
        return succeed(None)

    def _write(self, op):
        try:
            event = op.apply(self._current.get(op.key), self.revision + 1)
        except StorageError as error:
            return fail(error)
        self.revision = event.revision
        self._log.append(event)
        if event.type == DELETE:
            del self._current[op.key]
        else:
            self._current[op.key] = event.kv
        acknowledged = Deferred()
        self._watchers.publish([event], lambda: acknowledged.callback(event.kv))
        return acknowledged

    def _after(self, revision: int) -> int:
        """The index in the log of the first event newer than ``revision``."""
        return bisect.bisect_right(self._log, revision, key=attrgetter("revision"))
