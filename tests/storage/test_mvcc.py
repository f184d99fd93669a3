"""The shared backend kit (platformd/storage/mvcc.py) on its own."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from platformd.storage.interface import KeyValue
from platformd.storage.mvcc import Watchers
from tests.storage.conformance import Sink, created


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

    def test_several_events_at_one_revision(self):
        """A commit's events share a revision: each is delivered once, in order, whether
        history or live events bring it, the start revision's none."""
        watchers = Watchers()
        sink = Sink()
        watch = watchers.add("/", 2, sink)
        events = [created(KeyValue(key, b"", revision, revision))
                  for revision, key in [(2, "/x"), (3, "/a"), (3, "/b"), (3, "/c"), (4, "/d")]]
        watchers.publish(events[2:], lambda: None)  # live from the commit's second event
        watch.catch_up(events[:3])
        self.assertEqual(sink.events, events[1:])
