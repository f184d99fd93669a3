"""MemoryStorage: the contract, and what only a synchronous store promises."""

from __future__ import annotations

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase, TestCase

from platformd.storage.interface import KeyValue
from platformd.storage.memory import MemoryStorage, Watchers
from tests.storage.conformance import Sink, StorageConformance, created


class MemoryConformanceTests(StorageConformance, TestCase):
    async def make_storage(self):
        return MemoryStorage(MemoryReactorClock())


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


class WatchTests(SynchronousTestCase):
    def test_history_overlapping_held_events(self):
        """Events held during the catch-up follow the history, once each, after from_revision."""
        watchers = Watchers()
        sink = Sink()
        watch = watchers.add("/a/", 1, sink)
        events = [created(KeyValue(key, b"", revision, revision))
                  for revision, key in enumerate(["/a/1", "/a/2", "/b/3", "/a/4", "/a/5"], 1)]
        watchers.publish(events[3:], lambda: None)
        self.assertEqual(sink.events, [])
        watch.catch_up(events[:4])
        self.assertEqual([event.kv.key for event in sink.events], ["/a/2", "/a/4", "/a/5"])
