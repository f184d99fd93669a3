"""
The rules every IStorage backend shares, written once: the backend-independent half of
etcd's MVCC model.

- The write operations (``Create``, ``Update``, ``Delete``) and their compare-and-swap
  rules: ``apply`` turns an operation and the key's current version into the event it
  makes at the next revision, or raises why not.  Backends hand them plaintext versions
  (values read back through their ``Transformed``) and store what the event says.
- The revision checks of reads, watches and compaction (``read_revision``,
  ``check_watchable``, ``check_compactable``), against a store's ``revision`` and
  ``compacted_revision``.
- ``Watchers`` and ``Watch``: the ordered fan-out of events to watches, each catching up
  on history while holding live events, then following them; a write is acknowledged
  only after its events went out (the interface's ordering promise).

A backend supplies storage, history and threads; see ``docs/storage.md``.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, ClassVar, Optional

import attrs
from twisted.internet.defer import Deferred
from twisted.logger import Logger
from zope.interface import implementer

from platformd.util.ratelog import RateLimitedLog, origin
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
    RevisionMismatchError,
)

_log = Logger()


def _check_expected(key: str, current: Optional[KeyValue],
                    expected_revision: Optional[int]) -> KeyValue:
    """``current``, if it is there and at ``expected_revision`` (None: any); else raise."""
    if current is None:
        raise KeyNotFoundError(key)
    if expected_revision is not None and expected_revision != current.mod_revision:
        raise RevisionMismatchError(key, current)
    return current


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
        current = _check_expected(self.key, current, self.expected_revision)
        kv = KeyValue(self.key, self.value, current.create_revision, revision)
        return Event(PUT, kv, current)


@attrs.frozen
class Delete:
    """A removal of a key, compare-and-swap unless ``expected_revision`` is None."""

    key: str
    expected_revision: Optional[int]
    #: What a deletion stores: nothing (the other operations' ``value``).
    value: ClassVar[Optional[bytes]] = None

    def apply(self, current: Optional[KeyValue], revision: int) -> Event:
        """The event this write makes at ``revision`` over ``current``, or raise why not."""
        current = _check_expected(self.key, current, self.expected_revision)
        return Event(DELETE, attrs.evolve(current, mod_revision=revision), current)


def check_commit(ops: list) -> None:
    """Refuse (ValueError) a ``commit`` of no operation or of one key twice: a caller's
    bug, as etcd refuses a transaction that puts a key twice."""
    keys = [op.key for op in ops]
    if not keys or len(set(keys)) != len(keys):
        raise ValueError(f"a commit writes one or more distinct keys, not {keys!r}")


def only(kvs: list) -> KeyValue:
    """The version a single write (a commit of one operation) made."""
    [kv] = kvs
    return kv


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
    increasing revision order, each at most once: whatever is older than the last
    delivered, or of the last delivered revision and a key already delivered at it, is
    dropped, which also removes the overlap between history and live events.  A
    revision may hold several events (``IStorage.commit``), one per key.
    """

    def __init__(self, watchers: Watchers, prefix: str, from_revision: int,
                 sink: Callable[[Event], None]):
        self.prefix = prefix
        self.done: Deferred[None] = Deferred()
        self._watchers = watchers
        self._sink = sink
        self._last = from_revision
        #: The keys delivered at ``_last``; None: all of them (the start revision).
        self._last_keys: Optional[set] = None
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
        key = event.kv.key
        if self.done.called or event.revision < self._last or not key.startswith(self.prefix):
            return
        if event.revision > self._last:
            self._last, self._last_keys = event.revision, {key}
        elif self._last_keys is None or key in self._last_keys:
            return
        else:
            self._last_keys.add(key)
        try:
            self._sink(event)
        except Exception:
            self._watchers.failures.failure(
                f"Watch sink for {self.prefix!r} failed on revision {event.revision}",
                key=origin())


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
        #: A sink failing on a stored object fails on each of its events: one
        #: traceback a minute per bug, whichever watch it is.
        self.failures = RateLimitedLog(_log)

    def add(self, prefix: str, from_revision: int, sink: Callable[[Event], None]) -> Watch:
        """A new watch, catching up: the caller hands it its history with ``catch_up``."""
        watch = Watch(self, prefix, from_revision, sink)
        self._watches[watch] = None
        return watch

    def discard(self, watch: Watch):
        self._watches.pop(watch, None)

    def fail(self, reason):
        """End every watch with ``reason`` (the backend lost the history they follow)."""
        for watch in list(self._watches):
            watch.fail(reason)

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
