"""
``MemoryStorage``: the in-memory reference implementation of IStorage.

It is the behaviour the other backends are held to (tests/storage/conformance.py runs the
same tests against each) and a fast store for tests of the layers above.  It is wholly
synchronous: a write has been applied, published to every matching watch and
acknowledged before its method returns, and every Deferred it returns has already fired
(unless its transformer must first reach a KMS plugin: ``Transformed.then_prepared``).

History is kept as etcd's MVCC store keeps it: every change is an ``Event`` in a log
ordered by revision, holding the version it made and the one it replaced.  The state at
any retained revision is the current state with the later events undone, and a watch
starts from any retained revision by replaying the log.

Values are held as the transformer stores them (``transformers.py``), as the other
backends hold them on disk, and read back on the way out; live events go out as the
write made them, in plaintext.  The write operations, revision checks and watch fan-out
come from ``mvcc.py``, which every backend shares.
"""

from __future__ import annotations

import bisect
from operator import attrgetter

import attrs
from twisted.internet.defer import Deferred, fail, succeed
from zope.interface import implementer

from platformd.storage.interface import (
    DELETE,
    Event,
    IStorage,
    RangeResult,
    StorageError,
)
from platformd.storage import mvcc
from platformd.storage.transformers import IDENTITY, IValueTransformer, Transformed

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
    #: What values go through on their way in and out (default: stored as they are).
    transformer: IValueTransformer = IDENTITY
    revision: int = attrs.field(default=0, init=False)
    compacted_revision: int = attrs.field(default=0, init=False)
    #: key -> its current version, as stored.
    _current: dict = attrs.field(factory=dict, init=False)
    #: Every retained event, in revision order, its versions as stored.
    _log: list = attrs.field(factory=list, init=False)
    _watchers: mvcc.Watchers = attrs.field(factory=mvcc.Watchers, init=False)
    _values: Transformed = attrs.field(
        default=attrs.Factory(lambda self: Transformed(self.transformer), takes_self=True),
        init=False)

    def start(self):
        return succeed(None)

    def stop(self):
        return succeed(None)

    def get(self, key):
        return succeed(self._values.kv(self._current.get(key)))

    def range(self, prefix, revision=None):
        try:
            at = mvcc.read_revision(self, revision)
        except StorageError as error:
            return fail(error)
        state = dict(self._current)
        for event in reversed(self._log[self._after(at):]):
            if event.prev is None:
                del state[event.kv.key]
            else:
                state[event.kv.key] = event.prev
        kvs = sorted((self._values.kv(kv) for key, kv in state.items()
                      if key.startswith(prefix)), key=attrgetter("key"))
        return succeed(RangeResult(kvs, at))

    def create(self, key, value):
        return self._write([mvcc.Create(key, value)]).addCallback(mvcc.only)

    def update(self, key, value, expected_revision=None):
        return self._write([mvcc.Update(key, value, expected_revision)]).addCallback(mvcc.only)

    def delete(self, key, expected_revision=None):
        return self._write([mvcc.Delete(key, expected_revision)]).addCallback(mvcc.only)

    def commit(self, ops):
        mvcc.check_commit(ops)
        return self._write(list(ops))

    def watch(self, prefix, from_revision, sink):
        mvcc.check_watchable(self, from_revision)
        watch = self._watchers.add(prefix, from_revision, sink)
        history = self._log[self._after(from_revision):]
        watch.catch_up([self._values.event(event) for event in history
                        if event.kv.key.startswith(prefix)])
        return watch

    def sync(self):
        return None  # the only writer: every write has reached the watches

    def needs_rewrite(self, key):
        return key in self._values.stale_keys

    def compact(self, revision):
        try:
            mvcc.check_compactable(self, revision)
        except StorageError as error:
            return fail(error)
        del self._log[:self._after(revision)]
        self.compacted_revision = revision
        return succeed(None)

    def _write(self, ops: list):
        """``_apply(ops)`` once the transformer can store their values (a KMS plugin's seed)."""
        return self._values.then_all_prepared(ops, self.reactor, lambda: self._apply(ops))

    def _apply(self, ops: list):
        """
        Apply ``ops`` to the plaintext current versions, all at the next revision, or
        none (the first op whose condition fails, fails them); keep their events as
        stored.  Deferred of their versions.
        """
        revision = self.revision + 1
        try:
            events = [op.apply(self._values.kv(self._current.get(op.key)), revision)
                      for op in ops]
        except StorageError as error:
            return fail(error)
        self.revision = revision
        for op, event in zip(ops, events):
            stored = self._current.get(op.key)
            if event.type == DELETE:  # the deletion holds the last value, as stored
                kv = attrs.evolve(self._current.pop(op.key), mod_revision=revision)
            else:
                kv = self._current[op.key] = attrs.evolve(
                    event.kv, value=self._values.stored(op.key, event.kv.value))
            self._log.append(Event(event.type, kv, stored))
        acknowledged: Deferred[list] = Deferred()
        self._watchers.publish(events, lambda: acknowledged.callback([e.kv for e in events]))
        return acknowledged

    def _after(self, revision: int) -> int:
        """The index in the log of the first event newer than ``revision``."""
        return bisect.bisect_right(self._log, revision, key=attrgetter("revision"))

