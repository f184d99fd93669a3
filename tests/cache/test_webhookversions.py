"""
A converted version view's feed on a ``Clock``, its webhook replaced by a converter
whose answers the test gives: rounds in order (one review per turn's events), reads
waiting for the view, a failure's error and retries, and the bounded queue.
"""

from __future__ import annotations

import copy

import orjson
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from platformd import errors
from platformd.cache.watchcache import KindCache, WatchCache
from platformd.cache.webhookversions import ConvertingFeed
from platformd.informing import UnknownKindError
from platformd.registry.catalog import builtin
from platformd.registry.customresources import kind_for
from platformd.storage.memory import MemoryStorage
from platformd.storage.interface import DELETE, PUT, Event, KeyValue
from tests.apiextensions.test_crd import definition


class Converter:
    """``convert(objects, api_version)``: each call held until the test answers it."""

    def __init__(self):
        self.calls: list = []

    def __call__(self, objects, api_version):
        d: Deferred = Deferred()
        self.calls.append((objects, api_version, d))
        return d

    def answer(self, index: int = -1):
        objects, api_version, d = self.calls[index]
        d.callback([{**copy.deepcopy(o), "apiVersion": api_version} for o in objects])

    def fail(self, index: int = -1):
        self.calls[index][2].errback(errors.StatusError(500, "", "conversion webhook failed"))


class Watcher:
    def __init__(self):
        self.events: list = []
        self.removed = False

    def offer(self, event):
        self.events.append(event)

    def kind_removed(self):
        self.removed = True


def stored(name: str, api_version: str = "example.com/v1") -> bytes:
    return orjson.dumps({"kind": "Widget", "apiVersion": api_version,
                         "metadata": {"name": name, "namespace": "default"}})


def key(name: str) -> str:
    return f"/registry/widgets.example.com/default/{name}"


def put(name: str, revision: int, api_version: str = "example.com/v1") -> Event:
    return Event(PUT, KeyValue(key(name), stored(name, api_version), revision, revision),
                 None)


class FeedTests(SynchronousTestCase):
    def setUp(self):
        crd = definition()
        v2 = copy.deepcopy(crd["spec"]["versions"][0])
        v2["name"], v2["storage"] = "v2", False
        self.clock = Clock()
        self.source = KindCache(kind_for(crd, crd["spec"]["versions"][0]), self.clock)
        self.source.load(put("a", 1).kv)
        self.source.mark_loaded(1)
        self.view = KindCache(kind_for(crd, v2), self.clock)
        self.revision = 1
        self.convert = Converter()
        self.feed = self.view.feed = ConvertingFeed(
            self.view, self.source, self.convert, lambda: self.revision, self.clock,
            max_pending=3)
        self.feed.start()

    def event(self, name: str, api_version: str = "example.com/v1") -> Event:
        self.revision += 1
        event = put(name, self.revision, api_version)
        self.source.apply(event)
        self.feed.offer(event)
        return event

    def test_first_round_loads(self):
        """The view loads once every current object is converted, in one review."""
        self.assertFalse(self.view.loaded)
        self.assertEqual(len(self.convert.calls), 1)
        self.assertEqual(self.convert.calls[0][1], "example.com/v2")
        self.convert.answer()
        self.assertTrue(self.view.loaded)
        self.assertIsNone(self.view.ready_at(1))
        self.assertIn(b'"apiVersion":"example.com/v2"',
                      self.view.get("/registry/widgets.example.com/default/a").raw)

    def test_turn_of_events_one_review_reads_wait(self):
        """A turn's events go in one review; a read waits for them, and is answered at
        the revision the view holds meanwhile."""
        self.convert.answer()
        watcher = Watcher()
        self.view.add_watcher("", watcher)
        self.event("b")
        self.event("c")
        waiting = self.view.ready_at(self.revision)
        self.assertIsInstance(waiting, Deferred)
        self.assertEqual(self.view.state_revision(self.revision), 1)
        self.clock.advance(0)
        self.assertEqual(len(self.convert.calls), 2)
        self.assertEqual([o["metadata"]["name"] for o in self.convert.calls[1][0]], ["b", "c"])
        self.assertNoResult(waiting)
        self.convert.answer()
        self.successResultOf(waiting)
        self.assertEqual(self.view.state_revision(self.revision), self.revision)
        self.clock.advance(0)
        self.assertEqual([e.type for e in watcher.events], ["ADDED", "ADDED"])
        # A deletion needs no conversion (no review) but keeps its place in order.
        self.event("d")
        self.revision += 1
        gone = Event(DELETE, KeyValue("/registry/widgets.example.com/default/b", b"",
                                      2, self.revision), None)
        self.source.apply(gone)
        self.feed.offer(gone)
        self.clock.advance(0)
        self.assertEqual([o["metadata"]["name"] for o in self.convert.calls[2][0]], ["d"])
        self.convert.answer()
        self.assertEqual(len(self.convert.calls), 3)
        self.clock.advance(0)
        self.assertEqual([e.type for e in watcher.events],
                         ["ADDED", "ADDED", "ADDED", "DELETED"])

    def test_failure_is_the_reads_then_retried(self):
        """A failed conversion: waiting reads fail with its error, watchers end; a read
        retries at once, else the backoff does (0.8 s)."""
        self.convert.answer()
        watcher = Watcher()
        self.view.add_watcher("", watcher)
        self.event("b")
        waiting = self.view.ready_at(self.revision)
        self.clock.advance(0)
        self.convert.fail()
        self.assertEqual(self.failureResultOf(waiting, errors.StatusError).value.message,
                         "conversion webhook failed")
        self.assertTrue(watcher.removed)
        self.assertEqual(len(self.convert.calls), 2)
        self.clock.advance(0.8)
        self.assertEqual(len(self.convert.calls), 3)  # the resync, after the backoff
        self.convert.fail()
        again = self.view.ready_at(self.revision)  # a read: converted again now
        self.assertEqual(len(self.convert.calls), 4)
        self.convert.answer()
        self.successResultOf(again)
        self.assertEqual(len(self.view.current("/registry/widgets.example.com/")), 2)
        self.assertEqual(self.view.horizon, self.revision)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_queue_bounded(self):
        """Past ``max_pending`` queued events the view's watches end and it resyncs."""
        self.convert.answer()
        watcher = Watcher()
        self.view.add_watcher("", watcher)
        self.event("b")
        self.clock.advance(0)  # a round is out for "b"
        for name in "cdef":
            self.event(name)
        self.assertTrue(watcher.removed)
        self.assertTrue(self.feed.resync)
        self.convert.answer()  # "b"; then the resync reads all six
        self.assertEqual(len(self.convert.calls[-1][0]), 6)
        self.convert.answer()
        self.assertIsNone(self.view.ready_at(self.revision))

    def test_unconverted_events_pass_at_once(self):
        """An event needing no conversion, offered while nothing waits before it, is
        applied at once (no review, no wait); behind one being converted it keeps its
        place."""
        self.convert.answer()
        self.event("b", "example.com/v2")
        self.assertIsNone(self.view.ready_at(self.revision))
        self.assertIsNotNone(self.view.get(key("b")))
        self.event("c")
        self.event("d", "example.com/v2")
        self.assertIsNone(self.view.get(key("d")))
        self.clock.advance(0)
        self.assertEqual([o["metadata"]["name"] for o in self.convert.calls[-1][0]],
                         ["c", "d"])
        self.convert.answer()
        self.assertEqual(len(self.convert.calls), 2)
        self.assertEqual([e.key for e in self.view.history], [key("b"), key("c"), key("d")])

    def test_one_object_read_while_failing(self):
        """While conversion fails, a read of one object needing none (or absent) goes
        on and reads it as stored, even changed since; one stored in another version
        fails with the conversion's error."""
        self.convert.answer()
        self.event("b", "example.com/v2")
        self.event("c")
        waiting_b = self.view.ready_for(key("b"), self.revision)
        waiting_c = self.view.ready_for(key("c"), self.revision)
        self.clock.advance(0)
        self.convert.fail()
        self.successResultOf(waiting_b)
        self.failureResultOf(waiting_c, errors.StatusError)
        self.assertIsNone(self.view.ready_for(key("nothing"), self.revision))
        self.assertIsNone(self.view.get(key("nothing")))
        self.event("b", "example.com/v2")  # dropped by the failed view, but stored
        self.assertIsNone(self.view.ready_for(key("b"), self.revision))
        self.assertEqual(self.view.get(key("b")).revision, self.revision)
        self.assertIsInstance(self.view.ready_for(key("c"), self.revision), Deferred)


class StoredViewTests(SynchronousTestCase):
    """The storage version served through the webhook (``WatchCache.add_kind`` with a
    ``converter``): objects stored under an earlier version converted, the others as
    stored, one kind served, removed whole."""

    def setUp(self):
        crd = definition()
        v1 = crd["spec"]["versions"][0]
        v2 = copy.deepcopy(v1)
        v1["storage"], v2["name"] = False, "v2"
        crd["spec"]["versions"].append(v2)
        self.kind = kind_for(crd, v2)
        self.clock = Clock()
        self.storage = MemoryStorage(self.clock)
        self.successResultOf(self.storage.start())
        self.cache = WatchCache(self.storage, builtin(), self.clock)
        self.successResultOf(self.cache.start())
        self.successResultOf(self.storage.create(key("a"), stored("a")))
        self.convert = Converter()
        self.loaded = self.cache.add_kind(self.kind, converter=self.convert)

    def create(self, name: str, api_version: str) -> None:
        self.successResultOf(self.storage.create(key(name), stored(name, api_version)))

    def test_converted_then_served(self):
        view = self.cache.for_kind(self.kind)
        self.assertNoResult(self.loaded)
        [(objects, desired, _)] = self.convert.calls
        self.assertEqual(([o["metadata"]["name"] for o in objects], desired),
                         (["a"], "example.com/v2"))
        self.convert.answer()
        self.successResultOf(self.loaded)
        self.assertIn(b'"apiVersion":"example.com/v2"', view.get(key("a")).raw)
        self.assertTrue(view.stored_elsewise(key("a")))
        self.create("b", "example.com/v2")
        self.assertIsNone(view.ready_at(self.cache.revision))
        self.assertFalse(view.stored_elsewise(key("b")))
        self.create("c", "example.com/v1")
        self.assertIsInstance(view.ready_at(self.cache.revision), Deferred)
        self.clock.advance(0)
        self.convert.answer()
        self.assertEqual(len(self.convert.calls), 2)
        self.assertEqual([e.name for e in view.current(self.kind.storage_prefix)],
                         ["a", "b", "c"])
        self.assertEqual([k.gvr for k in self.cache.served()].count(self.kind.gvr), 1)

    def test_removed_whole(self):
        """Removing the kind removes its view and the objects held as stored."""
        self.convert.answer()
        view = self.cache.for_kind(self.kind)
        self.cache.remove_kind(self.kind)
        self.assertTrue(view.removed)
        self.assertTrue(view.feed.stopped)
        with self.assertRaises(UnknownKindError):
            self.cache.for_kind(self.kind)
        self.assertNotIn(self.kind.gvr, [k.gvr for k in self.cache.served()])
        self.successResultOf(self.cache.add_kind(self.kind))  # served again, plainly
