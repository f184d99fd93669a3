"""The bulk lane (``bulklane.py``): turns of bounded work, waiting for other writes."""

from __future__ import annotations

import attrs
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from platformd.bulklane import BUDGET, MAX_HOLD, BulkLane, BulkRequests, is_bulk
from platformd.storage.mvcc import Create, Delete


class LaneTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.lane = BulkLane(self.clock, ("/events/",))
        self.ran: list = []

    def work(self, name):
        return lambda: self.ran.append(name) or name

    def test_turns_within_the_budget_in_order(self):
        """
        Work runs in the order given, in turns of the lane's own (calls the reactor
        makes after polling its sockets), each ending once it has worked ``budget``.
        """
        spent = [0.0]
        lane = BulkLane(self.clock, ("/events/",), timer=lambda: spent[0])

        def work(n):
            def run():
                spent[0] += BUDGET * 0.6
                self.ran.append(n)
                return n
            return run
        done = [lane.later(work(n)) for n in range(5)]
        self.assertEqual((self.ran, len(self.clock.calls)), ([], 1))
        for turn in ([0, 1], [0, 1, 2, 3], [0, 1, 2, 3, 4]):
            call = self.clock.calls.pop(0)  # one turn, as the reactor runs it
            call.func(*call.args, **call.kw)
            self.assertEqual(self.ran, turn)
        self.assertEqual([self.successResultOf(d) for d in done], [0, 1, 2, 3, 4])
        self.assertEqual(self.clock.calls, [])

    def test_a_deferred_result_is_waited_for(self):
        waiting: Deferred = Deferred()
        done = self.lane.later(lambda: waiting)
        self.clock.advance(0)
        self.assertNoResult(done)
        waiting.callback("answered")
        self.assertEqual(self.successResultOf(done), "answered")

    def test_other_writes_hold_the_lane(self):
        """While another write is with the writer, the work waits; it runs at its release."""
        self.lane.hold()
        done = self.lane.later(self.work("event"))
        self.clock.advance(MAX_HOLD / 2)
        self.assertEqual(self.ran, [])
        self.assertEqual(self.lane.release("the write's result"), "the write's result")
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(done), "event")

    def test_the_hold_ends_after_max_hold(self):
        """
        The lane waits ``max_hold`` from the first of the other writes at most; writes
        that overlap it start no new wait, and one that comes after they all came back
        does.
        """
        self.lane.hold()
        self.lane.later(self.work(1))
        self.clock.advance(MAX_HOLD / 2)
        self.lane.hold()  # overlaps: the wait still ends MAX_HOLD after the first
        self.clock.advance(MAX_HOLD / 2)
        self.assertEqual(self.ran, [1])
        self.lane.later(self.work(2))
        self.clock.advance(0)
        self.assertEqual(self.ran, [1, 2])  # held, but the wait is over
        self.lane.release()
        self.lane.release()
        self.lane.hold()
        self.lane.later(self.work(3))
        self.clock.advance(0)
        self.assertEqual(self.ran, [1, 2])
        self.clock.advance(MAX_HOLD)
        self.assertEqual(self.ran, [1, 2, 3])

    def test_a_hold_during_a_scheduled_turn(self):
        """A write that goes to the writer before the turn comes holds the work back."""
        self.lane.later(self.work("event"))
        self.lane.hold()
        self.clock.advance(0)
        self.assertEqual(self.ran, [])
        self.lane.release()
        self.clock.advance(0)
        self.assertEqual(self.ran, ["event"])

    def test_cancelled_work_is_dropped(self):
        """Work whose Deferred was cancelled (client gone, deadline passed) never runs."""
        done = self.lane.later(self.work("gone"))
        kept = self.lane.later(self.work("kept"))
        done.cancel()
        self.clock.advance(0)
        self.assertEqual(self.ran, ["kept"])
        self.failureResultOf(done)
        self.assertEqual(self.successResultOf(kept), "kept")

    def test_passing_passes_results_and_failures(self):
        """An acknowledgement passed through the lane keeps its value or its failure."""
        value = succeed("kv").addCallback(self.lane.passing)
        failed = Deferred()
        failed.addErrback(self.lane.passing)
        failed.errback(Failure(KeyError("refused")))
        self.assertNoResult(value)
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(value), "kv")
        self.assertEqual(self.failureResultOf(failed, KeyError).value.args, ("refused",))

    def test_failing_work_does_not_stop_the_lane(self):
        def fails():
            raise ValueError("bad event")
        failed = self.lane.later(fails)
        after = self.lane.later(self.work("after"))
        self.clock.advance(0)
        self.failureResultOf(failed, ValueError)
        self.assertEqual(self.successResultOf(after), "after")

    def test_is_bulk(self):
        """A write is bulk when every key it writes is under a bulk prefix."""
        prefixes = ("/events/",)
        self.assertTrue(is_bulk([Create("/events/ns/e", b"")], prefixes))
        self.assertTrue(is_bulk([Create("/events/ns/e", b""), Delete("/events/ns/f", None)],
                                prefixes))
        self.assertFalse(is_bulk([Create("/events/ns/e", b""), Create("/roles/ns/r", b"")],
                                 prefixes))
        self.assertFalse(is_bulk([Create("/eventsx/ns/e", b"")], prefixes))
        self.assertFalse(is_bulk([Create("/events/ns/e", b"")], ()))
        self.assertFalse(is_bulk(object(), prefixes))  # a compaction


@attrs.define
class _Info:
    group: str
    resource: str
    verb: str


@attrs.define
class _Context:
    info: _Info


class BulkRequestsTests(SynchronousTestCase):
    def setUp(self):
        self.clock = Clock()
        self.filter = BulkRequests(BulkLane(self.clock), frozenset({("", "events")}))

    def serve(self, group, resource, verb):
        return self.filter(_Context(_Info(group, resource, verb)), lambda ctx: "served")

    def test_writes_to_bulk_resources_wait_in_the_lane(self):
        for verb in ("create", "update", "patch", "delete", "deletecollection"):
            served = self.serve("", "events", verb)
            self.assertNoResult(served)
            self.clock.advance(0)
            self.assertEqual(self.successResultOf(served), "served")

    def test_reads_and_other_resources_go_on_at_once(self):
        for group, resource, verb in (("", "events", "get"), ("", "events", "list"),
                                      ("", "events", "watch"), ("", "pods", "create"),
                                      ("events.example.com", "events", "create")):
            self.assertEqual(self.serve(group, resource, verb), "served")
