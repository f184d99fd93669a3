"""MemoryStorage: the contract, and what only a synchronous store promises."""

from __future__ import annotations

import attrs
from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from platformd.storage.interface import PUT, Event
from platformd.storage.memory import MemoryStorage
from tests.storage.conformance import (
    PrepareConformance,
    SealedConformance,
    Sink,
    StorageConformance,
    TransformerConformance,
    created,
)


class MemoryTestCase(TestCase):
    """The conformance hooks for MemoryStorage (see tests/storage/conformance.py)."""

    async def make_storage(self, **options):
        return MemoryStorage(MemoryReactorClock(), **options)

    def stored_values(self, store: MemoryStorage) -> list:
        # A revision may hold several keys' versions (a commit): in key order then.
        versions = {(kv.mod_revision, kv.key): kv.value for kv in store._current.values()}
        for event in store._log:
            if event.type == PUT:
                versions[event.revision, event.kv.key] = event.kv.value
            if event.prev is not None:
                versions[event.prev.mod_revision, event.prev.key] = event.prev.value
        return [versions[version] for version in sorted(versions)]

    def put_stored(self, store: MemoryStorage, key: str, data: bytes):
        old = store._current[key]
        new = store._current[key] = attrs.evolve(old, value=data)

        def swap(kv):
            return new if kv is old else kv

        store._log[:] = [Event(e.type, swap(e.kv), swap(e.prev)) for e in store._log]


class MemoryConformanceTests(StorageConformance, MemoryTestCase):
    pass


class MemorySealedConformanceTests(SealedConformance, MemoryTestCase):
    pass


class MemoryPrepareTests(PrepareConformance, MemoryTestCase):
    pass


class MemoryTransformerTests(TransformerConformance, MemoryTestCase):
    pass


class SynchronyTests(SynchronousTestCase):
    def test_results_already_fired(self):
        """Every Deferred has fired, and a watch has caught up, by the time the call returns."""
        store = MemoryStorage(MemoryReactorClock())
        kv = self.successResultOf(store.create("/k", b"1"))
        self.assertEqual(self.successResultOf(store.get("/k")), kv)
        sink = Sink()
        store.watch("/", 0, sink)
        self.assertEqual(sink.events, [created(kv)])

    def test_write_from_sink(self):
        """A write made by a sink reaches every watch after the event being delivered."""
        store = MemoryStorage(MemoryReactorClock())
        first, second = Sink(), Sink()
        acknowledged = []

        def write_once(event):
            first(event)
            if event.kv.key == "/a":
                store.create("/b", b"2").addCallback(acknowledged.append)

        store.watch("/", 0, write_once)
        store.watch("/", 0, second)
        a = self.successResultOf(store.create("/a", b"1"))
        [b] = acknowledged
        self.assertEqual(first.events, [created(a), created(b)])
        self.assertEqual(second.events, [created(a), created(b)])
